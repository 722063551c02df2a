// chat_template_render: renders chat-template cases with folio's Jinja renderer,
// for chat_template_conformance_test.py, which compares the results byte for byte
// with Python's jinja2.
//
//   chat_template_render CASES.json
//
// CASES.json is a JSON array of {"template": "<path to a .jinja file>",
// "context": {<top-level template variables>}}. Each template file is read and
// parsed once (cached by path). Prints to stdout a JSON array with one result per
// case, in order:
//   {"output": "<rendered text>"}                      when rendering succeeded,
//   {"error": "<status message>", "raised": true|false} when parsing or rendering
//       failed; "raised" is true exactly for the template's raise_exception(msg),
//       whose message is msg.
// Exits non-zero only when the cases file itself cannot be read or is malformed.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/jinja/template.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"

namespace {

using Json = nlohmann::ordered_json;

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return static_cast<bool>(in) || in.eof();
}

Json ErrorResult(const absl::Status& status) {
  Json result = Json::object();
  result["error"] = std::string(status.message());
  result["raised"] = folio::jinja::IsRaisedException(status);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CASES.json\n";
    return 2;
  }
  std::string text;
  if (!ReadFile(argv[1], &text)) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 1;
  }
  Json cases;
  try {
    cases = Json::parse(text);
  } catch (const Json::exception& e) {
    std::cerr << argv[1] << ": invalid JSON: " << e.what() << "\n";
    return 1;
  }
  if (!cases.is_array()) {
    std::cerr << argv[1] << ": expected a JSON array of cases\n";
    return 1;
  }

  // Parsed templates by path; a failed read or parse is kept and reported for every
  // case that uses it.
  std::map<std::string, absl::StatusOr<std::unique_ptr<folio::jinja::Template>>> templates;

  Json results = Json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Json& c = cases[i];
    if (!c.is_object() || !c.contains("template") || !c["template"].is_string() || !c.contains("context") ||
        !c["context"].is_object()) {
      std::cerr << argv[1] << ": case " << i << " needs a string \"template\" and an object \"context\"\n";
      return 1;
    }
    const std::string path = c["template"].get<std::string>();
    auto it = templates.find(path);
    if (it == templates.end()) {
      std::string source;
      absl::StatusOr<std::unique_ptr<folio::jinja::Template>> parsed =
          ReadFile(path, &source) ? folio::jinja::Template::Parse(source)
                                  : absl::StatusOr<std::unique_ptr<folio::jinja::Template>>(
                                        absl::NotFoundError("cannot read template " + path));
      it = templates.emplace(path, std::move(parsed)).first;
    }
    if (!it->second.ok()) {
      results.push_back(ErrorResult(it->second.status()));
      continue;
    }
    absl::StatusOr<std::string> rendered = (*it->second)->Render(c["context"]);
    if (!rendered.ok()) {
      results.push_back(ErrorResult(rendered.status()));
      continue;
    }
    Json result = Json::object();
    result["output"] = *std::move(rendered);
    results.push_back(std::move(result));
  }

  // Invalid UTF-8 in an output is replaced (U+FFFD) rather than aborting the run;
  // the byte comparison then reports that case.
  std::cout << folio::JsonText(results) << "\n";
  std::cout.flush();
  return std::cout ? 0 : 1;
}
