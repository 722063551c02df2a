#ifndef FOLIO_COMMON_JINJA_OBJECTS_H_
#define FOLIO_COMMON_JINJA_OBJECTS_H_

// The runtime objects of a render, after jinja2.runtime / jinja2.utils:
// macros (and call-block callers), namespace(), loop contexts, one-shot
// iterators (what jinja's generator-returning filters give back), builtin
// functions and bound methods, cycler() and joiner().
//
// Thread-safety: like Value, these belong to one render.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/ast.h"
#include "common/jinja/scope.h"
#include "common/jinja/value.h"

namespace folio::jinja {

class Interpreter;

// Evaluated call arguments.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class MacroObject : public Object {
 public:
  // `closure` is where the macro was defined; it is held weakly (a macro
  // stored in its own scope would otherwise keep the scope alive forever).
  MacroObject(const ast::Macro* node, std::weak_ptr<Scope> closure)
      : node_(node), closure_(std::move(closure)) {}
  Kind kind() const override { return Kind::kMacro; }
  std::string TypeName() const override { return "Macro"; }
  std::string Repr() const override { return "<Macro '" + node_->name + "'>"; }
  bool Callable() const override { return true; }
  const ast::Macro& node() const { return *node_; }
  std::shared_ptr<Scope> closure() const { return closure_.lock(); }

 private:
  const ast::Macro* node_;  // owned by the Template
  std::weak_ptr<Scope> closure_;
};

class NamespaceObject : public Object {
 public:
  Kind kind() const override { return Kind::kNamespace; }
  std::string TypeName() const override { return "Namespace"; }
  std::string Repr() const override { return "<Namespace>"; }  // py_format prints the attributes
  DictData& attrs() { return attrs_; }

 private:
  DictData attrs_;
};

// A for loop's `loop` variable; the interpreter advances index0.
class LoopObject : public Object {
 public:
  LoopObject(std::vector<Value> items, int depth0, const ast::For* node, std::weak_ptr<Scope> scope)
      : items_(std::move(items)), depth0_(depth0), node_(node), scope_(std::move(scope)) {}
  ~LoopObject() override { ReleaseValues(&items_); }
  Kind kind() const override { return Kind::kLoop; }
  std::string TypeName() const override { return "LoopContext"; }
  std::string Repr() const override;
  bool Callable() const override { return true; }  // loop(children) in recursive loops

  const std::vector<Value>& items() const { return items_; }
  int64_t index0() const { return index0_; }
  void set_index0(int64_t i) { index0_ = i; }
  int depth0() const { return depth0_; }
  const ast::For* node() const { return node_; }
  std::shared_ptr<Scope> scope() const { return scope_.lock(); }
  // loop.changed(*values): whether the values differ from the last call's.
  bool Changed(std::vector<Value> values);
  // loop.<name>, or nullopt for names a LoopContext lacks.
  std::optional<Value> Attribute(std::string_view name) const;

 private:
  std::vector<Value> items_;
  int64_t index0_ = -1;
  const int depth0_;
  const ast::For* node_;
  std::weak_ptr<Scope> scope_;
  bool has_changed_value_ = false;
  std::vector<Value> last_changed_;
};

// A one-shot iterator (Python generator or reverse iterator): always true,
// no len(), exhausted by iterating.
class IteratorObject : public Object {
 public:
  IteratorObject(std::string type_name, std::vector<Value> items)
      : type_name_(std::move(type_name)), items_(std::move(items)) {}
  ~IteratorObject() override { ReleaseValues(&items_); }
  Kind kind() const override { return Kind::kIterator; }
  std::string TypeName() const override { return type_name_; }
  std::string Repr() const override { return "<" + type_name_ + " object>"; }
  // The items not yet consumed; the iterator is exhausted afterwards.
  std::vector<Value> Drain();

 private:
  std::string type_name_;
  std::vector<Value> items_;
  size_t pos_ = 0;
};

class FunctionObject : public Object {
 public:
  using Fn = absl::StatusOr<Value> (*)(Interpreter&, CallArgs&);
  FunctionObject(std::string name, Fn fn) : name_(std::move(name)), fn_(fn) {}
  Kind kind() const override { return Kind::kFunction; }
  std::string TypeName() const override { return "function"; }
  std::string Repr() const override { return "<function " + name_ + ">"; }
  bool Callable() const override { return true; }
  absl::StatusOr<Value> Call(Interpreter& in, CallArgs& args) const { return fn_(in, args); }

 private:
  std::string name_;
  Fn fn_;
};

// obj.method taken without calling it.
class MethodObject : public Object {
 public:
  MethodObject(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  Kind kind() const override { return Kind::kMethod; }
  std::string TypeName() const override { return "builtin_function_or_method"; }
  std::string Repr() const override;
  bool Callable() const override { return true; }
  const Value& self() const { return self_; }
  const std::string& name() const { return name_; }

 private:
  Value self_;
  std::string name_;
};

class CyclerObject : public Object {
 public:
  explicit CyclerObject(std::vector<Value> items) : items_(std::move(items)) {}
  ~CyclerObject() override { ReleaseValues(&items_); }
  Kind kind() const override { return Kind::kCycler; }
  std::string TypeName() const override { return "Cycler"; }
  std::string Repr() const override { return "<jinja2.utils.Cycler object>"; }
  const Value& current() const { return items_[pos_]; }
  Value Next() {
    Value v = items_[pos_];
    pos_ = (pos_ + 1) % items_.size();
    return v;
  }
  void Reset() { pos_ = 0; }

 private:
  std::vector<Value> items_;  // never empty
  size_t pos_ = 0;
};

class JoinerObject : public Object {
 public:
  explicit JoinerObject(std::string sep) : sep_(std::move(sep)) {}
  Kind kind() const override { return Kind::kJoiner; }
  std::string TypeName() const override { return "Joiner"; }
  std::string Repr() const override { return "<jinja2.utils.Joiner object>"; }
  bool Callable() const override { return true; }
  std::string Next() {
    if (!used_) {
      used_ = true;
      return "";
    }
    return sep_;
  }

 private:
  std::string sep_;
  bool used_ = false;
};

// Python iteration: list items, dict keys, str characters, an iterator's
// rest; Undefined iterates as empty. TypeError "'int' object is not
// iterable" otherwise.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_OBJECTS_H_
