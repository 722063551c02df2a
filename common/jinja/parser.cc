#include "common/jinja/parser.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "common/jinja/ast_walk.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/expression_parser.h"

namespace folio::jinja {
namespace {

using ast::ExprKind;
using ast::ExprPtr;
using ast::StmtPtr;

// The statements of jinja2.parser (with the loopcontrols extension's
// break/continue and transformers' {% generation %}).
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  absl::StatusOr<ast::Body> ParseAll();

 private:
  absl::StatusOr<ast::Body> Subparse(Ends end_tokens);
  absl::StatusOr<ast::Body> SubparseBody(Ends end_tokens);
  // jinja's "Encountered unknown tag" / "Unexpected end of template" error;
  // name null for the end of the template.
  absl::Status UnknownTag(const std::string* name, int line, const std::vector<std::vector<std::string>>& stack);
  absl::StatusOr<StmtPtr> ParseTaggedStatement(const std::string& tag, int line);
  absl::StatusOr<StmtPtr> ParseSimpleStatement(const std::string& tag, int line);
  absl::StatusOr<ast::Body> ParseStatements(Ends end_tokens, bool drop_needle, std::string_view tag);
  absl::StatusOr<StmtPtr> ParseStatement();
  absl::StatusOr<StmtPtr> ParseFor();
  absl::StatusOr<StmtPtr> ParseIf();
  absl::StatusOr<StmtPtr> ParseSet();
  absl::Status ParseSignature(ast::Macro* macro);
  absl::Status ParseMacroBody(ast::Macro* macro, std::string_view end, std::string_view tag);
  absl::StatusOr<StmtPtr> ParseMacro();
  absl::StatusOr<StmtPtr> ParseCallBlock();
  absl::StatusOr<StmtPtr> ParseFilterBlock();
  absl::StatusOr<StmtPtr> ParseWith();
  absl::StatusOr<StmtPtr> ParsePrint();
  absl::StatusOr<StmtPtr> ParseBlock();

  bool in_loop_ = false;  // break/continue allowed here
  std::vector<std::string> block_names_;
  std::vector<std::vector<std::string>> end_stack_;  // end tags the open blocks wait for
  std::vector<std::string> tag_stack_;               // the open block tags
};

absl::StatusOr<ast::Body> Parser::ParseAll() {
  FOLIO_JINJA_ASSIGN_OR_RETURN(ast::Body body, Subparse({}));
  if (Cur().type != Type::kEof) return Fail(Cat("unexpected '", Describe(Cur()), "'"));
  // jinja compiles filters and tests by name: unknown ones fail now,
  // except where an if or a conditional expression makes them soft.
  FOLIO_JINJA_RETURN_IF_ERROR(ast::WalkBody(body, false, [](const ast::Expr& e, bool soft) -> absl::Status {
    if (soft || (e.kind != ExprKind::kFilter && e.kind != ExprKind::kTest)) return absl::OkStatus();
    const auto& f = static_cast<const ast::FilterTest&>(e);
    bool is_filter = e.kind == ExprKind::kFilter;
    if (is_filter ? IsKnownFilter(f.name) : IsKnownTest(f.name)) return absl::OkStatus();
    return TemplateError(Cat("chat template line ", e.line, ": No ", is_filter ? "filter" : "test",
                                      " named '", f.name, "'."));
  }));
  return body;
}


absl::StatusOr<ast::Body> Parser::Subparse(Ends end_tokens) {
  // What the enclosing blocks wait for, for the messages of jinja's parser.
  std::vector<std::string> ends(end_tokens.begin(), end_tokens.end());
  const bool pushed = !ends.empty();
  if (pushed) end_stack_.push_back(std::move(ends));
  absl::StatusOr<ast::Body> body = SubparseBody(end_tokens);
  if (pushed) end_stack_.pop_back();
  return body;
}

absl::Status Parser::UnknownTag(const std::string* name, int line, const std::vector<std::vector<std::string>>& stack) {
  std::string message = name == nullptr ? "Unexpected end of template." : Cat("Encountered unknown tag '", *name, "'.");
  if (!stack.empty()) {
    std::vector<std::string> looking;
    for (const std::string& e : stack.back()) looking.push_back(Cat("'", e, "'"));
    std::string currently = absl::StrJoin(looking, " or ");
    bool expected = false;
    for (const auto& ends : stack) {
      for (const std::string& e : ends) expected = expected || (name != nullptr && e == *name);
    }
    if (expected) {
      Append(&message, " You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for ",
             currently, ".");
    } else {
      Append(&message, " Jinja was looking for the following tags: ", currently, ".");
    }
  }
  if (!tag_stack_.empty()) Append(&message, " The innermost block that needs to be closed is '", tag_stack_.back(), "'.");
  return Fail(message, line);
}

absl::StatusOr<ast::Body> Parser::SubparseBody(Ends end_tokens) {
  ast::Body body;
  std::unique_ptr<ast::Output> output;
  auto flush = [&] {
    if (output) body.push_back(std::move(output));
    output.reset();
  };
  auto out = [&]() -> ast::Output& {
    if (!output) output = std::make_unique<ast::Output>(Cur().line);
    return *output;
  };
  while (Cur().type != Type::kEof) {
    const Token& t = Cur();
    if (t.type == Type::kData) {
      out().parts.push_back({t.value, nullptr});
      Advance();
    } else if (t.type == Type::kVariableBegin) {
      Advance();
      ast::Output& o = out();
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(false, true, {}, false));
      o.parts.push_back({"", std::move(e)});
      FOLIO_JINJA_RETURN_IF_ERROR(ExpectType(Type::kVariableEnd, "end of print statement"));
    } else if (t.type == Type::kBlockBegin) {
      flush();
      Advance();
      for (std::string_view end : end_tokens) {
        if (IsName(end)) return body;
      }
      FOLIO_JINJA_ASSIGN_OR_RETURN(StmtPtr s, ParseStatement());
      if (s) body.push_back(std::move(s));
      FOLIO_JINJA_RETURN_IF_ERROR(ExpectType(Type::kBlockEnd, "end of statement block"));
    } else {
      return Fail(Cat("unexpected '", Describe(t), "'"));
    }
  }
  flush();
  return body;
}

absl::StatusOr<ast::Body> Parser::ParseStatements(Ends end_tokens,
                                          bool drop_needle, std::string_view tag) {
  SkipOp(":");
  FOLIO_JINJA_RETURN_IF_ERROR(ExpectType(Type::kBlockEnd, "end of statement block"));
  FOLIO_JINJA_ASSIGN_OR_RETURN(ast::Body body, Subparse(end_tokens));
  if (Cur().type == Type::kEof) {
    std::vector<std::vector<std::string>> stack = end_stack_;
    stack.emplace_back(end_tokens.begin(), end_tokens.end());
    return UnknownTag(nullptr, Cur().line, stack);
  }
  if (drop_needle) Advance();
  return body;
}

absl::StatusOr<StmtPtr> Parser::ParseStatement() {
  DepthGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  if (Cur().type != Type::kName) return Fail("tag name expected");
  const std::string tag = Cur().value;
  const int line = Cur().line;
  static constexpr std::string_view kTags[] = {"for",   "if",         "set",   "macro",    "call", "filter",
                                               "with",  "print",      "block", "generation"};
  if (std::find(std::begin(kTags), std::end(kTags), tag) == std::end(kTags)) return ParseSimpleStatement(tag, line);
  tag_stack_.push_back(tag);
  absl::StatusOr<StmtPtr> node = ParseTaggedStatement(tag, line);
  tag_stack_.pop_back();
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseTaggedStatement(const std::string& tag, int line) {
  if (tag == "for") return ParseFor();
  if (tag == "if") return ParseIf();
  if (tag == "set") return ParseSet();
  if (tag == "macro") return ParseMacro();
  if (tag == "call") return ParseCallBlock();
  if (tag == "filter") return ParseFilterBlock();
  if (tag == "with") return ParseWith();
  if (tag == "print") return ParsePrint();
  if (tag == "generation") {
    Advance();
    auto node = std::make_unique<ast::ScopeBlock>(line);
    FOLIO_JINJA_ASSIGN_OR_RETURN(node->body, ParseStatements({"endgeneration"}, true, tag));
    return node;
  }
  return ParseBlock();
}

absl::StatusOr<StmtPtr> Parser::ParseSimpleStatement(const std::string& tag, int line) {
  if (tag == "break" || tag == "continue") {
    if (!in_loop_) return Fail(tag == "break" ? "'break' outside loop" : "'continue' not properly in loop");
    Advance();
    return std::make_unique<ast::LoopControl>(
        tag == "break" ? ast::StmtKind::kBreak : ast::StmtKind::kContinue, line);
  }
  if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "autoescape") {
    return Fail(Cat("the '", tag, "' tag is not supported in chat templates"));
  }
  return UnknownTag(&tag, line, end_stack_);
}

absl::StatusOr<StmtPtr> Parser::ParseFor() {
  auto node = std::make_unique<ast::For>(Cur().line);
  Advance();
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->target, ParseAssignTarget(false, false, {"in"}));
  FOLIO_JINJA_RETURN_IF_ERROR(ExpectKeyword("in"));
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->iter, ParseTuple(false, false, {"recursive"}, false));
  if (SkipName("if")) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(node->filter, ParseExpression(true));
  }
  node->recursive = SkipName("recursive");
  bool was_in_loop = in_loop_;
  in_loop_ = true;
  auto body = ParseStatements({"endfor", "else"}, false, "for");
  in_loop_ = was_in_loop;
  if (!body.ok()) return body.status();
  node->body = *std::move(body);
  bool has_else = IsName("else");
  Advance();
  if (has_else) {
    in_loop_ = false;
    auto otherwise = ParseStatements({"endfor"}, true, "for");
    in_loop_ = was_in_loop;
    if (!otherwise.ok()) return otherwise.status();
    node->otherwise = *std::move(otherwise);
  }
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseIf() {
  auto node = std::make_unique<ast::If>(Cur().line);
  Advance();
  while (true) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, false, {}, false));
    FOLIO_JINJA_ASSIGN_OR_RETURN(ast::Body body, ParseStatements({"elif", "else", "endif"}, false, "if"));
    node->branches.emplace_back(std::move(test), std::move(body));
    std::string end = Cur().value;
    Advance();
    if (end == "elif") continue;
    if (end == "else") {
      FOLIO_JINJA_ASSIGN_OR_RETURN(node->otherwise, ParseStatements({"endif"}, true, "if"));
    }
    break;
  }
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseSet() {
  const int line = Cur().line;
  Advance();
  FOLIO_JINJA_ASSIGN_OR_RETURN(ast::Target target, ParseAssignTarget(true, false, {}));
  if (SkipOp("=")) {
    auto node = std::make_unique<ast::Set>(line);
    node->target = std::move(target);
    FOLIO_JINJA_ASSIGN_OR_RETURN(node->value, ParseTuple(false, true, {}, false));
    return node;
  }
  auto node = std::make_unique<ast::SetBlock>(line);
  node->target = std::move(target);
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->filter, ParseFilter(nullptr, false));
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->body, ParseStatements({"endset"}, true, "set"));
  return node;
}

absl::Status Parser::ParseSignature(ast::Macro* macro) {
  FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!macro->params.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string name, ExpectName());
    if (SkipOp("=")) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr d, ParseExpression(true));
      macro->defaults.push_back(std::move(d));
    } else if (!macro->defaults.empty()) {
      return Fail("non-default argument follows default argument");
    }
    macro->params.push_back(std::move(name));
  }
  return ExpectOp(")");
}

// Parses a macro (or call-block caller) body and notes which of the
// special names it reads, as jinja's find_undeclared does.
absl::Status Parser::ParseMacroBody(ast::Macro* macro, std::string_view end, std::string_view tag) {
  bool was_in_loop = in_loop_;
  in_loop_ = false;
  auto body = ParseStatements({end}, true, tag);
  in_loop_ = was_in_loop;
  if (!body.ok()) return body.status();
  macro->body = *std::move(body);
  return ast::WalkBody(macro->body, false, [macro](const ast::Expr& e, bool) {
    if (e.kind == ExprKind::kName) {
      const std::string& n = static_cast<const ast::Name&>(e).name;
      if (n == "varargs") macro->uses_varargs = true;
      if (n == "kwargs") macro->uses_kwargs = true;
      if (n == "caller") macro->uses_caller = true;
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<StmtPtr> Parser::ParseMacro() {
  auto node = std::make_unique<ast::Macro>(Cur().line);
  Advance();
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->name, ExpectName());
  FOLIO_JINJA_RETURN_IF_ERROR(ParseSignature(node.get()));
  FOLIO_JINJA_RETURN_IF_ERROR(ParseMacroBody(node.get(), "endmacro", "macro"));
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseCallBlock() {
  auto node = std::make_unique<ast::CallBlock>(Cur().line);
  Advance();
  node->caller.name = "caller";
  if (IsOp("(")) FOLIO_JINJA_RETURN_IF_ERROR(ParseSignature(&node->caller));
  const int line = Cur().line;
  FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr call, ParseExpression(true));
  if (call->kind != ExprKind::kCall) return Fail("expected call", line);
  node->call.reset(static_cast<ast::Call*>(call.release()));
  FOLIO_JINJA_RETURN_IF_ERROR(ParseMacroBody(&node->caller, "endcall", "call"));
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseFilterBlock() {
  auto node = std::make_unique<ast::FilterBlock>(Cur().line);
  Advance();
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->filter, ParseFilter(nullptr, true));
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->body, ParseStatements({"endfilter"}, true, "filter"));
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseWith() {
  auto node = std::make_unique<ast::With>(Cur().line);
  Advance();
  while (Cur().type != Type::kBlockEnd) {
    if (!node->assignments.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
    FOLIO_JINJA_ASSIGN_OR_RETURN(ast::Target target, ParseAssignTarget(false, false, {}));
    FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp("="));
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    node->assignments.emplace_back(std::move(target), std::move(value));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(node->body, ParseStatements({"endwith"}, true, "with"));
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParseBlock() {
  auto node = std::make_unique<ast::ScopeBlock>(Cur().line);
  Advance();
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string name, ExpectName());
  if (std::find(block_names_.begin(), block_names_.end(), name) != block_names_.end()) {
    return Fail(Cat("block '", name, "' defined twice"), node->line);
  }
  block_names_.push_back(name);
  node->top_level_frame = !SkipName("scoped");
  const bool required = SkipName("required");
  if (IsOp("-")) {
    return Fail("Block names in Jinja have to be valid Python identifiers and may not contain hyphens, use an "
                "underscore instead.");
  }
  // A block is a function of its own in jinja: loop controls stop at it.
  const bool was_in_loop = in_loop_;
  in_loop_ = false;
  auto body = ParseStatements({"endblock"}, true, "block");
  in_loop_ = was_in_loop;
  if (!body.ok()) return body.status();
  node->body = *std::move(body);
  if (required) {
    for (const auto& s : node->body) {
      bool blank = s->kind == ast::StmtKind::kOutput;
      if (blank) {
        for (const auto& part : static_cast<const ast::Output&>(*s).parts) {
          blank = blank && part.expr == nullptr && part.text.find_first_not_of(" \t\n\r\f\v") == std::string::npos;
        }
      }
      if (!blank) return Fail("Required blocks can only contain comments or whitespace", node->line);
    }
    node->required_block = name;
  }
  SkipName(name);
  return node;
}

absl::StatusOr<StmtPtr> Parser::ParsePrint() {
  auto node = std::make_unique<ast::Output>(Cur().line);
  Advance();
  while (Cur().type != Type::kBlockEnd) {
    if (!node->parts.empty()) FOLIO_JINJA_RETURN_IF_ERROR(ExpectOp(","));
    FOLIO_JINJA_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
    node->parts.push_back({"", std::move(e)});
  }
  return node;
}

}  // namespace

absl::StatusOr<ast::Body> ParseTemplate(std::string_view source, const ParserOptions& options) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, options.lexer));
  return Parser(std::move(tokens), options.max_depth).ParseAll();
}

}  // namespace folio::jinja
