#include "common/jinja/expression_parser.h"

#include <utility>

#include "common/jinja/cat.h"
#include "common/jinja/errors.h"

namespace folio::jinja {

using ast::ExprKind;
using ast::ExprPtr;

ExpressionParser::ExpressionParser(std::vector<Token> tokens, int max_depth)
    : max_depth_(max_depth), tokens_(std::move(tokens)) {}

std::string ExpressionParser::Describe(const Token& t) {
  switch (t.type) {
    case Type::kName:
    case Type::kOperator: return t.value;
    case Type::kString: return "string";
    case Type::kInteger: return "integer";
    case Type::kFloat: return "float";
    case Type::kData: return "template data / text";
    case Type::kVariableBegin: return "begin of print statement";
    case Type::kVariableEnd: return "end of print statement";
    case Type::kBlockBegin: return "begin of statement block";
    case Type::kBlockEnd: return "end of statement block";
    case Type::kEof: return "end of template";
  }
  return "token";
}

bool ExpressionParser::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Advance();
  return true;
}
bool ExpressionParser::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Advance();
  return true;
}

absl::Status ExpressionParser::Fail(std::string_view what, int line) {
  return TemplateError(Cat("chat template line ", line, ": ", what));
}
absl::Status ExpressionParser::TooDeep() {
  return Fail(Cat("the template nests deeper than max_depth (", max_depth_, ")"));
}
absl::Status ExpressionParser::UnexpectedHere(std::string_view expected) {
  if (Cur().type == Type::kEof) {
    return Fail(Cat("unexpected end of template, expected '", expected, "'."));
  }
  return Fail(Cat("expected token '", expected, "', got '", Describe(Cur()), "'"));
}
absl::Status ExpressionParser::ExpectOp(std::string_view op) {
  if (!SkipOp(op)) return UnexpectedHere(op);
  return absl::OkStatus();
}
absl::Status ExpressionParser::ExpectType(Type type, std::string_view what) {
  if (Cur().type != type) return UnexpectedHere(what);
  Advance();
  return absl::OkStatus();
}
absl::StatusOr<std::string> ExpressionParser::ExpectName() {
  if (Cur().type != Type::kName) return UnexpectedHere("name");
  std::string name = Cur().value;
  Advance();
  return name;
}
absl::Status ExpressionParser::ExpectKeyword(std::string_view name) {
  if (!SkipName(name)) return UnexpectedHere(name);
  return absl::OkStatus();
}

absl::StatusOr<ast::Target> ExpressionParser::ToTarget(const ast::Expr& e) {
  ast::Target t;
  t.line = e.line;
  if (e.kind == ExprKind::kName) {
    t.name = static_cast<const ast::Name&>(e).name;
    return t;
  }
  if (e.kind == ExprKind::kTuple) {
    t.kind = ast::Target::Kind::kTuple;
    for (const auto& item : static_cast<const ast::Sequence&>(e).items) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(ast::Target sub, ToTarget(*item));
      t.items.push_back(std::move(sub));
    }
    return t;
  }
  const char* what = e.kind == ExprKind::kConst ? "const" : e.kind == ExprKind::kList ? "list" : "expression";
  return Fail(Cat("can't assign to '", what, "'"), e.line);
}

absl::StatusOr<ast::Target> ExpressionParser::ParseAssignTarget(bool with_namespace, bool name_only,
                                              Ends extra_end) {
  if (with_namespace && Cur().type == Type::kName && Look().type == Type::kOperator && Look().value == ".") {
    ast::Target t;
    t.kind = ast::Target::Kind::kNamespaceAttr;
    t.line = Cur().line;
    t.name = Cur().value;
    Advance();
    Advance();
    FOLIO_JINJA_ASSIGN_OR_RETURN(t.attr, ExpectName());
    return t;
  }
  if (name_only) {
    ast::Target t;
    t.line = Cur().line;
    FOLIO_JINJA_ASSIGN_OR_RETURN(t.name, ExpectName());
    return t;
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, true, extra_end, false));
  return ToTarget(*e);
}


bool ExpressionParser::IsTupleEnd(Ends extra_end) const {
  if (Cur().type == Type::kVariableEnd || Cur().type == Type::kBlockEnd || IsOp(")")) return true;
  for (std::string_view e : extra_end) {
    if (IsName(e)) return true;
  }
  return false;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool simplified, bool with_condexpr,
                                   Ends extra_end, bool explicit_parens) {
  int line = Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    absl::StatusOr<ExprPtr> item = simplified ? ParsePrimary() : ParseExpression(with_condexpr);
    if (!item.ok()) return item.status();
    items.push_back(*std::move(item));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
    line = Cur().line;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) {
      return Fail(Cat("Expected an expression, got '", Describe(Cur()), "'"));
    }
  }
  auto tuple = std::make_unique<ast::Sequence>(ExprKind::kTuple, line);
  tuple->items = std::move(items);
  return tuple;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  DepthGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  if (!with_condexpr) return ParseOr();
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (SkipName("if")) {
    auto cond = std::make_unique<ast::CondExpr>(line);
    FOLIO_JINJA_ASSIGN_OR_RETURN(cond->test, ParseOr());
    if (SkipName("else")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(cond->otherwise, ParseExpression(true));
    }
    cond->then = std::move(expr);
    expr = std::move(cond);
    line = Cur().line;
  }
  return expr;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (SkipName("or")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    left = std::make_unique<ast::Binary>(ExprKind::kOr, line, BinaryOp::kAdd, std::move(left), std::move(right));
    line = Cur().line;
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (SkipName("and")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    left = std::make_unique<ast::Binary>(ExprKind::kAnd, line, BinaryOp::kAdd, std::move(left), std::move(right));
    line = Cur().line;
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(this);
    if (guard.too_deep()) return TooDeep();
    int line = Cur().line;
    Advance();
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    return std::make_unique<ast::Unary>(line, ast::UnaryOp::kNot, std::move(operand));
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
  std::unique_ptr<ast::Compare> cmp;
  while (true) {
    ast::CompareOp op;
    if (IsOp("==")) {
      op = ast::CompareOp::kEq;
    } else if (IsOp("!=")) {
      op = ast::CompareOp::kNe;
    } else if (IsOp("<")) {
      op = ast::CompareOp::kLt;
    } else if (IsOp("<=")) {
      op = ast::CompareOp::kLe;
    } else if (IsOp(">")) {
      op = ast::CompareOp::kGt;
    } else if (IsOp(">=")) {
      op = ast::CompareOp::kGe;
    } else if (IsName("in")) {
      op = ast::CompareOp::kIn;
    } else if (IsName("not") && Look().type == Type::kName && Look().value == "in") {
      Advance();
      op = ast::CompareOp::kNotIn;
    } else {
      break;
    }
    Advance();
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    if (!cmp) {
      cmp = std::make_unique<ast::Compare>(line);
      cmp->first = std::move(expr);
    }
    cmp->rest.emplace_back(op, std::move(operand));
  }
  if (cmp) return cmp;
  return expr;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath1() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    BinaryOp op = IsOp("+") ? BinaryOp::kAdd : BinaryOp::kSub;
    Advance();
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    left = std::make_unique<ast::Binary>(ExprKind::kBinary, line, op, std::move(left), std::move(right));
    line = Cur().line;
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseConcat() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!IsOp("~")) return first;
  auto concat = std::make_unique<ast::Concat>(line);
  concat->items.push_back(std::move(first));
  while (SkipOp("~")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
    concat->items.push_back(std::move(next));
  }
  return concat;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath2() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    BinaryOp op = IsOp("*") ? BinaryOp::kMul : IsOp("/") ? BinaryOp::kDiv : IsOp("//") ? BinaryOp::kFloorDiv : BinaryOp::kMod;
    Advance();
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    left = std::make_unique<ast::Binary>(ExprKind::kBinary, line, op, std::move(left), std::move(right));
    line = Cur().line;
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePow() {
  int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (SkipOp("**")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    left = std::make_unique<ast::Binary>(ExprKind::kBinary, line, BinaryOp::kPow, std::move(left), std::move(right));
    line = Cur().line;
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  int line = Cur().line;
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    DepthGuard guard(this);
    if (guard.too_deep()) return TooDeep();
    ast::UnaryOp op = IsOp("-") ? ast::UnaryOp::kNeg : ast::UnaryOp::kPos;
    Advance();
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node = std::make_unique<ast::Unary>(line, op, std::move(operand));
  } else {
    FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& t = Cur();
  const int line = t.line;
  switch (t.type) {
    case Type::kName: {
      ExprPtr node;
      if (t.value == "true" || t.value == "True") {
        node = std::make_unique<ast::Const>(line, Value::Bool(true));
      } else if (t.value == "false" || t.value == "False") {
        node = std::make_unique<ast::Const>(line, Value::Bool(false));
      } else if (t.value == "none" || t.value == "None") {
        node = std::make_unique<ast::Const>(line, Value::None());
      } else {
        node = std::make_unique<ast::Name>(line, t.value);
      }
      Advance();
      return node;
    }
    case Type::kString: {
      std::string s = t.value;
      Advance();
      while (Cur().type == Type::kString) {
        s += Cur().value;
        Advance();
      }
      return std::make_unique<ast::Const>(line, Value::String(std::move(s)));
    }
    case Type::kInteger: {
      auto node = std::make_unique<ast::Const>(line, Value::Int(t.int_value));
      Advance();
      return node;
    }
    case Type::kFloat: {
      auto node = std::make_unique<ast::Const>(line, Value::Float(t.float_value));
      Advance();
      return node;
    }
    default: break;
  }
  if (SkipOp("(")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(false, true, {}, true));
    FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(")"));
    return node;
  }
  if (SkipOp("[")) {
    auto list = std::make_unique<ast::Sequence>(ExprKind::kList, line);
    while (!IsOp("]")) {
      if (!list->items.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      list->items.push_back(std::move(item));
    }
    FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp("]"));
    return list;
  }
  if (SkipOp("{")) {
    auto dict = std::make_unique<ast::DictLit>(line);
    while (!IsOp("}")) {
      if (!dict->items.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
      FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(":"));
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      dict->items.emplace_back(std::move(key), std::move(value));
    }
    FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp("}"));
    return dict;
  }
  if (t.type == Type::kEof) return Fail("unexpected end of template");
  return Fail(Cat("unexpected '", Describe(t), "'"));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const int line = Cur().line;
  if (SkipOp(".")) {
    const Token& attr = Cur();
    if (attr.type == Type::kName) {
      auto g = std::make_unique<ast::Getattr>(line, std::move(node), attr.value);
      Advance();
      return g;
    }
    if (attr.type != Type::kInteger) return Fail("expected name or number");
    auto key = std::make_unique<ast::Const>(attr.line, Value::Int(attr.int_value));
    Advance();
    return std::make_unique<ast::Getitem>(line, std::move(node), std::move(key));
  }
  Advance();  // [
  std::vector<ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp("]"));
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<ast::Sequence>(ExprKind::kTuple, line);
    tuple->items = std::move(args);
    key = std::move(tuple);
  }
  return std::make_unique<ast::Getitem>(line, std::move(node), std::move(key));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = Cur().line;
  auto slice = std::make_unique<ast::Slice>(line);
  if (!SkipOp(":")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr node, ParseExpression(true));
    if (!SkipOp(":")) return node;
    slice->start = std::move(node);
  }
  if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(slice->stop, ParseExpression(true));
  }
  if (SkipOp(":")) {
    if (!IsOp("]") && !IsOp(",")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(slice->step, ParseExpression(true));
    }
  }
  return slice;
}

absl::Status ExpressionParser::ParseCallArgs(ast::Args* args) {
  const int line = Cur().line;
  FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp("("));
  bool require_comma = false;
  auto ensure = [&](bool ok) -> absl::Status {
    return ok ? absl::OkStatus() : Fail("invalid syntax for function call expression", line);
  };
  while (!IsOp(")")) {
    if (require_comma) {
      FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    if (SkipOp("*")) {
      FOLIO_JINJA_RETURN_IF_ERROR(ensure(!args->star && !args->star_star));
      FOLIO_JINJA_ASSIGN_OR_RETURN(args->star, ParseExpression(true));
    } else if (SkipOp("**")) {
      FOLIO_JINJA_RETURN_IF_ERROR(ensure(!args->star_star));
      FOLIO_JINJA_ASSIGN_OR_RETURN(args->star_star, ParseExpression(true));
    } else if (Cur().type == Type::kName && Look().type == Type::kOperator && Look().value == "=") {
      FOLIO_JINJA_RETURN_IF_ERROR(ensure(!args->star_star));
      std::string key = Cur().value;
      Advance();
      Advance();
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      args->keyword.emplace_back(std::move(key), std::move(value));
    } else {
      FOLIO_JINJA_RETURN_IF_ERROR(ensure(!args->star && !args->star_star && args->keyword.empty()));
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      args->positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  return ExpectOp(")");
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr node) {
  auto call = std::make_unique<ast::Call>(Cur().line);
  call->callee = std::move(node);
  FOLIO_JINJA_RETURN_IF_ERROR(ParseCallArgs(&call->args));
  return call;
}

absl::StatusOr<std::string> ExpressionParser::ParseDottedName() {
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (SkipOp(".")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string part, ExpectName());
    Append(&name, ".", part);
  }
  return name;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) Advance();
    start_inline = false;
    auto filter = std::make_unique<ast::FilterTest>(ExprKind::kFilter, Cur().line);
    FOLIO_JINJA_ASSIGN_OR_RETURN(filter->name, ParseDottedName());
    if (IsOp("(")) FOLIO_JINJA_RETURN_IF_ERROR(ParseCallArgs(&filter->args));
    filter->operand = std::move(node);
    node = std::move(filter);
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  const int line = Cur().line;
  Advance();  // is
  bool negated = SkipName("not");
  auto test = std::make_unique<ast::FilterTest>(ExprKind::kTest, line);
  FOLIO_JINJA_ASSIGN_OR_RETURN(test->name, ParseDottedName());
  const Token& t = Cur();
  if (IsOp("(")) {
    FOLIO_JINJA_RETURN_IF_ERROR(ParseCallArgs(&test->args));
  } else if ((t.type == Type::kName || t.type == Type::kString || t.type == Type::kInteger ||
              t.type == Type::kFloat || IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail("You cannot chain multiple tests with is");
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    FOLIO_JINJA_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->args.positional.push_back(std::move(arg));
  }
  test->operand = std::move(node);
  if (negated) return std::make_unique<ast::Unary>(line, ast::UnaryOp::kNot, std::move(test));
  return test;
}

}  // namespace folio::jinja
