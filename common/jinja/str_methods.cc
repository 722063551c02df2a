#include "common/jinja/str_methods.h"

#include <algorithm>

#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/py_format.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

bool IsCased(char32_t cp) { return text::IsUpper(cp) || text::IsLower(cp); }

absl::StatusOr<std::string> StringArg(const std::optional<Value>& v, std::string_view fn, std::string_view what) {
  if (!v->is_string()) {
    return TemplateError(Cat(fn, "() argument ", what, " must be str, not ", TypeName(*v)));
  }
  return v->str();
}

// Python's slice-style bounds for find/count/startswith: start and end in
// [0, len] after negative indices wrap.
void Bounds(const std::optional<Value>& start, const std::optional<Value>& end, int64_t len, int64_t* b,
            int64_t* e) {
  *b = 0;
  *e = len;
  if (start && start->is_integral()) {
    *b = start->as_int();
    if (*b < 0) *b = std::max<int64_t>(0, *b + len);
  }
  if (end && end->is_integral()) {
    *e = end->as_int();
    if (*e < 0) *e = std::max<int64_t>(0, *e + len);
    *e = std::min(*e, len);
  }
}

// find / rfind / count over a string type (bytes for ASCII, code points
// otherwise).
template <typename S>
int64_t Find(const S& s, const S& sub, int64_t b, int64_t e, bool reverse) {
  if (b > e || b > static_cast<int64_t>(s.size())) return -1;
  S window = s.substr(b, e - b);
  size_t pos = reverse ? window.rfind(sub) : window.find(sub);
  return pos == S::npos ? -1 : static_cast<int64_t>(pos) + b;
}

template <typename S>
int64_t Count(const S& s, const S& sub, int64_t b, int64_t e) {
  if (b > e || b > static_cast<int64_t>(s.size())) return 0;
  S window = s.substr(b, e - b);
  if (sub.empty()) return static_cast<int64_t>(window.size()) + 1;
  int64_t n = 0;
  for (size_t pos = window.find(sub); pos != S::npos; pos = window.find(sub, pos + sub.size())) ++n;
  return n;
}

absl::StatusOr<Value> FindLike(const Value& self, std::string_view name, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sub", "start", "end"}, 1));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string sub, StringArg(a[0], name, "1"));
  const std::string& s = self.str();
  bool reverse = name == "rfind" || name == "rindex";
  int64_t result;
  if (text::IsAscii(s)) {
    int64_t b, e;
    Bounds(a[1], a[2], static_cast<int64_t>(s.size()), &b, &e);
    std::string_view sv(s), subv(sub);
    result = name == "count" ? Count(sv, subv, b, e) : Find(sv, subv, b, e, reverse);
  } else {
    std::u32string u = text::ToU32(s), usub = text::ToU32(sub);
    int64_t b, e;
    Bounds(a[1], a[2], static_cast<int64_t>(u.size()), &b, &e);
    std::u32string_view uv(u), subv(usub);
    result = name == "count" ? Count(uv, subv, b, e) : Find(uv, subv, b, e, reverse);
  }
  if (result < 0 && (name == "index" || name == "rindex")) return TemplateError("substring not found");
  return Value::Int(result);
}

absl::StatusOr<Value> StartsEnds(const Value& self, std::string_view name, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"prefix", "start", "end"}, 1));
  std::vector<std::string> options;
  if (a[0]->is_string()) {
    options.push_back(a[0]->str());
  } else if (a[0]->is_tuple()) {
    for (const Value& v : a[0]->list().items) {
      if (!v.is_string()) {
        return TemplateError(Cat("tuple for ", name, " must only contain str, not ", TypeName(v)));
      }
      options.push_back(v.str());
    }
  } else {
    return TemplateError(Cat(name, " first arg must be str or a tuple of str, not ", TypeName(*a[0])));
  }
  std::u32string u = text::ToU32(self.str());
  int64_t b, e;
  Bounds(a[1], a[2], static_cast<int64_t>(u.size()), &b, &e);
  if (b > static_cast<int64_t>(u.size())) return Value::Bool(false);
  std::u32string window = b <= e ? u.substr(b, e - b) : std::u32string();
  bool starts = name == "startswith";
  for (const std::string& opt : options) {
    std::u32string o = text::ToU32(opt);
    if (b > e) continue;
    if (o.size() <= window.size() &&
        (starts ? window.compare(0, o.size(), o) == 0 : window.compare(window.size() - o.size(), o.size(), o) == 0)) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& p : parts) items.push_back(Value::String(std::move(p)));
  return Value::List(std::move(items));
}

template <typename Pred>
Value AllChars(std::string_view s, Pred pred) {
  if (s.empty()) return Value::Bool(false);
  size_t pos = 0;
  while (pos < s.size()) {
    if (!pred(text::Decode(s, &pos))) return Value::Bool(false);
  }
  return Value::Bool(true);
}

absl::StatusOr<char32_t> FillChar(const std::optional<Value>& v, std::string_view fn) {
  if (!v) return U' ';
  if (!v->is_string() || text::Length(v->str()) != 1) {
    return TemplateError(Cat(fn, "() argument 2 must be a character"));
  }
  size_t pos = 0;
  return text::Decode(v->str(), &pos);
}

// Resolves a str.format field name: arg_name ("." attr | "[" key "]")*.
absl::StatusOr<Value> FormatField(std::string_view field, const CallArgs& args, size_t* auto_index, int* mode) {
  size_t end = field.find_first_of(".[");
  std::string_view head = field.substr(0, end);
  Value v;
  if (head.empty() || std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    size_t index;
    if (head.empty()) {
      if (*mode == 2) return TemplateError("cannot switch from manual field specification to automatic field numbering");
      *mode = 1;
      index = (*auto_index)++;
    } else {
      if (*mode == 1) return TemplateError("cannot switch from manual field specification to automatic field numbering");
      *mode = 2;
      index = std::stoul(std::string(head));
    }
    if (index >= args.positional.size()) return TemplateError(Cat("Replacement index ", index, " out of range for positional args tuple"));
    v = args.positional[index];
  } else {
    auto it = std::find_if(args.keyword.begin(), args.keyword.end(), [&](const auto& kv) { return kv.first == head; });
    if (it == args.keyword.end()) return TemplateError(Cat("KeyError: '", head, "'"));
    v = it->second;
  }
  while (end != std::string_view::npos && end < field.size()) {
    if (field[end] == '.') {
      size_t next = field.find_first_of(".[", end + 1);
      FOLIO_JINJA_ASSIGN_OR_RETURN(v, GetAttribute(v, field.substr(end + 1, next - end - 1)));
      end = next;
    } else {
      size_t close = field.find(']', end);
      if (close == std::string_view::npos) return TemplateError("Missing ']' in format string");
      std::string_view key = field.substr(end + 1, close - end - 1);
      bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      FOLIO_JINJA_ASSIGN_OR_RETURN(v, GetItem(v, digits ? Value::Int(std::stoll(std::string(key)))
                                                        : Value::String(std::string(key))));
      end = close + 1;
    }
  }
  if (v.is_undefined()) return UndefinedError(v);
  return v;
}

}  // namespace

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string set;
  if (chars != nullptr) set = text::ToU32(*chars);
  auto strip_it = [&](char32_t cp) {
    return chars == nullptr ? text::IsSpace(cp) : set.find(cp) != std::u32string::npos;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!strip_it(text::Decode(s, &next))) break;
      begin = next;
    }
  }
  if (right) {
    // find the end of the last code point that stays
    size_t pos = begin, keep = begin;
    while (pos < end) {
      char32_t cp = text::Decode(s, &pos);
      if (!strip_it(cp)) keep = pos;
    }
    end = keep;
  }
  return std::string(s.substr(begin, end - begin));
}

size_t PyReplaceSize(std::string_view s, std::string_view old, std::string_view replacement, int64_t count) {
  size_t hits = 0;
  if (old.empty()) {
    hits = text::Length(s) + 1;
  } else {
    for (size_t pos = s.find(old); pos != std::string_view::npos; pos = s.find(old, pos + old.size())) ++hits;
  }
  if (count >= 0 && static_cast<size_t>(count) < hits) hits = static_cast<size_t>(count);
  return s.size() - hits * old.size() + hits * replacement.size();
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    size_t pos = 0;
    int64_t done = 0;
    while (true) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (pos >= s.size()) break;
      size_t start = pos;
      text::Decode(s, &pos);
      out += s.substr(start, pos - start);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += replacement;
    pos = hit + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  size_t pos = 0;
  bool first = true;
  while (pos < s.size()) {
    char32_t cp = text::Decode(s, &pos);
    if (first) {
      text::AppendUpper(&out, cp);
      first = false;
    } else {
      text::AppendLower(&out, cp);
    }
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  size_t pos = 0;
  bool prev_cased = false;
  while (pos < s.size()) {
    char32_t cp = text::Decode(s, &pos);
    if (prev_cased) {
      text::AppendLower(&out, cp);
    } else {
      text::AppendUpper(&out, cp);
    }
    prev_cased = IsCased(cp);
  }
  return out;
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep != nullptr) {
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.emplace_back(s.substr(pos));
      return parts;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Runs of whitespace; work on code points.
  std::u32string u = text::ToU32(s);
  if (from_right) std::reverse(u.begin(), u.end());
  size_t i = 0, n = u.size();
  while (true) {
    while (i < n && text::IsSpace(u[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      size_t end = n;
      // the rest, without its trailing whitespace only when splitting from the left? Python keeps it.
      std::u32string rest = u.substr(i, end - i);
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(text::FromU32(rest));
      break;
    }
    size_t start = i;
    while (i < n && !text::IsSpace(u[i])) ++i;
    std::u32string word = u.substr(start, i - start);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(text::FromU32(word));
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t pos = 0, start = 0;
  while (pos < s.size()) {
    size_t at = pos;
    char32_t cp = text::Decode(s, &pos);
    if (!text::IsLineBreak(cp)) continue;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.emplace_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string PyCenter(std::string_view s, int64_t width, char32_t fill) {
  int64_t len = static_cast<int64_t>(text::Length(s));
  if (width <= len) return std::string(s);
  int64_t marg = width - len;
  int64_t left = marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) text::Append(&out, fill);
  out += s;
  for (int64_t i = left; i < marg; ++i) text::Append(&out, fill);
  return out;
}

absl::StatusOr<std::string> PyStrFormat(std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  int mode = 0;  // 0 unknown, 1 automatic, 2 manual numbering
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return TemplateError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    // find the matching '}' (a spec may hold one level of nested fields)
    size_t depth = 1, j = i + 1;
    for (; j < format.size() && depth > 0; ++j) {
      if (format[j] == '{') ++depth;
      if (format[j] == '}') --depth;
    }
    if (depth != 0) return TemplateError("expected '}' before end of string");
    std::string_view field = format.substr(i + 1, j - i - 2);
    i = j - 1;
    std::string_view spec;
    char conversion = 0;
    size_t colon = field.find(':');
    size_t bang = field.find('!');
    if (bang != std::string_view::npos && (colon == std::string_view::npos || bang < colon)) {
      if (bang + 1 >= field.size()) return TemplateError("end of string while looking for conversion specifier");
      conversion = field[bang + 1];
      if (colon != std::string_view::npos) spec = field.substr(colon + 1);
      field = field.substr(0, bang);
    } else if (colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, FormatField(field, args, &auto_index, &mode));
    std::string expanded_spec;
    if (spec.find('{') != std::string_view::npos) {
      CallArgs inner = args;
      FOLIO_JINJA_ASSIGN_OR_RETURN(expanded_spec, PyStrFormat(spec, inner));
      spec = expanded_spec;
    }
    if (conversion == 'r' || conversion == 'a') {
      FOLIO_JINJA_ASSIGN_OR_RETURN(std::string r, Repr(v));
      v = Value::String(std::move(r));
    } else if (conversion == 's') {
      FOLIO_JINJA_ASSIGN_OR_RETURN(std::string r, Str(v));
      v = Value::String(std::move(r));
    } else if (conversion != 0) {
      return TemplateError(Cat("Unknown conversion specifier ", std::string(1, conversion)));
    }
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string piece, FormatWithSpec(v, spec));
    out += piece;
    FOLIO_JINJA_RETURN_IF_ERROR(CheckFormatLimit(out.size()));
  }
  return out;
}

absl::StatusOr<Value> StrMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const std::string& s = self.str();
  FOLIO_JINJA_RETURN_IF_ERROR(in.ChargeBytes(s.size()));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return FindLike(self, name, args);
  }
  if (name == "startswith" || name == "endswith") return StartsEnds(self, name, args);
  if (name == "format") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string out, PyStrFormat(s, args));
    return Value::String(std::move(out));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"chars"}));
    std::string chars;
    if (a[0] && !a[0]->is_none()) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(chars, StringArg(a[0], name, "1"));
    }
    bool have = a[0] && !a[0]->is_none();
    return Value::String(PyStrip(s, have ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sep", "maxsplit"}));
    std::string sep;
    bool have = a[0] && !a[0]->is_none();
    if (have) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(sep, StringArg(a[0], name, "1"));
      if (sep.empty()) return TemplateError("empty separator");
    }
    int64_t maxsplit = -1;
    if (a[1]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(maxsplit, ToIndex(*a[1], name));
    }
    return StringList(PySplit(s, have ? &sep : nullptr, maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"keepends"}));
    return StringList(PySplitLines(s, a[0] && Truthy(*a[0])));
  }
  if (name == "replace") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"old", "new", "count"}, 2));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string old, StringArg(a[0], name, "1"));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string rep, StringArg(a[1], name, "2"));
    int64_t count = -1;
    if (a[2]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(count, ToIndex(*a[2], name));
    }
    if (static_cast<int64_t>(PyReplaceSize(s, old, rep, count)) > in.max_output_bytes()) {
      return LimitError(Cat("str.replace result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
    }
    return Value::String(PyReplace(s, old, rep, count));
  }
  if (name == "join") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"iterable"}, 1));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*a[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return TemplateError(Cat("sequence item ", i, ": expected str instance, ", TypeName(items[i]),
                                          " found"));
      }
      if (i > 0) out += s;
      out += items[i].str();
      if (static_cast<int64_t>(out.size()) > in.max_output_bytes()) {
        return LimitError(Cat("str.join result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
      }
    }
    return Value::String(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"width", "fillchar"}, 1));
    FOLIO_JINJA_ASSIGN_OR_RETURN(int64_t width, ToIndex(*a[0], name));
    FOLIO_JINJA_ASSIGN_OR_RETURN(char32_t fill, FillChar(a[1], name));
    width = std::min(width, in.max_output_bytes());
    if (name == "center") return Value::String(PyCenter(s, width, fill));
    int64_t len = static_cast<int64_t>(text::Length(s));
    std::string pad;
    for (int64_t i = len; i < width; ++i) text::Append(&pad, fill);
    return Value::String(name == "ljust" ? s + pad : pad + s);
  }
  if (name == "zfill") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"width"}, 1));
    FOLIO_JINJA_ASSIGN_OR_RETURN(int64_t width, ToIndex(*a[0], name));
    width = std::min(width, in.max_output_bytes());
    int64_t len = static_cast<int64_t>(text::Length(s));
    if (width <= len) return self;
    size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return Value::String(s.substr(0, sign) + std::string(width - len, '0') + s.substr(sign));
  }
  if (name == "partition" || name == "rpartition") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sep"}, 1));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string sep, StringArg(a[0], name, "1"));
    if (sep.empty()) return TemplateError("empty separator");
    size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::Tuple({self, Value::String(""), Value::String("")})
                                 : Value::Tuple({Value::String(""), Value::String(""), self});
    }
    return Value::Tuple({Value::String(s.substr(0, hit)), Value::String(sep), Value::String(s.substr(hit + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"affix"}, 1));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string affix, StringArg(a[0], name, "1"));
    if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0) return Value::String(s.substr(affix.size()));
    if (name == "removesuffix" && s.size() >= affix.size() && !affix.empty() &&
        s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
      return Value::String(s.substr(0, s.size() - affix.size()));
    }
    return self;
  }
  if (name == "expandtabs") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"tabsize"}));
    int64_t tab = 8;
    if (a[0]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(tab, ToIndex(*a[0], name));
    }
    std::string out;
    int64_t column = 0;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t start = pos;
      char32_t cp = text::Decode(s, &pos);
      if (cp == '\t') {
        int64_t spaces = tab > 0 ? tab - column % tab : 0;
        FOLIO_JINJA_RETURN_IF_ERROR(CheckFormatLimit(out.size() + spaces));
        out.append(spaces, ' ');
        column += spaces;
      } else {
        out += s.substr(start, pos - start);
        column = (cp == '\n' || cp == '\r') ? 0 : column + 1;
      }
    }
    return Value::String(std::move(out));
  }
  // The rest take no arguments.
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto none, BindArgs(name, args, {}));
  if (name == "upper") return Value::String(text::Upper(s));
  if (name == "lower" || name == "casefold") return Value::String(text::Lower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "swapcase") {
    std::string out;
    size_t pos = 0;
    while (pos < s.size()) {
      char32_t cp = text::Decode(s, &pos);
      if (text::IsUpper(cp)) {
        text::AppendLower(&out, cp);
      } else {
        text::AppendUpper(&out, cp);
      }
    }
    return Value::String(std::move(out));
  }
  if (name == "isdigit" || name == "isnumeric") return AllChars(s, text::IsDigit);
  if (name == "isdecimal") return AllChars(s, text::IsDecimal);
  if (name == "isalpha") return AllChars(s, text::IsAlpha);
  if (name == "isalnum") return AllChars(s, text::IsAlnum);
  if (name == "isspace") return AllChars(s, text::IsSpace);
  if (name == "isprintable") return Value::Bool(s.empty() || AllChars(s, text::IsPrintable).as_bool());
  if (name == "isascii") return Value::Bool(text::IsAscii(s));
  if (name == "isidentifier") {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return Value::Bool(false);
    return AllChars(s, [](char32_t cp) { return cp == '_' || text::IsAlnum(cp); });
  }
  if (name == "islower" || name == "isupper") {
    bool any_cased = false;
    size_t pos = 0;
    while (pos < s.size()) {
      char32_t cp = text::Decode(s, &pos);
      if (name == "islower" ? text::IsUpper(cp) : text::IsLower(cp)) return Value::Bool(false);
      any_cased = any_cased || IsCased(cp);
    }
    return Value::Bool(any_cased);
  }
  if (name == "istitle") {
    bool any_cased = false, prev_cased = false;
    size_t pos = 0;
    while (pos < s.size()) {
      char32_t cp = text::Decode(s, &pos);
      if (text::IsUpper(cp)) {
        if (prev_cased) return Value::Bool(false);
        prev_cased = any_cased = true;
      } else if (text::IsLower(cp)) {
        if (!prev_cased) return Value::Bool(false);
        prev_cased = any_cased = true;
      } else {
        prev_cased = false;
      }
    }
    return Value::Bool(any_cased);
  }
  return TemplateError(Cat("str.", name, " is not supported in chat templates"));
}

}  // namespace folio::jinja
