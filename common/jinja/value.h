#ifndef FOLIO_COMMON_JINJA_VALUE_H_
#define FOLIO_COMMON_JINJA_VALUE_H_

// The values a template computes with, modelled on the Python objects jinja2
// hands around: Undefined, None, bool, int (64-bit here), float, str (UTF-8),
// list / tuple (and dict views), dict (insertion ordered, any hashable key)
// and opaque objects (macros, namespaces, loop contexts, generators, …).
//
// Lists, dicts and objects are shared by reference like Python's; the only
// in-place mutations are list.pop/clear (the sandbox allows them) and
// namespace attribute assignment. Deeply nested containers are destroyed
// iteratively, so a template cannot overflow the stack by building them.
//
// Thread-safety: a Value and everything reachable from it belongs to one
// render; values are never shared between threads.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace folio::jinja {

class Value;
class Object;

struct ListData {
  // What Python type the sequence is: it changes only how it prints and a
  // few type checks (a tuple is not equal to a list).
  enum class Flavor : uint8_t { kList, kTuple, kDictKeys, kDictValues, kDictItems };
  ListData() = default;
  ListData(std::vector<Value> v, Flavor f);
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;
  ~ListData();

  std::vector<Value> items;
  Flavor flavor = Flavor::kList;
  bool group = false;  // groupby()'s (grouper, list) tuples, with those two attributes
};

// An insertion-ordered mapping with Python key equality (1 == 1.0 == True).
class DictData {
 public:
  DictData() = default;
  DictData(const DictData&) = delete;
  DictData& operator=(const DictData&) = delete;
  ~DictData();

  const Value* Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;
  // Inserts, or replaces the value in place (keeping the key's position).
  // REQUIRES: key is hashable (IsHashable).
  void Set(Value key, Value value);
  size_t size() const;  // defined after Value: clang needs it complete here
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  void Clear();

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> string_index_;
};

// Why an Undefined is undefined; the message of the error raised when it is
// used in a way jinja's default Undefined refuses.
struct UndefinedInfo {
  std::string message;
  bool security = false;  // the sandbox's unsafe-attribute undefined
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject };

  Value() = default;  // a plain undefined
  static Value Undefined(std::string message, bool security = false);
  static Value None() { return Value(Storage(std::in_place_index<1>, nullptr)); }
  static Value Bool(bool b) { return Value(Storage(std::in_place_index<2>, b)); }
  static Value Int(int64_t i) { return Value(Storage(std::in_place_index<3>, i)); }
  static Value Float(double d) { return Value(Storage(std::in_place_index<4>, d)); }
  static Value String(std::string s);
  static Value List(std::vector<Value> items,
                    ListData::Flavor flavor = ListData::Flavor::kList);
  static Value Tuple(std::vector<Value> items) {
    return List(std::move(items), ListData::Flavor::kTuple);
  }
  static Value Dict(std::shared_ptr<DictData> dict);
  static Value FromObject(std::shared_ptr<Object> object);
  // JSON → Python values (int stays int, float stays float, objects keep
  // their order). INVALID_ARGUMENT past max_depth levels of nesting.
  static absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, int max_depth);

  Kind kind() const { return static_cast<Kind>(storage_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // bool, int or float: Python's numbers.Number.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  // bool or int: Python's int.
  bool is_integral() const { return is_bool() || is_int(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_tuple() const { return is_list() && list().flavor == ListData::Flavor::kTuple; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_container() const { return kind() >= Kind::kList; }

  bool as_bool() const { return std::get<2>(storage_); }
  // REQUIRES: is_integral().
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<3>(storage_); }
  // REQUIRES: is_number().
  double as_double() const { return is_float() ? std::get<4>(storage_) : static_cast<double>(as_int()); }
  const std::string& str() const { return *std::get<5>(storage_); }
  ListData& list() const { return *std::get<6>(storage_); }
  DictData& dict() const { return *std::get<7>(storage_); }
  Object& object() const { return *std::get<8>(storage_); }
  const std::shared_ptr<Object>& object_ptr() const { return std::get<8>(storage_); }
  // The reason an undefined is undefined ("'x' is undefined" if unknown).
  const UndefinedInfo* undefined_info() const { return std::get<0>(storage_).get(); }
  // Identity of a container or object (Python's `is`); null for scalars.
  const void* identity() const;

 private:
  using Storage = std::variant<std::shared_ptr<const UndefinedInfo>, std::nullptr_t, bool, int64_t,
                               double, std::shared_ptr<const std::string>, std::shared_ptr<ListData>,
                               std::shared_ptr<DictData>, std::shared_ptr<Object>>;
  explicit Value(Storage s) : storage_(std::move(s)) {}

  Storage storage_;
};

inline size_t DictData::size() const { return entries_.size(); }

// Opaque runtime objects. Subclasses say what they are through kind().
class Object {
 public:
  enum class Kind : uint8_t {
    kMacro, kNamespace, kLoop, kIterator, kFunction, kMethod, kCycler, kJoiner
  };
  virtual ~Object() = default;
  virtual Kind kind() const = 0;
  // Python's type(x).__name__, for error messages and tests.
  virtual std::string TypeName() const = 0;
  virtual std::string Repr() const = 0;
  virtual bool Callable() const { return false; }
};

// Python truthiness (Undefined is false).
bool Truthy(const Value& v);
// Python type(x).__name__ ("str", "int", "NoneType", "list", …).
std::string TypeName(const Value& v);
// What jinja's undefined errors call the type: "'dict object'", "'None'".
std::string ObjectTypeRepr(const Value& v);

// Releases containers held by `values` without recursion (see value.cc).
void ReleaseValues(std::vector<Value>* values);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_VALUE_H_
