#include "common/jinja/operators.h"

#include <cmath>
#include <limits>

#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/objects.h"
#include "common/jinja/py_format.h"

namespace folio::jinja {
namespace {

using Flavor = ListData::Flavor;

absl::Status Overflow() {
  return TemplateError("integer overflow (folio's template integers are 64-bit)");
}

absl::Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return TemplateError(Cat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '",
                                    TypeName(b), "'"));
}

bool EqualsAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxPrintDepth) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.identity() == b.identity()) return true;
      Flavor fa = a.list().flavor, fb = b.list().flavor;
      if (fa != fb || fa == Flavor::kDictValues) return false;  // dict_values compare by identity
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size()) return false;
      if (fa == Flavor::kDictKeys || fa == Flavor::kDictItems) {
        // set-like views: same members in any order
        for (const Value& item : x) {
          bool found = false;
          for (const Value& other : y) {
            if (EqualsAt(item, other, depth + 1)) {
              found = true;
              break;
            }
          }
          if (!found) return false;
        }
        return true;
      }
      for (size_t i = 0; i < x.size(); ++i) {
        if (!EqualsAt(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.identity() == b.identity()) return true;
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !EqualsAt(v, *other, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

absl::StatusOr<int> CompareAt(const Value& a, const Value& b, std::string_view op, int depth) {
  if (depth > kMaxPrintDepth) return TemplateError("maximum recursion depth exceeded in comparison");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().flavor == b.list().flavor &&
      (a.list().flavor == Flavor::kList || a.list().flavor == Flavor::kTuple)) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!EqualsAt(x[i], y[i], depth + 1)) return CompareAt(x[i], y[i], op, depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return TemplateError(Cat("'", op, "' not supported between instances of '", TypeName(a), "' and '",
                                    TypeName(b), "'"));
}

// Python's float % and //, from CPython's float_rem / float_floor_div.
double FloatMod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

double FloatFloorDiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, x / y);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, int64_t max_bytes) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && n > max_bytes / static_cast<int64_t>(s.size())) {
      return LimitError(Cat("string repetition exceeds max_output_bytes (", max_bytes, ")"));
    }
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::String(std::move(out));
  }
  const auto& items = seq.list().items;
  if (!items.empty() && n > max_bytes / 8 / static_cast<int64_t>(items.size())) {
    return LimitError(Cat("list repetition exceeds max_output_bytes (", max_bytes, ")"));
  }
  std::vector<Value> out;
  out.reserve(items.size() * n);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out), seq.list().flavor);
}

bool IsPlainSequence(const Value& v) {
  return v.is_list() && (v.list().flavor == Flavor::kList || v.list().flavor == Flavor::kTuple);
}

absl::StatusOr<Value> IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

}  // namespace

bool Equals(const Value& a, const Value& b) { return EqualsAt(a, b, 0); }

absl::StatusOr<int> Compare(const Value& a, const Value& b, std::string_view op) {
  return CompareAt(a, b, op, 0);
}

bool IsHashable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      if (v.list().flavor != Flavor::kTuple) return false;
      for (const Value& item : v.list().items) {
        if (!IsHashable(item)) return false;
      }
      return true;
    case Value::Kind::kDict: return false;
    default: return true;
  }
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return TemplateError(Cat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list().items) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!IsHashable(item)) return TemplateError(Cat("unhashable type: '", TypeName(item), "'"));
      return container.dict().Find(item) != nullptr;
    case Value::Kind::kObject:
      if (container.object().kind() == Object::Kind::kIterator) {
        // Like Python, `in` consumes a generator up to the match; here it
        // consumes all of it.
        for (const Value& v : static_cast<IteratorObject&>(container.object()).Drain()) {
          if (Equals(v, item)) return true;
        }
        return false;
      }
      break;
    default: break;
  }
  return TemplateError(Cat("argument of type '", TypeName(container), "' is not iterable"));
}

absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b, int64_t max_bytes) {
  const bool ints = a.is_integral() && b.is_integral();
  const bool nums = a.is_number() && b.is_number();
  switch (op) {
    case BinaryOp::kAdd:
      if (ints) {
        int64_t r;
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Overflow();
        return Value::Int(r);
      }
      if (nums) return Value::Float(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) {
        if (static_cast<int64_t>(a.str().size() + b.str().size()) > max_bytes) {
          return LimitError(Cat("string concatenation exceeds max_output_bytes (", max_bytes, ")"));
        }
        return Value::String(a.str() + b.str());
      }
      if (IsPlainSequence(a) && IsPlainSequence(b) && a.list().flavor == b.list().flavor) {
        std::vector<Value> items = a.list().items;
        items.insert(items.end(), b.list().items.begin(), b.list().items.end());
        return Value::List(std::move(items), a.list().flavor);
      }
      if (a.is_string()) {
        return TemplateError(Cat("can only concatenate str (not \"", TypeName(b), "\") to str"));
      }
      if (IsPlainSequence(a)) {
        return TemplateError(Cat("can only concatenate ", TypeName(a), " (not \"", TypeName(b), "\") to ",
                                          TypeName(a)));
      }
      return Unsupported("+", a, b);
    case BinaryOp::kSub:
      if (ints) {
        int64_t r;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return Overflow();
        return Value::Int(r);
      }
      if (nums) return Value::Float(a.as_double() - b.as_double());
      return Unsupported("-", a, b);
    case BinaryOp::kMul:
      if (ints) {
        int64_t r;
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Overflow();
        return Value::Int(r);
      }
      if (nums) return Value::Float(a.as_double() * b.as_double());
      if ((a.is_string() || IsPlainSequence(a)) && b.is_integral()) return Repeat(a, b.as_int(), max_bytes);
      if ((b.is_string() || IsPlainSequence(b)) && a.is_integral()) return Repeat(b, a.as_int(), max_bytes);
      if (a.is_string() || b.is_string() || IsPlainSequence(a) || IsPlainSequence(b)) {
        const Value& other = a.is_string() || IsPlainSequence(a) ? b : a;
        return TemplateError(Cat("can't multiply sequence by non-int of type '", TypeName(other), "'"));
      }
      return Unsupported("*", a, b);
    case BinaryOp::kDiv:
      if (nums) {
        if (b.as_double() == 0) {
          return TemplateError(ints ? "division by zero" : "float division by zero");
        }
        return Value::Float(a.as_double() / b.as_double());
      }
      return Unsupported("/", a, b);
    case BinaryOp::kFloorDiv:
      if (ints) {
        int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) return TemplateError("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) return Overflow();
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::Int(q);
      }
      if (nums) {
        if (b.as_double() == 0) return TemplateError("float floor division by zero");
        return Value::Float(FloatFloorDiv(a.as_double(), b.as_double()));
      }
      return Unsupported("//", a, b);
    case BinaryOp::kMod:
      if (a.is_string()) {
        // printf-style formatting: a tuple gives the arguments, a dict the
        // mapping, anything else is the one argument.
        Value args = b.is_tuple() || b.is_dict() ? b : Value::Tuple({b});
        FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, PercentFormat(a.str(), args, /*allow_unused=*/b.is_list()));
        return Value::String(std::move(s));
      }
      if (ints) {
        int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) return TemplateError("integer modulo by zero");
        if (y == -1) return Value::Int(0);
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::Int(r);
      }
      if (nums) {
        if (b.as_double() == 0) return TemplateError("float modulo");
        return Value::Float(FloatMod(a.as_double(), b.as_double()));
      }
      return Unsupported("%", a, b);
    case BinaryOp::kPow:
      if (ints && b.as_int() >= 0) return IntPow(a.as_int(), b.as_int());
      if (nums) {
        double x = a.as_double(), y = b.as_double();
        if (x == 0 && y < 0) {
          return TemplateError("0.0 cannot be raised to a negative power");
        }
        if (x < 0 && y != std::floor(y)) {
          return TemplateError("a negative number to a fractional power is complex; not supported");
        }
        return Value::Float(std::pow(x, y));
      }
      return Unsupported("** or pow()", a, b);
  }
  return Unsupported("?", a, b);
}

absl::StatusOr<Value> Negate(const Value& v) {
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return Overflow();
    return Value::Int(-v.as_int());
  }
  if (v.is_float()) return Value::Float(-v.as_double());
  return TemplateError(Cat("bad operand type for unary -: '", TypeName(v), "'"));
}

absl::StatusOr<Value> UnaryPlus(const Value& v) {
  if (v.is_integral()) return Value::Int(v.as_int());
  if (v.is_float()) return v;
  return TemplateError(Cat("bad operand type for unary +: '", TypeName(v), "'"));
}

}  // namespace folio::jinja
