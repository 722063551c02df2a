#include "common/jinja/lexer.h"

#include <cerrno>
#include <cstdlib>

#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

// "\r\n" and "\r" become "\n"; one trailing newline goes (keep_trailing_newline
// is off in transformers' environment).
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

class LexerImpl {
 public:
  LexerImpl(std::string_view source, const LexerOptions& options)
      : src_(NormalizeNewlines(source)), options_(options) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      absl::Status s = RootStep();
      if (!s.ok()) return s;
    }
    Token eof{Token::Type::kEof, "", 0, 0, LineAt(src_.size())};
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  int LineAt(size_t pos) {
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  absl::Status Error(size_t pos, std::string_view what) {
    return TemplateError(Cat("chat template line ", LineAt(pos), ": ", what));
  }

  void Emit(Token::Type type, std::string value, size_t at) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = LineAt(at);
    tokens_.push_back(std::move(t));
  }

  // Length of the (Python) whitespace run at p.
  size_t SpaceRun(size_t p) const {
    size_t start = p;
    while (p < src_.size()) {
      size_t next = p;
      char32_t cp = text::Decode(src_, &next);
      if (!text::IsSpace(cp)) break;
      p = next;
    }
    return p - start;
  }

  // Data before a tag, with jinja's OptionalLStrip applied.
  void EmitData(size_t begin, size_t end, char sign, bool is_variable) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      // Python's str.rstrip(): trailing whitespace of any kind.
      size_t keep = 0;
      size_t p = 0;
      while (p < text.size()) {
        char32_t cp = text::Decode(text, &p);
        if (!text::IsSpace(cp)) keep = p;
      }
      text = text.substr(0, keep);
    } else if (sign != '+' && options_.lstrip_blocks && !is_variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        size_t run = SpaceRun(begin + l_pos);
        if (l_pos + run == text.size()) text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) Emit(Token::Type::kData, std::string(text), begin);
  }

  // Matches `{%[-+]?\s*NAME\s*(-%}\s*|%})` (with_suffix: the block end forms
  // `+%}`, `-%}\s*`, `%}\n?` instead) at p. Returns the end, or npos.
  size_t MatchNamedTag(size_t p, std::string_view name, bool full_end, char* sign) const {
    if (src_.compare(p, 2, "{%") != 0) return std::string::npos;
    p += 2;
    *sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) *sign = src_[p++];
    p += SpaceRun(p);
    if (src_.compare(p, name.size(), name) != 0) return std::string::npos;
    p += name.size();
    p += SpaceRun(p);
    return MatchBlockEnd(p, full_end);
  }

  // The end of a block tag at p: `-%}\s*`, `%}` plus (full) `+%}` and the
  // trim_blocks newline. npos if none.
  size_t MatchBlockEnd(size_t p, bool full) const {
    if (full && src_.compare(p, 3, "+%}") == 0) return p + 3;
    if (src_.compare(p, 3, "-%}") == 0) return p + 3 + SpaceRun(p + 3);
    if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
      if (full && options_.trim_blocks && p < src_.size() && src_[p] == '\n') ++p;
      return p;
    }
    return std::string::npos;
  }

  // Python's repr() of a one-character string, as jinja's message shows it.
  static std::string CharRepr(std::string_view ch) {
    if (ch == "'") return "\"'\"";
    if (ch == "\\") return "'\\\\'";
    return Cat("'", ch, "'");
  }

  size_t CodePointIndex(size_t byte_pos) const { return text::Length(std::string_view(src_).substr(0, byte_pos)); }

  void SetLineStarting(size_t match_end) {
    line_starting_ = match_end > 0 && src_[match_end - 1] == '\n';
  }

  absl::Status RootStep() {
    size_t k = pos_;
    while (true) {
      k = src_.find('{', k);
      if (k == std::string::npos || k + 1 >= src_.size()) {
        Emit(Token::Type::kData, src_.substr(pos_), pos_);
        SetLineStarting(src_.size());
        pos_ = src_.size();
        return absl::OkStatus();
      }
      char c = src_[k + 1];
      if (c == '%' || c == '{' || c == '#') break;
      ++k;
    }
    char kind = src_[k + 1];
    char raw_sign = 0;
    size_t raw_end = kind == '%' ? MatchNamedTag(k, "raw", /*full_end=*/false, &raw_sign)
                                 : std::string::npos;
    if (raw_end != std::string::npos) {
      EmitData(pos_, k, raw_sign, false);
      SetLineStarting(raw_end);
      return Raw(raw_end);
    }
    size_t p = k + 2;
    char sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    EmitData(pos_, k, sign, kind == '{');
    SetLineStarting(p);
    if (kind == '#') return Comment(p);
    Emit(kind == '{' ? Token::Type::kVariableBegin : Token::Type::kBlockBegin, "", k);
    return Tag(p, kind == '{');
  }

  absl::Status Comment(size_t p) {
    for (size_t i = p; i < src_.size(); ++i) {
      size_t end = std::string::npos;
      if (src_.compare(i, 3, "+#}") == 0) {
        end = i + 3;
      } else if (src_.compare(i, 3, "-#}") == 0) {
        end = i + 3 + SpaceRun(i + 3);
      } else if (src_.compare(i, 2, "#}") == 0) {
        end = i + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end != std::string::npos) {
        SetLineStarting(end);
        pos_ = end;
        return absl::OkStatus();
      }
    }
    return Error(p, "Missing end of comment tag");
  }

  absl::Status Raw(size_t p) {
    for (size_t i = src_.find("{%", p); i != std::string::npos; i = src_.find("{%", i + 1)) {
      char sign = 0;
      size_t end = MatchNamedTag(i, "endraw", /*full_end=*/true, &sign);
      if (end == std::string::npos) continue;
      EmitData(p, i, sign, false);
      SetLineStarting(end);
      pos_ = end;
      return absl::OkStatus();
    }
    return Error(p, "Missing end of raw directive");
  }

  // Tokens inside {{ }} or {% %} up to the end tag.
  absl::Status Tag(size_t p, bool variable) {
    std::vector<char> balance;
    while (p < src_.size()) {
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (variable) {
          if (src_.compare(p, 3, "-}}") == 0) {
            end = p + 3 + SpaceRun(p + 3);
          } else if (src_.compare(p, 2, "}}") == 0) {
            end = p + 2;
          }
        } else {
          end = MatchBlockEnd(p, /*full=*/true);
        }
        if (end != std::string::npos) {
          Emit(variable ? Token::Type::kVariableEnd : Token::Type::kBlockEnd, "", p);
          SetLineStarting(end);
          pos_ = end;
          return absl::OkStatus();
        }
      }
      if (size_t run = SpaceRun(p); run > 0) {
        p += run;
        continue;
      }
      size_t next = std::string::npos;
      absl::Status s = Number(p, &next);
      if (!s.ok()) return s;
      if (next == std::string::npos) next = Name(p);
      if (next == std::string::npos) {
        s = String(p, &next);
        if (!s.ok()) return s;
      }
      if (next == std::string::npos) {
        s = Operator(p, &balance, &next);
        if (!s.ok()) return s;
      }
      p = next;
    }
    // The parser reports the missing end of the tag.
    pos_ = src_.size();
    return absl::OkStatus();
  }

  // (\d+_)*\d+ at p; returns its end or npos.
  size_t DigitGroups(size_t p) const {
    if (p >= src_.size() || !IsDigitChar(src_[p])) return std::string::npos;
    while (true) {
      while (p < src_.size() && IsDigitChar(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && IsDigitChar(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  static std::string WithoutUnderscores(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c != '_') out.push_back(c);
    }
    return out;
  }

  absl::Status Number(size_t p, size_t* next) {
    *next = std::string::npos;
    if (p >= src_.size() || !IsDigitChar(src_[p])) return absl::OkStatus();
    // Float first, as jinja tries it first; not right after a '.' (x.0.1).
    if (p == 0 || src_[p - 1] != '.') {
      size_t int_end = DigitGroups(p);
      size_t frac_end = std::string::npos;
      if (int_end < src_.size() && src_[int_end] == '.') frac_end = DigitGroups(int_end + 1);
      size_t mantissa_end = frac_end != std::string::npos ? frac_end : int_end;
      size_t exp_end = std::string::npos;
      if (mantissa_end < src_.size() && (src_[mantissa_end] | 0x20) == 'e') {
        size_t q = mantissa_end + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        exp_end = DigitGroups(q);
      }
      size_t end = exp_end != std::string::npos ? exp_end : frac_end;
      if (end != std::string::npos) {
        std::string digits = WithoutUnderscores(std::string_view(src_).substr(p, end - p));
        Token t;
        t.type = Token::Type::kFloat;
        t.float_value = std::strtod(digits.c_str(), nullptr);
        t.value = digits;
        t.line = LineAt(p);
        tokens_.push_back(std::move(t));
        *next = end;
        return absl::OkStatus();
      }
    }
    int base = 10;
    size_t q = p;
    auto is_base_digit = [&](char c) {
      if (base == 2) return c == '0' || c == '1';
      if (base == 8) return c >= '0' && c <= '7';
      if (base == 16) return IsDigitChar(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      return IsDigitChar(c);
    };
    if (src_[p] == '0' && p + 1 < src_.size()) {
      char x = src_[p + 1] | 0x20;
      base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
    }
    size_t end = p;
    if (base != 10) {
      // 0b(_?[01])+ and friends
      q = p + 2;
      while (q < src_.size()) {
        if (is_base_digit(src_[q])) {
          end = ++q;
        } else if (src_[q] == '_' && q + 1 < src_.size() && is_base_digit(src_[q + 1])) {
          q += 2;
          end = q;
        } else {
          break;
        }
      }
      if (end == p) base = 10;  // "0b" without digits: just the zero
    }
    if (base == 10) {
      // [1-9](_?\d)* or 0(_?0)*
      char allowed_max = src_[p] == '0' ? '0' : '9';
      q = p + 1;
      end = q;
      while (q < src_.size()) {
        if (src_[q] >= '0' && src_[q] <= allowed_max) {
          end = ++q;
        } else if (src_[q] == '_' && q + 1 < src_.size() && src_[q + 1] >= '0' &&
                   src_[q + 1] <= allowed_max) {
          q += 2;
          end = q;
        } else {
          break;
        }
      }
    }
    std::string digits = WithoutUnderscores(std::string_view(src_).substr(p, end - p));
    const char* start = digits.c_str() + (base == 10 ? 0 : 2);
    errno = 0;
    char* parse_end = nullptr;
    unsigned long long v = std::strtoull(start, &parse_end, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      return Error(p, Cat("integer literal ", digits, " is too large (folio's integers are 64-bit)"));
    }
    Token t;
    t.type = Token::Type::kInteger;
    t.int_value = static_cast<int64_t>(v);
    t.value = digits;
    t.line = LineAt(p);
    tokens_.push_back(std::move(t));
    *next = end;
    return absl::OkStatus();
  }

  size_t Name(size_t p) {
    auto is_start = [](unsigned char c) { return c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80; };
    if (!is_start(static_cast<unsigned char>(src_[p]))) return std::string::npos;
    size_t q = p;
    while (q < src_.size()) {
      unsigned char c = static_cast<unsigned char>(src_[q]);
      if (c >= 0x80) {
        size_t n = q;
        if (text::IsSpace(text::Decode(src_, &n))) break;
        q = n;
      } else if (is_start(c) || IsDigitChar(static_cast<char>(c))) {
        ++q;
      } else {
        break;
      }
    }
    if (q == p) return std::string::npos;
    Emit(Token::Type::kName, src_.substr(p, q - p), p);
    return q;
  }

  absl::Status String(size_t p, size_t* next) {
    *next = std::string::npos;
    char quote = src_[p];
    if (quote != '\'' && quote != '"') return absl::OkStatus();
    size_t q = p + 1;
    while (q < src_.size() && src_[q] != quote) {
      if (src_[q] == '\\') ++q;
      ++q;
    }
    if (q >= src_.size()) return Error(p, Cat("unexpected char ", CharRepr(std::string(1, quote)), " at ", CodePointIndex(p)));
    absl::StatusOr<std::string> value = Unescape(std::string_view(src_).substr(p + 1, q - p - 1), p);
    if (!value.ok()) return value.status();
    Emit(Token::Type::kString, *std::move(value), p);
    *next = q + 1;
    return absl::OkStatus();
  }

  static int HexValue(char c) {
    if (IsDigitChar(c)) return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }

  // Python's "unicode-escape" decoding of a string literal's body.
  absl::StatusOr<std::string> Unescape(std::string_view s, size_t at) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 >= s.size()) {
        out.push_back(s[i]);
        continue;
      }
      char c = s[++i];
      switch (c) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          int n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = i + 1 + k < s.size() ? HexValue(s[i + 1 + k]) : -1;
            if (h < 0) return Error(at, Cat("truncated \\", std::string(1, c), "XXXX escape"));
            cp = cp * 16 + h;
          }
          if (cp > 0x10FFFF) return Error(at, "illegal Unicode character");
          i += n;
          text::Append(&out, cp);
          break;
        }
        case 'N': return Error(at, "\\N{…} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            char32_t cp = c - '0';
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
              cp = cp * 8 + (s[++i] - '0');
            }
            text::Append(&out, cp);
          } else {
            out.push_back('\\');  // unknown escapes stay as written
            out.push_back(c);
          }
      }
    }
    return out;
  }

  absl::Status Operator(size_t p, std::vector<char>* balance, size_t* next) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        Emit(Token::Type::kOperator, std::string(op), p);
        *next = p + 2;
        return absl::OkStatus();
      }
    }
    char c = src_[p];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t n = p;
      text::Decode(src_, &n);
      return Error(p, Cat("unexpected char ", CharRepr(src_.substr(p, n - p)), " at ", CodePointIndex(p)));
    }
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) return Error(p, Cat("unexpected '", std::string(1, c), "'"));
      char expected = balance->back();
      balance->pop_back();
      if (expected != c) {
        return Error(p, Cat("unexpected '", std::string(1, c), "', expected '",
                                     std::string(1, expected), "'"));
      }
    }
    Emit(Token::Type::kOperator, std::string(1, c), p);
    *next = p + 1;
    return absl::OkStatus();
  }

  const std::string src_;
  const LexerOptions options_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options) {
  return LexerImpl(source, options).Run();
}

}  // namespace folio::jinja
