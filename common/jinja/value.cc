#include "common/jinja/value.h"

#include <cmath>
#include <limits>

#include "common/jinja/cat.h"
#include "common/jinja/errors.h"

namespace folio::jinja {
namespace {

// Destruction of nested containers goes through this list instead of the
// stack: while it is set, releasing a container moves its children here.
thread_local std::vector<Value>* g_pending_release = nullptr;

bool KeyEquals(const Value& a, const Value& b) {
  if (a.is_string() || b.is_string()) return a.is_string() && b.is_string() && a.str() == b.str();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_tuple() && b.is_tuple()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!KeyEquals(x[i], y[i])) return false;
    }
    return true;
  }
  return a.identity() != nullptr && a.identity() == b.identity();
}

}  // namespace

void ReleaseValues(std::vector<Value>* values) {
  if (g_pending_release != nullptr) {
    for (Value& v : *values) {
      if (v.is_container()) g_pending_release->push_back(std::move(v));
    }
    values->clear();
    return;
  }
  std::vector<Value> pending;
  g_pending_release = &pending;
  for (Value& v : *values) {
    if (v.is_container()) pending.push_back(std::move(v));
  }
  values->clear();
  while (!pending.empty()) {
    // Destroying `v` may push its own children onto `pending`.
    Value v = std::move(pending.back());
    pending.pop_back();
  }
  g_pending_release = nullptr;
}

ListData::ListData(std::vector<Value> v, Flavor f) : items(std::move(v)), flavor(f) {}

ListData::~ListData() { ReleaseValues(&items); }

DictData::~DictData() { Clear(); }

void DictData::Clear() {
  std::vector<Value> values;
  values.reserve(entries_.size() * 2);
  for (auto& [k, v] : entries_) {
    values.push_back(std::move(k));
    values.push_back(std::move(v));
  }
  entries_.clear();
  string_index_.clear();
  ReleaseValues(&values);
}

const Value* DictData::FindString(std::string_view key) const {
  auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* DictData::Find(const Value& key) const {
  if (key.is_string()) return FindString(key.str());
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && KeyEquals(k, key)) return &v;
  }
  return nullptr;
}

void DictData::Set(Value key, Value value) {
  if (key.is_string()) {
    auto it = string_index_.find(std::string_view(key.str()));
    if (it != string_index_.end()) {
      entries_[it->second].second = std::move(value);
      return;
    }
    string_index_.emplace(key.str(), entries_.size());
  } else {
    for (auto& [k, v] : entries_) {
      if (!k.is_string() && KeyEquals(k, key)) {
        v = std::move(value);
        return;
      }
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string message, bool security) {
  auto info = std::make_shared<UndefinedInfo>();
  info->message = std::move(message);
  info->security = security;
  return Value(Storage(std::in_place_index<0>, std::move(info)));
}

Value Value::String(std::string s) {
  return Value(Storage(std::in_place_index<5>, std::make_shared<const std::string>(std::move(s))));
}

Value Value::List(std::vector<Value> items, ListData::Flavor flavor) {
  return Value(Storage(std::in_place_index<6>, std::make_shared<ListData>(std::move(items), flavor)));
}

Value Value::Dict(std::shared_ptr<DictData> dict) {
  return Value(Storage(std::in_place_index<7>, std::move(dict)));
}

Value Value::FromObject(std::shared_ptr<Object> object) {
  return Value(Storage(std::in_place_index<8>, std::move(object)));
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::kString: return std::get<5>(storage_).get();
    case Kind::kList: return std::get<6>(storage_).get();
    case Kind::kDict: return std::get<7>(storage_).get();
    case Kind::kObject: return std::get<8>(storage_).get();
    default: return nullptr;
  }
}

absl::StatusOr<Value> Value::FromJson(const nlohmann::ordered_json& json, int max_depth) {
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null: return None();
    case Type::boolean: return Bool(json.get<bool>());
    case Type::number_integer: return Int(json.get<int64_t>());
    case Type::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Float(static_cast<double>(u));
      }
      return Int(static_cast<int64_t>(u));
    }
    case Type::number_float: return Float(json.get<double>());
    case Type::string: return String(json.get<std::string>());
    case Type::array: {
      if (max_depth <= 0) return TemplateError("the context is nested too deeply");
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        absl::StatusOr<Value> v = FromJson(item, max_depth - 1);
        if (!v.ok()) return v.status();
        items.push_back(*std::move(v));
      }
      return List(std::move(items));
    }
    case Type::object: {
      if (max_depth <= 0) return TemplateError("the context is nested too deeply");
      auto dict = std::make_shared<DictData>();
      for (auto it = json.begin(); it != json.end(); ++it) {
        absl::StatusOr<Value> v = FromJson(it.value(), max_depth - 1);
        if (!v.ok()) return v.status();
        dict->Set(String(it.key()), *std::move(v));
      }
      return Dict(std::move(dict));
    }
    default: return TemplateError("the context holds a value JSON templates cannot use (binary)");
  }
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.as_bool();
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_double() != 0.0;
    case Value::Kind::kString: return !v.str().empty();
    case Value::Kind::kList: return !v.list().items.empty();
    case Value::Kind::kDict: return v.dict().size() != 0;
    case Value::Kind::kObject: return true;
  }
  return false;
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList:
      switch (v.list().flavor) {
        case ListData::Flavor::kList: return "list";
        case ListData::Flavor::kTuple: return "tuple";
        case ListData::Flavor::kDictKeys: return "dict_keys";
        case ListData::Flavor::kDictValues: return "dict_values";
        case ListData::Flavor::kDictItems: return "dict_items";
      }
      return "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kObject: return v.object().TypeName();
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_object()) {
    switch (v.object().kind()) {
      case Object::Kind::kMacro:
      case Object::Kind::kLoop: return Cat("jinja2.runtime.", v.object().TypeName(), " object");
      case Object::Kind::kNamespace:
      case Object::Kind::kCycler:
      case Object::Kind::kJoiner: return Cat("jinja2.utils.", v.object().TypeName(), " object");
      default: break;
    }
  }
  if (v.is_undefined()) return "jinja2.runtime.Undefined object";
  return Cat(TypeName(v), " object");
}

}  // namespace folio::jinja
