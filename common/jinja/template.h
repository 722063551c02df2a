#ifndef FOLIO_COMMON_JINJA_TEMPLATE_H_
#define FOLIO_COMMON_JINJA_TEMPLATE_H_

// A Jinja2 template renderer for Hugging Face chat templates, written by
// hand for folio: Debian ships no C++ Jinja library that fits, and chat
// templates must render byte for byte as Python's jinja2 3.1 renders them
// the way transformers configures it — ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks, the loopcontrols extension and
// {% generation %}, tojson as json.dumps (ensure_ascii off), and the globals
// raise_exception and strftime_now. No Python is involved.
//
// Supported: the whole expression language (literals, Python int/float
// arithmetic, chained comparisons, `in`, tests, filters, calls with keyword
// and */** arguments, slicing, conditional expressions); if, for (loop
// variable, else, `if` filtering, recursive), set (names, tuples, namespace
// attributes, blocks), macro, call, filter, with, block, print, raw,
// break/continue, generation; whitespace control; jinja's builtin filters,
// tests and globals, and the str/list/dict methods the sandbox permits
// (list.pop and list.clear mutate, as in Python; append, update and the
// like fail as SecurityError). Values print as Python's str() does, with
// jinja's Undefined semantics and messages, one-shot generators from
// select/map/…, and compile-time checks of filter and test names.
//
// Not supported, or different from Python:
//   - extends, include, import, from and autoescape tags (INVALID_ARGUMENT);
//     the urlize, wordwrap and xmlattr filters fail when called;
//   - integers are 64-bit: where Python would grow a big integer the render
//     fails with "integer overflow";
//   - range() gives a list (prints as [0, 1, 2], not range(0, 3)); methods
//     and objects print without their address; pprint is repr();
//   - case mapping and isalpha/isdigit know Latin, Greek, Cyrillic,
//     Armenian and full-width letters (and CJK/Hangul/kana as letters);
//     other scripts' letters are left as they are;
//   - escape/e give plain strings (no Markup: `escaped` is always false).
//
// Limits (TemplateOptions): evaluation steps, output bytes and nesting are
// bounded, so no template can hang, exhaust memory without bound, or
// overflow the stack; see interpreter.h.
//
// Thread-safety: a Template is immutable once parsed; Render is const and
// may run on many threads at once.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace folio::jinja {

struct TemplateOptions {
  bool trim_blocks = true;     // as transformers sets them
  bool lstrip_blocks = true;
  int64_t max_steps = 5'000'000;        // evaluation steps (loop iterations, calls, node evals)
  int64_t max_output_bytes = 16 << 20;
  int32_t max_depth = 200;              // macro recursion / nesting
};

class Template {
 public:
  // INVALID_ARGUMENT "chat template line N: <what>" on a syntax error.
  static absl::StatusOr<std::unique_ptr<Template>> Parse(std::string_view source, TemplateOptions options = {});

  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;
  ~Template();

  // context: a JSON object, its members the top-level variables. Thread-safe
  // (const, no shared mutable state).
  // Errors: INVALID_ARGUMENT "chat template line N: <what>";
  // raise_exception(msg) -> INVALID_ARGUMENT whose message is exactly msg,
  // marked so IsRaisedException() is true (an absl status payload);
  // step/output/depth limits -> RESOURCE_EXHAUSTED naming the limit and line.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  struct Tree;
  Template(TemplateOptions options, std::unique_ptr<Tree> tree);

  const TemplateOptions options_;
  const std::unique_ptr<const Tree> tree_;
};

// Whether the status came from the template's raise_exception().
bool IsRaisedException(const absl::Status& status);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_TEMPLATE_H_
