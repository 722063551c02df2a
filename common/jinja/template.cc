#include "common/jinja/template.h"

#include <utility>

#include "common/jinja/ast.h"
#include "common/jinja/errors.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/parser.h"

namespace folio::jinja {

struct Template::Tree {
  ast::Body body;
};

Template::Template(TemplateOptions options, std::unique_ptr<Tree> tree)
    : options_(options), tree_(std::move(tree)) {}

Template::~Template() = default;

absl::StatusOr<std::unique_ptr<Template>> Template::Parse(std::string_view source, TemplateOptions options) {
  ParserOptions parser_options;
  parser_options.lexer.trim_blocks = options.trim_blocks;
  parser_options.lexer.lstrip_blocks = options.lstrip_blocks;
  parser_options.max_depth = options.max_depth;
  absl::StatusOr<ast::Body> body = ParseTemplate(source, parser_options);
  if (!body.ok()) return Finish(body.status());
  auto tree = std::make_unique<Tree>();
  tree->body = *std::move(body);
  return std::unique_ptr<Template>(new Template(options, std::move(tree)));
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context) const {
  Interpreter interpreter(options_);
  absl::StatusOr<std::string> out = interpreter.Render(tree_->body, context);
  if (!out.ok()) return Finish(out.status());
  return out;
}

bool IsRaisedException(const absl::Status& status) { return IsRaised(status); }

}  // namespace folio::jinja
