#ifndef FOLIO_COMMON_JINJA_SCOPE_H_
#define FOLIO_COMMON_JINJA_SCOPE_H_

// A frame of variables: the template's top level, a loop iteration, a
// macro call, a with/set/filter block. Lookups walk out to the parent; the
// root's parent holds the render context. jinja's scoping follows from
// where the interpreter opens frames: loop bodies and macros get fresh ones
// (assignments there never leak out), if-statements do not.
//
// Thread-safety: belongs to one render.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/jinja/value.h"

namespace folio::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    std::vector<Value> values;
    values.reserve(vars_.size());
    for (auto& [name, v] : vars_) values.push_back(std::move(v));
    ReleaseValues(&values);
  }

  // This frame or the nearest enclosing one holding `name`; null if none.
  const Value* Find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
      for (const auto& [n, v] : s->vars_) {
        if (n == name) return &v;
      }
    }
    return nullptr;
  }
  // Binds in this frame.
  void Set(std::string_view name, Value value) {
    for (auto& [n, v] : vars_) {
      if (n == name) {
        v = std::move(value);
        return;
      }
    }
    vars_.emplace_back(std::string(name), std::move(value));
  }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_SCOPE_H_
