#ifndef FOLIO_TESTS_COMMON_JINJA_TEST_UTIL_H_
#define FOLIO_TESTS_COMMON_JINJA_TEST_UTIL_H_

// Shared by the tests of folio's Jinja renderer (common/jinja/template.h):
// Render() parses and renders in one call, and the RenderCase / ErrorCase
// rows with ExpectRenders / ExpectFails make up the JinjaConformanceTest
// tables (jinja_conformance_*_test.cc).
//
// The JinjaConformanceTest tables are checked against Python: every
// expected output was produced by Debian's python3-jinja2 (3.1) configured
// as transformers configures it —
//   ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
//                                 extensions=[loopcontrols, AssistantTracker])
// with tojson = json.dumps(x, ensure_ascii=False, indent, separators,
// sort_keys) and the globals raise_exception and strftime_now — rendering
// the same template and context. Error rows are cases where Python fails
// too; the message is ours (jinja's text with "chat template line N: " in
// front, where the two agree), and kRaised marks raise_exception().

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/jinja/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio::jinja::testing_util {

using Code = absl::StatusCode;
using Json = nlohmann::ordered_json;

inline constexpr bool kRaised = true;

struct RenderCase {
  const char* tmpl;
  const char* context;  // JSON object
  const char* want;
};

struct ErrorCase {
  const char* tmpl;
  const char* context;
  Code code;
  const char* message;
  bool raised = false;
};

inline absl::StatusOr<std::string> Render(std::string_view tmpl, const Json& context,
                                          TemplateOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse(tmpl, options);
  if (!t.ok()) return t.status();
  return (*t)->Render(context);
}

inline void ExpectRenders(const RenderCase& c) {
  SCOPED_TRACE(c.tmpl);
  absl::StatusOr<std::string> out = Render(c.tmpl, Json::parse(c.context));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, c.want);
}

inline void ExpectFails(const ErrorCase& c) {
  SCOPED_TRACE(c.tmpl);
  absl::StatusOr<std::string> out = Render(c.tmpl, Json::parse(c.context));
  ASSERT_FALSE(out.ok()) << *out;
  EXPECT_EQ(out.status().code(), c.code) << out.status();
  EXPECT_EQ(out.status().message(), c.message);
  EXPECT_EQ(IsRaisedException(out.status()), c.raised);
}

}  // namespace folio::jinja::testing_util

#endif  // FOLIO_TESTS_COMMON_JINJA_TEST_UTIL_H_
