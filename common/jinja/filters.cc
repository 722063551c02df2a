// jinja's builtin filters on scalars and strings, and the filter registry
// (the sequence filters are in seq_filters.cc). tojson is transformers'
// override: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/filters.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"
#include "common/jinja/str_methods.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

absl::StatusOr<std::string> Text(const Value& v) { return Str(v); }

// Python float(str): whitespace around, underscores between digits,
// inf/nan spelled any case.
std::optional<double> ParsePyFloat(std::string_view s) {
  std::string t = PyStrip(s, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      if (i == 0 || i + 1 >= t.size() || !absl::ascii_isdigit(t[i - 1]) || !absl::ascii_isdigit(t[i + 1])) {
        return std::nullopt;
      }
      continue;
    }
    clean.push_back(t[i]);
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = absl::AsciiStrToLower(clean);
  std::string_view body = lower;
  bool negative = false;
  if (body[0] == '+' || body[0] == '-') {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return negative ? -HUGE_VAL : HUGE_VAL;
  if (body == "nan") return std::nan("");
  for (char c : body) {
    if (!absl::ascii_isdigit(c) && c != '.' && c != 'e' && c != '+' && c != '-') return std::nullopt;
  }
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python int(str, base) for bases 2..36 (and 0: by prefix).
std::optional<int64_t> ParsePyInt(std::string_view s, int base) {
  std::string t = PyStrip(s, nullptr, true, true);
  std::string_view body = t;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body.size() > 1 && body[0] == '0') {
    char p = static_cast<char>(body[1] | 0x20);
    int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      body.remove_prefix(2);
      if (!body.empty() && body[0] == '_') body.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (body.empty()) return std::nullopt;
  uint64_t v = 0;
  bool prev_digit = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '_') {
      if (!prev_digit || i + 1 >= body.size()) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = absl::ascii_isdigit(c) ? c - '0' : absl::ascii_isalpha(c) ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (v > (UINT64_MAX - d) / base) return std::nullopt;
    v = v * base + d;
    prev_digit = true;
  }
  if (v > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0)) return std::nullopt;
  return negative ? static_cast<int64_t>(-v) : static_cast<int64_t>(v);
}

absl::StatusOr<Value> Abs(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("abs", args, {}));
  if (input.is_integral()) {
    if (input.as_int() == INT64_MIN) return TemplateError("integer overflow");
    return Value::Int(std::abs(input.as_int()));
  }
  if (input.is_float()) return Value::Float(std::fabs(input.as_double()));
  return TemplateError(Cat("bad operand type for abs(): '", TypeName(input), "'"));
}

absl::StatusOr<Value> Attr(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("attr", args, {"name"}, 1));
  if (input.is_undefined()) return UndefinedError(input);
  if (!a[0]->is_string()) return TemplateError("attribute name must be string");
  if (std::optional<Value> v = GetPythonAttribute(input, a[0]->str())) return *v;
  return Value::Undefined(Cat("'", ObjectTypeRepr(input), "' has no attribute '", a[0]->str(), "'"));
}

absl::StatusOr<Value> Capitalize(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("capitalize", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  return Value::String(PyCapitalize(s));
}

absl::StatusOr<Value> Center(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("center", args, {"width"}));
  int64_t width = 80;
  if (a[0]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(width, ToIndex(*a[0], "center"));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  return Value::String(PyCenter(s, std::min(width, in.max_output_bytes()), U' '));
}

absl::StatusOr<Value> Default(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("default", args, {"default_value", "boolean"}));
  bool boolean = a[1] && Truthy(*a[1]);
  if (input.is_undefined() || (boolean && !Truthy(input))) return a[0] ? *a[0] : Value::String("");
  return input;
}

absl::StatusOr<Value> Escape(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("escape", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FileSizeFormat(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("filesizeformat", args, {"binary"}));
  double bytes;
  if (input.is_number()) {
    bytes = input.as_double();
  } else if (input.is_string() && ParsePyFloat(input.str())) {
    bytes = *ParsePyFloat(input.str());
  } else {
    return TemplateError(Cat("float() argument must be a string or a real number, not '", TypeName(input), "'"));
  }
  bool binary = a[0] && Truthy(*a[0]);
  double base = binary ? 1024 : 1000;
  const char* prefixes[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  const char* decimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  if (bytes == 1) return Value::String("1 Byte");
  if (bytes < base) return Value::String(Cat(static_cast<int64_t>(bytes), " Bytes"));
  double unit = base;
  int i = 0;
  for (; i < 8; ++i) {
    unit = std::pow(base, i + 2);
    if (bytes < unit) break;
  }
  if (i == 8) i = 7;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f %s", base * bytes / unit, binary ? prefixes[i] : decimal[i]);
  return Value::String(buf);
}

absl::StatusOr<Value> Float(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("float", args, {"default"}));
  Value fallback = a[0] ? *a[0] : Value::Float(0.0);
  if (input.is_undefined()) return UndefinedError(input);
  if (input.is_number()) return Value::Float(input.as_double());
  if (input.is_string()) {
    if (std::optional<double> d = ParsePyFloat(input.str())) return Value::Float(*d);
  }
  return fallback;
}

absl::StatusOr<Value> Int(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("int", args, {"default", "base"}));
  Value fallback = a[0] ? *a[0] : Value::Int(0);
  int64_t base = 10;
  if (a[1]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(base, ToIndex(*a[1], "int"));
  }
  if (input.is_undefined()) return UndefinedError(input);
  if (input.is_integral()) return Value::Int(input.as_int());
  if (input.is_float()) {
    double d = input.as_double();
    if (std::isinf(d)) return TemplateError("cannot convert float infinity to integer");
    if (std::isnan(d)) return fallback;
    if (std::fabs(d) >= 9.2e18) return TemplateError("integer overflow (folio's template integers are 64-bit)");
    return Value::Int(static_cast<int64_t>(std::trunc(d)));
  }
  if (input.is_string()) {
    if (base != 0 && (base < 2 || base > 36)) return TemplateError("int() base must be >= 2 and <= 36, or 0");
    if (std::optional<int64_t> v = ParsePyInt(input.str(), static_cast<int>(base))) return Value::Int(*v);
    // jinja's quirk: "42.23"|int gives 42
    if (std::optional<double> d = ParsePyFloat(input.str())) {
      if (std::isinf(*d)) return TemplateError("cannot convert float infinity to integer");
      if (std::isnan(*d)) return fallback;
      return Value::Int(static_cast<int64_t>(std::trunc(*d)));
    }
  }
  return fallback;
}

absl::StatusOr<Value> Format(Interpreter&, const Value& input, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    return TemplateError("can't handle positional and keyword arguments at the same time");
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string fmt, Text(input));
  Value params;
  if (!args.keyword.empty()) {
    auto dict = std::make_shared<DictData>();
    for (auto& [k, v] : args.keyword) dict->Set(Value::String(k), v);
    params = Value::Dict(std::move(dict));
  } else {
    params = Value::Tuple(args.positional);
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string out, PercentFormat(fmt, params));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Indent(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("indent", args, {"width", "first", "blank"}));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->str();
    } else {
      FOLIO_JINJA_ASSIGN_OR_RETURN(int64_t w, ToIndex(*a[0], "indent"));
      indention = std::string(std::clamp<int64_t>(w, 0, 1 << 20), ' ');
    }
  }
  if (input.is_undefined()) return UndefinedError(input);
  if (!input.is_string()) {
    return TemplateError(Cat("unsupported operand type(s) for +=: '", TypeName(input), "' and 'str'"));
  }
  std::vector<std::string> lines = PySplitLines(input.str() + "\n", false);
  if (static_cast<int64_t>(input.str().size() + (lines.size() + 1) * indention.size()) > in.max_output_bytes()) {
    return LimitError(Cat("indent result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
  }
  std::string rv;
  if (a[2] && Truthy(*a[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (a[1] && Truthy(*a[1])) rv = indention + rv;
  FOLIO_JINJA_RETURN_IF_ERROR(in.ChargeBytes(rv.size()));
  if (static_cast<int64_t>(rv.size()) > in.max_output_bytes()) {
    return LimitError(Cat("indent result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
  }
  return Value::String(std::move(rv));
}

absl::StatusOr<Value> Lower(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("lower", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  return Value::String(text::Lower(s));
}

absl::StatusOr<Value> Upper(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("upper", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  return Value::String(text::Upper(s));
}

absl::StatusOr<Value> Pprint(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("pprint", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Repr(input));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> Replace(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string old, Text(*a[0]));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string rep, Text(*a[1]));
  int64_t count = -1;
  if (a[2] && !a[2]->is_none()) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(count, ToIndex(*a[2], "replace"));
  }
  FOLIO_JINJA_RETURN_IF_ERROR(in.ChargeBytes(s.size()));
  if (static_cast<int64_t>(PyReplaceSize(s, old, rep, count)) > in.max_output_bytes()) {
    return LimitError(Cat("replace result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
  }
  return Value::String(PyReplace(s, old, rep, count));
}

// round(x, n) as Python does it: half to even on the exact binary value.
double RoundDouble(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    if (n > 300) return x;
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / p) * p;
}

absl::StatusOr<Value> Round(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("round", args, {"precision", "method"}));
  int64_t precision = 0;
  if (a[0]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(precision, ToIndex(*a[0], "round"));
  }
  std::string method = "common";
  if (a[1]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(method, Text(*a[1]));
  }
  if (method != "common" && method != "ceil" && method != "floor") {
    return TemplateError("method must be common, ceil or floor");
  }
  if (!input.is_number()) {
    return TemplateError(Cat("type ", TypeName(input), " doesn't define __round__ method"));
  }
  if (method == "common") {
    if (input.is_integral()) {
      int64_t v = input.as_int();
      if (precision >= 0) return Value::Int(v);
      double p = std::pow(10.0, static_cast<double>(-precision));
      return Value::Int(static_cast<int64_t>(std::nearbyint(static_cast<double>(v) / p) * p));
    }
    return Value::Float(RoundDouble(input.as_double(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = input.as_double() * scale;
  double r = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value::Float(r / scale);
}

absl::StatusOr<Value> Safe(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("safe", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> StringFilter(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("string", args, {}));
  if (input.is_string()) return input;
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  return Value::String(std::move(s));
}

std::string HtmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out.push_back('&');
      continue;
    }
    std::string_view name = s.substr(i + 1, semi - i - 1);
    std::string rep;
    if (name == "amp") rep = "&";
    else if (name == "lt") rep = "<";
    else if (name == "gt") rep = ">";
    else if (name == "quot") rep = "\"";
    else if (name == "apos") rep = "'";
    else if (name == "nbsp") rep = "\xC2\xA0";
    else if (name.size() > 1 && name[0] == '#') {
      bool hex = name[1] == 'x' || name[1] == 'X';
      std::string digits(name.substr(hex ? 2 : 1));
      char* end = nullptr;
      long cp = std::strtol(digits.c_str(), &end, hex ? 16 : 10);
      if (!digits.empty() && *end == '\0' && cp > 0 && cp <= 0x10FFFF) text::Append(&rep, static_cast<char32_t>(cp));
    }
    if (rep.empty()) {
      out.push_back('&');
      continue;
    }
    out += rep;
    i = semi;
  }
  return out;
}

absl::StatusOr<Value> Striptags(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("striptags", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  std::string no_comments;
  for (size_t i = 0; i < s.size();) {
    size_t open = s.find("<!--", i);
    if (open == std::string::npos) {
      no_comments += s.substr(i);
      break;
    }
    size_t close = s.find("-->", open + 4);
    if (close == std::string::npos) {
      no_comments += s.substr(i);
      break;
    }
    no_comments += s.substr(i, open - i);
    i = close + 3;
  }
  std::string no_tags;
  for (size_t i = 0; i < no_comments.size();) {
    size_t open = no_comments.find('<', i);
    size_t close = open == std::string::npos ? std::string::npos : no_comments.find('>', open + 1);
    if (close == std::string::npos) {
      no_tags += no_comments.substr(i);
      break;
    }
    no_tags += no_comments.substr(i, open - i);
    i = close + 1;
  }
  std::vector<std::string> words = PySplit(no_tags, nullptr, -1, false);
  std::string joined;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) joined += ' ';
    joined += words[i];
  }
  return Value::String(HtmlUnescape(joined));
}

absl::StatusOr<Value> Title(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("title", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  // jinja splits before runs of [-\s({\[<] and capitalizes each piece.
  auto is_break = [](char32_t cp) {
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || text::IsSpace(cp);
  };
  std::string out;
  size_t pos = 0;
  bool start_of_piece = true;
  bool in_break = false;
  while (pos < s.size()) {
    char32_t cp = text::Decode(s, &pos);
    bool brk = is_break(cp);
    if (brk != in_break) start_of_piece = true;
    in_break = brk;
    if (start_of_piece) {
      text::AppendUpper(&out, cp);
      start_of_piece = false;
    } else {
      text::AppendLower(&out, cp);
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> ToJsonFilter(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(
      auto a, BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = a[0] && Truthy(*a[0]);
  o.sort_keys = a[3] && Truthy(*a[3]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      o.indent = a[1]->str();
    } else {
      FOLIO_JINJA_ASSIGN_OR_RETURN(int64_t n, ToIndex(*a[1], "tojson"));
      o.indent = std::string(std::clamp<int64_t>(n, 0, 1 << 16), ' ');
    }
    o.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    const Value& sep = *a[2];
    if (!sep.is_list() || sep.list().items.size() != 2 || !sep.list().items[0].is_string() ||
        !sep.list().items[1].is_string()) {
      return TemplateError("separators must be a (item_separator, key_separator) pair of strings");
    }
    o.item_separator = sep.list().items[0].str();
    o.key_separator = sep.list().items[1].str();
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string out, ToJson(input, o));
  FOLIO_JINJA_RETURN_IF_ERROR(in.ChargeBytes(out.size()));
  if (static_cast<int64_t>(out.size()) > in.max_output_bytes()) {
    return LimitError(Cat("tojson result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Trim(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("trim", args, {"chars"}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  if (a[0] && !a[0]->is_none()) {
    if (!a[0]->is_string()) return TemplateError("strip arg must be None or str");
    return Value::String(PyStrip(s, &a[0]->str(), true, true));
  }
  return Value::String(PyStrip(s, nullptr, true, true));
}

absl::StatusOr<Value> Truncate(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("truncate", args, {"length", "killwords", "end", "leeway"}));
  int64_t length = 255, leeway = 5;
  if (a[0]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(length, ToIndex(*a[0], "truncate"));
  }
  if (a[3] && !a[3]->is_none()) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(leeway, ToIndex(*a[3], "truncate"));
  }
  std::string end = "...";
  if (a[2]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(end, Text(*a[2]));
  }
  std::u32string uend = text::ToU32(end);
  if (length < static_cast<int64_t>(uend.size())) {
    return TemplateError(Cat("expected length >= ", uend.size(), ", got ", length));
  }
  if (leeway < 0) return TemplateError(Cat("expected leeway >= 0, got ", leeway));
  if (!input.is_string() && !input.is_undefined()) {
    // jinja takes len() of what it is given and returns it when short.
    int64_t len = input.is_list() ? static_cast<int64_t>(input.list().items.size())
                  : input.is_dict() ? static_cast<int64_t>(input.dict().size())
                                    : -1;
    if (len < 0) return TemplateError(Cat("object of type '", TypeName(input), "' has no len()"));
    if (len <= length + leeway) return input;
    return TemplateError(Cat("'", TypeName(input), "' object has no attribute 'rsplit'"));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  std::u32string u = text::ToU32(s);
  if (static_cast<int64_t>(u.size()) <= length + leeway) return input;
  std::u32string head = u.substr(0, length - uend.size());
  if (a[1] && Truthy(*a[1])) return Value::String(text::FromU32(head) + end);
  size_t space = head.rfind(U' ');
  if (space != std::u32string::npos) head = head.substr(0, space);
  return Value::String(text::FromU32(head) + end);
}

void UrlQuote(std::string* out, std::string_view s, bool for_qs) {
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (!for_qs && c == '/')) {
      out->push_back(static_cast<char>(c));
    } else if (for_qs && c == ' ') {
      out->push_back('+');
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out->append(buf);
    }
  }
}

absl::StatusOr<Value> Urlencode(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("urlencode", args, {}));
  std::string out;
  if (input.is_string() || !(input.is_list() || input.is_dict())) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
    UrlQuote(&out, s, false);
    return Value::String(std::move(out));
  }
  std::vector<std::pair<Value, Value>> pairs;
  if (input.is_dict()) {
    pairs = input.dict().entries();
  } else {
    for (const Value& item : input.list().items) {
      if (!item.is_list() || item.list().items.size() != 2) return TemplateError("urlencode expects pairs");
      pairs.emplace_back(item.list().items[0], item.list().items[1]);
    }
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0) out += '&';
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string k, Text(pairs[i].first));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string v, Text(pairs[i].second));
    UrlQuote(&out, k, true);
    out += '=';
    UrlQuote(&out, v, true);
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Wordcount(Interpreter&, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("wordcount", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Text(input));
  int64_t n = 0;
  bool in_word = false;
  size_t pos = 0;
  while (pos < s.size()) {
    bool w = text::IsWord(text::Decode(s, &pos));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

absl::StatusOr<Value> Unsupported(Interpreter&, const Value&, CallArgs&) {
  return TemplateError("this filter is not supported in chat templates");
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

// jinja2.filters.FILTERS, sorted by name.
constexpr FilterEntry kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"batch", FilterBatch},
    {"capitalize", Capitalize},
    {"center", Center},
    {"count", FilterLength},
    {"d", Default},
    {"default", Default},
    {"dictsort", FilterDictsort},
    {"e", Escape},
    {"escape", Escape},
    {"filesizeformat", FileSizeFormat},
    {"first", FilterFirst},
    {"float", Float},
    {"forceescape", Escape},
    {"format", Format},
    {"groupby", FilterGroupby},
    {"indent", Indent},
    {"int", Int},
    {"items", FilterItems},
    {"join", FilterJoin},
    {"last", FilterLast},
    {"length", FilterLength},
    {"list", FilterList},
    {"lower", Lower},
    {"map", FilterMap},
    {"max", FilterMax},
    {"min", FilterMin},
    {"pprint", Pprint},
    {"random", FilterRandom},
    {"reject", FilterReject},
    {"rejectattr", FilterRejectattr},
    {"replace", Replace},
    {"reverse", FilterReverse},
    {"round", Round},
    {"safe", Safe},
    {"select", FilterSelect},
    {"selectattr", FilterSelectattr},
    {"slice", FilterSlice},
    {"sort", FilterSort},
    {"string", StringFilter},
    {"striptags", Striptags},
    {"sum", FilterSum},
    {"title", Title},
    {"tojson", ToJsonFilter},
    {"trim", Trim},
    {"truncate", Truncate},
    {"unique", FilterUnique},
    {"upper", Upper},
    {"urlencode", Urlencode},
    {"urlize", Unsupported},
    {"wordcount", Wordcount},
    {"wordwrap", Unsupported},
    {"xmlattr", Unsupported},
};

const FilterEntry* FindFilter(std::string_view name) {
  auto it = std::lower_bound(std::begin(kFilters), std::end(kFilters), name,
                             [](const FilterEntry& e, std::string_view n) { return e.name < n; });
  return it != std::end(kFilters) && it->name == name ? it : nullptr;
}

}  // namespace

bool IsKnownFilter(std::string_view name) { return FindFilter(name) != nullptr; }

absl::StatusOr<Value> ApplyFilter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args) {
  const FilterEntry* f = FindFilter(name);
  if (f == nullptr) return TemplateError(Cat("No filter named '", name, "' found."));
  if (f->fn == Unsupported) return TemplateError(Cat("the '", name, "' filter is not supported in chat templates"));
  return f->fn(in, input, args);
}

}  // namespace folio::jinja
