#include "common/jinja/objects.h"

#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/operators.h"
#include "common/jinja/text.h"

namespace folio::jinja {

std::string LoopObject::Repr() const {
  return Cat("<LoopContext ", index0_ + 1, "/", items_.size(), ">");
}

bool LoopObject::Changed(std::vector<Value> values) {
  bool same = has_changed_value_ && values.size() == last_changed_.size();
  for (size_t i = 0; same && i < values.size(); ++i) same = Equals(values[i], last_changed_[i]);
  if (same) return false;
  has_changed_value_ = true;
  last_changed_ = std::move(values);
  return true;
}

std::optional<Value> LoopObject::Attribute(std::string_view name) const {
  const int64_t length = static_cast<int64_t>(items_.size());
  if (name == "index") return Value::Int(index0_ + 1);
  if (name == "index0") return Value::Int(index0_);
  if (name == "length") return Value::Int(length);
  if (name == "revindex") return Value::Int(length - index0_);
  if (name == "revindex0") return Value::Int(length - index0_ - 1);
  if (name == "first") return Value::Bool(index0_ == 0);
  if (name == "last") return Value::Bool(index0_ + 1 >= length);
  if (name == "depth") return Value::Int(depth0_ + 1);
  if (name == "depth0") return Value::Int(depth0_);
  if (name == "previtem") {
    if (index0_ <= 0) return Value::Undefined("there is no previous item");
    return items_[index0_ - 1];
  }
  if (name == "nextitem") {
    if (index0_ + 1 >= length) return Value::Undefined("there is no next item");
    return items_[index0_ + 1];
  }
  return std::nullopt;
}

std::vector<Value> IteratorObject::Drain() {
  std::vector<Value> rest;
  rest.reserve(items_.size() - pos_);
  for (; pos_ < items_.size(); ++pos_) rest.push_back(std::move(items_[pos_]));
  ReleaseValues(&items_);
  pos_ = 0;
  return rest;
}

std::string MethodObject::Repr() const {
  return Cat("<built-in method ", name_, " of ", jinja::TypeName(self_), " object>");
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::vector<Value>();
    case Value::Kind::kList: return v.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, item] : v.dict().entries()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      size_t pos = 0;
      while (pos < s.size()) {
        size_t start = pos;
        text::Decode(s, &pos);
        chars.push_back(Value::String(s.substr(start, pos - start)));
      }
      return chars;
    }
    case Value::Kind::kObject:
      if (v.object().kind() == Object::Kind::kIterator) {
        return static_cast<IteratorObject&>(v.object()).Drain();
      }
      break;
    default: break;
  }
  return TemplateError(Cat("'", TypeName(v), "' object is not iterable"));
}

}  // namespace folio::jinja
