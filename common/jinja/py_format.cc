#include "common/jinja/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/objects.h"
#include "common/jinja/operators.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

using Flavor = ListData::Flavor;

thread_local int64_t g_format_limit = INT64_MAX;

absl::Status TooDeep() {
  return TemplateError("maximum recursion depth exceeded while getting the repr of an object");
}

void AppendHex(std::string* out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, digits, value);
  out->append(buf);
}

void AppendJsonString(std::string* out, std::string_view s, bool ensure_ascii) {
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      ++pos;
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
            AppendHex(out, "\\u", c, 4);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      continue;
    }
    size_t start = pos;
    char32_t cp = text::Decode(s, &pos);
    if (!ensure_ascii) {
      out->append(s.substr(start, pos - start));
    } else if (cp < 0x10000) {
      AppendHex(out, "\\u", cp, 4);
    } else {
      cp -= 0x10000;
      AppendHex(out, "\\u", 0xD800 + (cp >> 10), 4);
      AppendHex(out, "\\u", 0xDC00 + (cp & 0x3FF), 4);
    }
  }
  out->push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o) : o_(o) {}

  absl::Status Write(const Value& v, int level) {
    if (level > kMaxPrintDepth) return TemplateError("Circular reference detected (or nesting too deep)");
    FOLIO_JINJA_RETURN_IF_ERROR(CheckFormatLimit(out_.size()));
    switch (v.kind()) {
      case Value::Kind::kNone: out_ += "null"; return absl::OkStatus();
      case Value::Kind::kBool: out_ += v.as_bool() ? "true" : "false"; return absl::OkStatus();
      case Value::Kind::kInt: Append(&out_, v.as_int()); return absl::OkStatus();
      case Value::Kind::kFloat: out_ += JsonFloat(v.as_double()); return absl::OkStatus();
      case Value::Kind::kString: AppendJsonString(&out_, v.str(), o_.ensure_ascii); return absl::OkStatus();
      case Value::Kind::kList:
        if (v.list().flavor == Flavor::kList || v.list().flavor == Flavor::kTuple) return WriteList(v, level);
        break;
      case Value::Kind::kDict: return WriteDict(v, level);
      default: break;
    }
    return TemplateError(Cat("Object of type ", TypeName(v), " is not JSON serializable"));
  }

  std::string Take() { return std::move(out_); }

 private:
  void Newline(int level) {
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *o_.indent;
  }

  absl::Status WriteList(const Value& v, int level) {
    const auto& items = v.list().items;
    if (items.empty()) {
      out_ += "[]";
      return absl::OkStatus();
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += o_.item_separator;
      if (o_.indent) Newline(level + 1);
      FOLIO_JINJA_RETURN_IF_ERROR(Write(items[i], level + 1));
    }
    if (o_.indent) Newline(level);
    out_.push_back(']');
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Key(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString: return k.str();
      case Value::Kind::kBool: return std::string(k.as_bool() ? "true" : "false");
      case Value::Kind::kNone: return std::string("null");
      case Value::Kind::kInt: return Cat(k.as_int());
      case Value::Kind::kFloat: return JsonFloat(k.as_double());
      default:
        return TemplateError(Cat("keys must be str, int, float, bool or None, not ", TypeName(k)));
    }
  }

  absl::Status WriteDict(const Value& v, int level) {
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : v.dict().entries()) entries.push_back(&e);
    if (entries.empty()) {
      out_ += "{}";
      return absl::OkStatus();
    }
    if (o_.sort_keys) {
      absl::Status error;
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        if (!error.ok()) return false;
        absl::StatusOr<int> c = Compare(a->first, b->first);
        if (!c.ok()) {
          error = c.status();
          return false;
        }
        return *c < 0;
      });
      FOLIO_JINJA_RETURN_IF_ERROR(error);
    }
    out_.push_back('{');
    bool first = true;
    for (const auto* e : entries) {
      if (!first) out_ += o_.item_separator;
      first = false;
      if (o_.indent) Newline(level + 1);
      FOLIO_JINJA_ASSIGN_OR_RETURN(std::string key, Key(e->first));
      AppendJsonString(&out_, key, o_.ensure_ascii);
      out_ += o_.key_separator;
      FOLIO_JINJA_RETURN_IF_ERROR(Write(e->second, level + 1));
    }
    if (o_.indent) Newline(level);
    out_.push_back('}');
    return absl::OkStatus();
  }

  const JsonOptions& o_;
  std::string out_;
};

// ---- printf-style formatting ----

struct Spec {
  bool left = false, plus = false, space = false, zero = false, alt = false;
  int width = -1;
  int precision = -1;
};

void Pad(std::string* out, std::string body, const Spec& spec, bool numeric) {
  int len = static_cast<int>(text::Length(body));
  if (spec.width <= len) {
    *out += body;
    return;
  }
  int fill = spec.width - len;
  if (spec.left) {
    *out += body;
    out->append(fill, ' ');
  } else if (spec.zero && numeric) {
    // zeros go after the sign and any 0x prefix
    size_t prefix = 0;
    if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) prefix = 1;
    if (body.size() > prefix + 1 && body[prefix] == '0' && std::string_view("xXob").find(body[prefix + 1]) != std::string_view::npos) {
      prefix += 2;
    }
    *out += body.substr(0, prefix);
    out->append(fill, '0');
    *out += body.substr(prefix);
  } else {
    out->append(fill, ' ');
    *out += body;
  }
}

std::string SignedDigits(bool negative, std::string digits, const Spec& spec) {
  if (negative) return "-" + digits;
  if (spec.plus) return "+" + digits;
  if (spec.space) return " " + digits;
  return digits;
}

absl::StatusOr<std::string> FormatFloatC(double d, char type, const Spec& spec) {
  if (std::isnan(d) || std::isinf(d)) {
    std::string body = std::isnan(d) ? "nan" : "inf";
    if (std::isupper(static_cast<unsigned char>(type))) body = text::Upper(body);
    return SignedDigits(std::signbit(d) && !std::isnan(d), body, spec);
  }
  std::string fmt = "%";
  if (spec.alt) fmt += '#';
  if (spec.plus) fmt += '+';
  if (spec.space) fmt += ' ';
  fmt += ".*";
  fmt += type;
  int precision = spec.precision < 0 ? 6 : spec.precision;
  int n = std::snprintf(nullptr, 0, fmt.c_str(), precision, d);
  std::string buf(n + 1, '\0');
  std::snprintf(buf.data(), buf.size(), fmt.c_str(), precision, d);
  buf.resize(n);
  return buf;
}

absl::StatusOr<std::string> ConvertOne(char type, const Value& arg, const Spec& spec, bool* numeric) {
  *numeric = false;
  switch (type) {
    case 's':
    case 'r':
    case 'a': {
      FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, type == 's' ? Str(arg) : Repr(arg));
      if (spec.precision >= 0) {
        std::u32string u = text::ToU32(s);
        if (static_cast<int>(u.size()) > spec.precision) s = text::FromU32(u.substr(0, spec.precision));
      }
      return s;
    }
    case 'd':
    case 'i':
    case 'u': {
      *numeric = true;
      if (!arg.is_number()) {
        return TemplateError(Cat("%", std::string(1, type), " format: a real number is required, not ",
                                          TypeName(arg)));
      }
      if (arg.is_float() && (std::isnan(arg.as_double()) || std::isinf(arg.as_double()))) {
        return TemplateError("cannot convert float NaN or infinity to integer");
      }
      int64_t v = arg.is_float() ? static_cast<int64_t>(std::trunc(arg.as_double())) : arg.as_int();
      std::string digits = Cat(v < 0 ? -static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
      if (spec.precision > static_cast<int>(digits.size())) digits.insert(0, spec.precision - digits.size(), '0');
      return SignedDigits(v < 0, digits, spec);
    }
    case 'o':
    case 'x':
    case 'X': {
      *numeric = true;
      if (!arg.is_integral()) {
        return TemplateError(Cat("%", std::string(1, type), " format: an integer is required, not ",
                                          TypeName(arg)));
      }
      int64_t v = arg.as_int();
      uint64_t mag = v < 0 ? -static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      char buf[32];
      std::snprintf(buf, sizeof(buf), type == 'o' ? "%llo" : type == 'x' ? "%llx" : "%llX",
                    static_cast<unsigned long long>(mag));
      std::string digits = buf;
      if (spec.precision > static_cast<int>(digits.size())) digits.insert(0, spec.precision - digits.size(), '0');
      if (spec.alt) digits = (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") + digits;
      return SignedDigits(v < 0, digits, spec);
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      *numeric = true;
      if (!arg.is_number()) {
        return TemplateError(Cat("must be real number, not ", TypeName(arg)));
      }
      return FormatFloatC(arg.as_double(), type, spec);
    case 'c':
      if (arg.is_integral()) {
        std::string s;
        text::Append(&s, static_cast<char32_t>(arg.as_int()));
        return s;
      }
      if (arg.is_string() && text::Length(arg.str()) == 1) return arg.str();
      return TemplateError("%c requires int or char");
    default:
      return TemplateError(Cat("unsupported format character '", std::string(1, type), "'"));
  }
}

}  // namespace

ScopedFormatLimit::ScopedFormatLimit(int64_t max_bytes) : saved_(g_format_limit) { g_format_limit = max_bytes; }

ScopedFormatLimit::~ScopedFormatLimit() { g_format_limit = saved_; }

absl::Status CheckFormatLimit(size_t size) {
  if (static_cast<int64_t>(size) > g_format_limit) {
    return LimitError(Cat("a formatted value exceeds max_output_bytes (", g_format_limit, ")"));
  }
  return absl::OkStatus();
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, end - buf);  // "-1.2345e+02"
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  if (exp >= -5 + 1 && exp < 16) {
    // fixed notation, as repr() uses for 1e-4 <= |d| < 1e16
    int point = exp + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0.";
      out.append(-point, '0');
      out += digits;
    } else if (point >= n) {
      out += digits;
      out.append(point - n, '0');
      out += ".0";
    } else {
      out += digits.substr(0, point);
      out += '.';
      out += digits.substr(point);
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out += ebuf;
  return out;
}

void AppendStringRepr(std::string* out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  out->push_back(quote);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = text::Decode(s, &pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out->append("\\n");
    } else if (cp == '\r') {
      out->append("\\r");
    } else if (cp == '\t') {
      out->append("\\t");
    } else if (!text::IsPrintable(cp)) {
      if (cp < 0x100) {
        AppendHex(out, "\\x", cp, 2);
      } else if (cp < 0x10000) {
        AppendHex(out, "\\u", cp, 4);
      } else {
        AppendHex(out, "\\U", cp, 8);
      }
    } else {
      out->append(s.substr(start, pos - start));
    }
  }
  out->push_back(quote);
}

absl::Status AppendStr(std::string* out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return absl::OkStatus();
    case Value::Kind::kString: *out += v.str(); return absl::OkStatus();
    default: return AppendRepr(out, v, 0);
  }
}

absl::Status AppendRepr(std::string* out, const Value& v, int depth) {
  if (depth > kMaxPrintDepth) return TooDeep();
  switch (v.kind()) {
    case Value::Kind::kUndefined: *out += "Undefined"; return absl::OkStatus();
    case Value::Kind::kNone: *out += "None"; return absl::OkStatus();
    case Value::Kind::kBool: *out += v.as_bool() ? "True" : "False"; return absl::OkStatus();
    case Value::Kind::kInt: Append(out, v.as_int()); return absl::OkStatus();
    case Value::Kind::kFloat: *out += FloatRepr(v.as_double()); return absl::OkStatus();
    case Value::Kind::kString: AppendStringRepr(out, v.str()); return absl::OkStatus();
    case Value::Kind::kList: {
      const ListData& l = v.list();
      const char* open = "[";
      const char* close = "]";
      switch (l.flavor) {
        case Flavor::kList: break;
        case Flavor::kTuple: open = "(", close = ")"; break;
        case Flavor::kDictKeys: open = "dict_keys([", close = "])"; break;
        case Flavor::kDictValues: open = "dict_values([", close = "])"; break;
        case Flavor::kDictItems: open = "dict_items([", close = "])"; break;
      }
      *out += open;
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i > 0) *out += ", ";
        FOLIO_JINJA_RETURN_IF_ERROR(AppendRepr(out, l.items[i], depth + 1));
        FOLIO_JINJA_RETURN_IF_ERROR(CheckFormatLimit(out->size()));
      }
      if (l.flavor == Flavor::kTuple && l.items.size() == 1) *out += ",";
      *out += close;
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      *out += "{";
      bool first = true;
      for (const auto& [k, item] : v.dict().entries()) {
        if (!first) *out += ", ";
        first = false;
        FOLIO_JINJA_RETURN_IF_ERROR(AppendRepr(out, k, depth + 1));
        *out += ": ";
        FOLIO_JINJA_RETURN_IF_ERROR(AppendRepr(out, item, depth + 1));
        FOLIO_JINJA_RETURN_IF_ERROR(CheckFormatLimit(out->size()));
      }
      *out += "}";
      return absl::OkStatus();
    }
    case Value::Kind::kObject:
      if (v.object().kind() == Object::Kind::kNamespace) {
        *out += "<Namespace {";
        bool first = true;
        for (const auto& [k, item] : static_cast<NamespaceObject&>(v.object()).attrs().entries()) {
          if (!first) *out += ", ";
          first = false;
          FOLIO_JINJA_RETURN_IF_ERROR(AppendRepr(out, k, depth + 1));
          *out += ": ";
          FOLIO_JINJA_RETURN_IF_ERROR(AppendRepr(out, item, depth + 1));
        }
        *out += "}>";
        return absl::OkStatus();
      }
      *out += v.object().Repr();
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  FOLIO_JINJA_RETURN_IF_ERROR(AppendStr(&out, v));
  return out;
}

absl::StatusOr<std::string> Repr(const Value& v) {
  std::string out;
  FOLIO_JINJA_RETURN_IF_ERROR(AppendRepr(&out, v, 0));
  return out;
}

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options) {
  JsonWriter w(options);
  FOLIO_JINJA_RETURN_IF_ERROR(w.Write(v, 0));
  return w.Take();
}

absl::StatusOr<std::string> PercentFormat(std::string_view format, const Value& args, bool allow_unused) {
  const bool mapping = args.is_dict();
  const std::vector<Value> empty;
  const std::vector<Value>& positional = args.is_tuple() ? args.list().items : empty;
  size_t next_arg = 0;
  std::string out;
  auto take = [&]() -> absl::StatusOr<Value> {
    if (mapping) {
      if (next_arg++ == 0) return args;  // "%s" % {..} formats the dict itself
      return TemplateError("not enough arguments for format string");
    }
    if (next_arg >= positional.size()) return TemplateError("not enough arguments for format string");
    return positional[next_arg++];
  };
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) return TemplateError("incomplete format");
    Value arg;
    bool have_arg = false;
    if (format[i] == '(') {
      if (!mapping) return TemplateError("format requires a mapping");
      size_t close = format.find(')', i);
      if (close == std::string_view::npos) return TemplateError("incomplete format key");
      const Value* found = args.dict().FindString(format.substr(i + 1, close - i - 1));
      if (found == nullptr) {
        std::string key_repr;
        AppendStringRepr(&key_repr, format.substr(i + 1, close - i - 1));
        return TemplateError(Cat("KeyError: ", key_repr));
      }
      arg = *found;
      have_arg = true;
      i = close + 1;
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      char f = format[i];
      if (f == '-') spec.left = true;
      else if (f == '+') spec.plus = true;
      else if (f == ' ') spec.space = true;
      else if (f == '0') spec.zero = true;
      else if (f == '#') spec.alt = true;
      else break;
    }
    auto read_number = [&](int* target) -> absl::Status {
      if (i < format.size() && format[i] == '*') {
        ++i;
        FOLIO_JINJA_ASSIGN_OR_RETURN(Value w, take());
        if (!w.is_integral()) return TemplateError("* wants int");
        *target = static_cast<int>(std::clamp<int64_t>(w.as_int(), -(1 << 24), 1 << 24));
        return absl::OkStatus();
      }
      int n = 0;
      bool any = false;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = std::min(n * 10 + (format[i++] - '0'), 1 << 20);
        any = true;
      }
      if (any) *target = n;
      return absl::OkStatus();
    };
    FOLIO_JINJA_RETURN_IF_ERROR(read_number(&spec.width));
    if (spec.width < -1) {
      spec.left = true;
      spec.width = -spec.width;
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      FOLIO_JINJA_RETURN_IF_ERROR(read_number(&spec.precision));
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) return TemplateError("incomplete format");
    char type = format[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!have_arg) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(arg, take());
    }
    bool numeric = false;
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string body, ConvertOne(type, arg, spec, &numeric));
    Pad(&out, std::move(body), spec, numeric);
    FOLIO_JINJA_RETURN_IF_ERROR(CheckFormatLimit(out.size()));
  }
  if (!mapping && !allow_unused && next_arg < positional.size()) {
    return TemplateError("not all arguments converted during string formatting");
  }
  return out;
}

absl::StatusOr<std::string> FormatWithSpec(const Value& value, std::string_view spec_text) {
  if (spec_text.empty()) return Str(value);
  // [[fill]align][sign][#][0][width][,|_][.precision][type]
  std::u32string spec = text::ToU32(spec_text);
  size_t i = 0;
  char32_t fill = ' ';
  char align = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    fill = spec[0];
    align = static_cast<char>(spec[1]);
    i = 2;
  } else if (!spec.empty() && is_align(spec[0])) {
    align = static_cast<char>(spec[0]);
    i = 1;
  }
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = static_cast<char>(spec[i++]);
  bool alt = false;
  if (i < spec.size() && spec[i] == '#') alt = true, ++i;
  if (i < spec.size() && spec[i] == '0') {
    if (align == 0) fill = '0', align = '=';
    ++i;
  }
  int width = 0;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') width = std::min(width * 10 + int(spec[i++] - '0'), 1 << 20);
  char grouping = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) grouping = static_cast<char>(spec[i++]);
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') precision = std::min(precision * 10 + int(spec[i++] - '0'), 1 << 20);
  }
  char type = 0;
  if (i < spec.size()) type = static_cast<char>(spec[i++]);
  if (i != spec.size()) return TemplateError("Invalid format specifier");

  std::string body;
  bool numeric = value.is_number();
  if (value.is_string() || (!numeric && type == 's')) {
    if (type != 0 && type != 's') {
      return TemplateError(Cat("Unknown format code '", std::string(1, type), "' for object of type 'str'"));
    }
    FOLIO_JINJA_ASSIGN_OR_RETURN(body, Str(value));
    if (precision >= 0) {
      std::u32string u = text::ToU32(body);
      if (static_cast<int>(u.size()) > precision) body = text::FromU32(u.substr(0, precision));
    }
    if (align == 0) align = '<';
  } else if (numeric) {
    if (align == 0) align = '>';
    bool as_int = value.is_integral() && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' ||
                                          type == 'b' || type == 'n' || type == 'c');
    bool negative;
    std::string digits;
    if (as_int) {
      int64_t v = value.as_int();
      negative = v < 0;
      uint64_t mag = negative ? -static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      if (type == 'c') {
        text::Append(&digits, static_cast<char32_t>(v));
        negative = false;
      } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
        int base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
        do {
          int d = static_cast<int>(mag % base);
          digits.insert(digits.begin(), static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
          mag /= base;
        } while (mag > 0);
        if (alt) digits = std::string(type == 'o' ? "0o" : type == 'b' ? "0b" : type == 'X' ? "0X" : "0x") + digits;
      } else {
        digits = Cat(mag);
      }
    } else {
      if (value.is_integral() && type == 0) type = 'd';
      double d = value.as_double();
      negative = std::signbit(d) && !std::isnan(d);
      double mag = std::fabs(d);
      if (type == 0 && precision < 0) {
        digits = FloatRepr(mag);
      } else if (type == 0 || type == 'n') {
        Spec s;
        s.precision = precision < 0 ? 6 : std::max(precision, 1);
        s.alt = alt;
        FOLIO_JINJA_ASSIGN_OR_RETURN(digits, FormatFloatC(mag, 'g', s));
        if (type == 0 && digits.find_first_of(".e") == std::string::npos && std::isfinite(mag)) digits += ".0";
      } else if (type == '%') {
        Spec s;
        s.precision = precision < 0 ? 6 : precision;
        s.alt = alt;
        FOLIO_JINJA_ASSIGN_OR_RETURN(digits, FormatFloatC(mag * 100, 'f', s));
        digits += '%';
      } else if (std::string_view("eEfFgG").find(type) != std::string_view::npos) {
        Spec s;
        s.precision = precision < 0 ? 6 : precision;
        s.alt = alt;
        FOLIO_JINJA_ASSIGN_OR_RETURN(digits, FormatFloatC(mag, type, s));
      } else {
        return TemplateError(Cat("Unknown format code '", std::string(1, type), "' for object of type '",
                                          TypeName(value), "'"));
      }
    }
    if (grouping != 0) {
      size_t end = digits.find_first_of(".e%");
      if (end == std::string::npos) end = digits.size();
      for (int k = static_cast<int>(end) - 3; k > 0; k -= 3) digits.insert(k, 1, grouping);
    }
    std::string sign_text = negative ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
    if (align == '=') {
      int len = static_cast<int>(sign_text.size() + text::Length(digits));
      std::string pad;
      for (int k = len; k < width; ++k) text::Append(&pad, fill);
      return sign_text + pad + digits;
    }
    body = sign_text + digits;
  } else {
    return TemplateError(Cat("unsupported format string passed to ", TypeName(value), ".__format__"));
  }
  int len = static_cast<int>(text::Length(body));
  if (len >= width) return body;
  int total = width - len;
  int before = align == '<' ? 0 : align == '^' ? total / 2 : total;
  std::string out;
  for (int k = 0; k < before; ++k) text::Append(&out, fill);
  out += body;
  for (int k = before; k < total; ++k) text::Append(&out, fill);
  return out;
}

}  // namespace folio::jinja
