// JinjaLimitsTest: the resource limits of folio's Jinja renderer
// (TemplateOptions in common/jinja/template.h): recursion depth, loop steps,
// output and memory size, source and value nesting, and stack use, and that
// realistic prompts stay far from them.

#include <pthread.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/jinja/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/jinja_test_util.h"

namespace folio::jinja {
namespace {

using testing_util::Code;
using testing_util::Json;
using testing_util::Render;

// Renders `tmpl` and expects RESOURCE_EXHAUSTED mentioning `what`, fast.
void ExpectExhausted(const std::string& tmpl, const std::string& what,
                     TemplateOptions options = {}) {
  SCOPED_TRACE(tmpl.substr(0, 80));
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> out = Render(tmpl, Json::object(), options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kResourceExhausted) << out.status();
  EXPECT_NE(out.status().message().find(what), absl::string_view::npos) << out.status();
  EXPECT_NE(out.status().message().find("chat template line "), absl::string_view::npos) << out.status();
  EXPECT_LT(seconds, 10.0);
}

TEST(JinjaLimitsTest, UnboundedRecursionStops) {
  ExpectExhausted("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "max_depth");
  ExpectExhausted("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "max_depth");
  ExpectExhausted("{% macro f(n) %}{{ n }}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}", "max_depth");
}

TEST(JinjaLimitsTest, HugeLoopsStop) {
  // The sandbox refuses ranges over 100000 items outright.
  ExpectExhausted("{% for i in range(100000000) %}x{% endfor %}", "MAX_RANGE");
  ExpectExhausted("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "max_steps");
  ExpectExhausted("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                  "max_steps");
  TemplateOptions few;
  few.max_steps = 1000;
  ExpectExhausted("{% for i in range(10000) %}{% endfor %}", "max_steps (1000", few);
}

TEST(JinjaLimitsTest, OutputIsBounded) {
  ExpectExhausted("{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxxxxxxxx{% endfor %}{% endfor %}",
                  "max_output_bytes");
  ExpectExhausted("{{ 'a' * 100000000 }}", "max_output_bytes");
  ExpectExhausted("{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                  "max_output_bytes");
  TemplateOptions small;
  small.max_output_bytes = 100;
  ExpectExhausted("{% for i in range(200) %}x{% endfor %}", "max_output_bytes (100)", small);
  EXPECT_TRUE(Render("{% for i in range(100) %}x{% endfor %}", Json::object(), small).ok());
}

TEST(JinjaLimitsTest, MemoryIsBounded) {
  // One big string referenced many times must not print, format or repeat
  // into gigabytes.
  const std::string big = "{% set a = 'x' * 1000000 %}{% set b = [a] * 1000 %}";
  ExpectExhausted(big + "{{ b }}", "max_output_bytes");
  ExpectExhausted(big + "{{ b|tojson }}", "max_output_bytes");
  ExpectExhausted(big + "{{ b|string|length }}", "max_output_bytes");
  ExpectExhausted(big + "{{ b|join }}", "max_output_bytes");
  ExpectExhausted(big + "{{ ('%s' * 100) % ((b[:100])|list) }}", "max_output_bytes");
  ExpectExhausted(big + "{{ ('{}' * 100).format(*b[:100]) }}", "max_output_bytes");
  ExpectExhausted("{% set a = 'x' * 1000000 %}{{ a|replace('', 'yyyyyyyyyyyyyyyyyyyy') }}", "max_output_bytes");
  ExpectExhausted("{% set a = 'x\n' * 1000000 %}{{ a|indent(100) }}", "max_output_bytes");
  ExpectExhausted("{{ ('\t' * 100000).expandtabs(100000) }}", "max_output_bytes");
  ExpectExhausted("{{ [1]|batch(1000000000000, 'x')|list }}", "max_steps");
  ExpectExhausted("{{ [1]|slice(1000000000000)|list }}", "max_steps");
}

TEST(JinjaLimitsTest, DeepSourceIsRefusedAtParse) {
  for (const std::string& source :
       {"{{ " + std::string(1000000, '(') + "1" + std::string(1000000, ')') + " }}",
        "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}", "{{ " + std::string(100000, '-') + "1 }}",
        [] {
          std::string s = "{{ ";
          for (int i = 0; i < 100000; ++i) s += "not ";
          return s + "1 }}";
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 100000; ++i) s += "{% if true %}";
          return s;
        }()}) {
    absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse(source);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
    EXPECT_NE(t.status().message().find("max_depth (200)"), absl::string_view::npos) << t.status();
  }
  // Nesting within max_depth parses.
  EXPECT_EQ(*Render("{{ " + std::string(150, '(') + "1" + std::string(150, ')') + " }}", Json::object()), "1");
  TemplateOptions shallow;
  shallow.max_depth = 10;
  EXPECT_FALSE(Template::Parse("{{ ((((((((((((1)))))))))))) }}", shallow).ok());
}

TEST(JinjaLimitsTest, DeepValuesDoNotOverflowTheStack) {
  // 100000 nested lists: building and freeing them must not recurse.
  EXPECT_EQ(*Render("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}ok",
                    Json::object()),
            "ok");
  EXPECT_EQ(*Render("{% set ns = namespace(n=none) %}{% for i in range(100000) %}"
                    "{% set ns.n = namespace(x=ns.n) %}{% endfor %}ok",
                    Json::object()),
            "ok");
  // Printing them fails like Python's RecursionError.
  absl::StatusOr<std::string> out = Render(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
      Json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("recursion"), absl::string_view::npos) << out.status();
  // A namespace holding itself.
  EXPECT_FALSE(Render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}", Json::object()).ok());
  EXPECT_EQ(*Render("{% set ns = namespace() %}{% set ns.self = [ns] %}ok", Json::object()), "ok");
}

// The deepest evaluation the limits allow must fit in a 1 MiB stack.
void* RenderDeep(void* result) {
  std::string inner;
  for (int i = 0; i < 6; ++i) inner += "{% if true %}";
  inner += "{{ ((((((f(n - 1)|string)))))) ~ '' }}";
  for (int i = 0; i < 6; ++i) inner += "{% endif %}";
  std::string tmpl = "{% macro f(n) %}{% if n > 0 %}" + inner + "{% endif %}{% endmacro %}{{ f(1000) }}";
  *static_cast<absl::Status*>(result) = Render(tmpl, Json::object()).status();
  return nullptr;
}

TEST(JinjaLimitsTest, NestingFitsInOneMegabyteOfStack) {
  absl::Status status;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, RenderDeep, &status), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(status.code(), Code::kResourceExhausted) << status;
}

TEST(JinjaLimitsTest, RealisticPromptsStayFarFromTheLimits) {
  Json messages = Json::array();
  for (int i = 0; i < 2000; ++i) {
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(2000, 'a' + i % 26)}});
  }
  absl::StatusOr<std::string> out = Render(
      "{% for message in messages %}{% if loop.first and message.role != 'user' %}{{ raise_exception('x') }}"
      "{% endif %}{{ '<|' ~ message['role'] ~ '|>\n' ~ message['content'] | trim ~ '<|end|>\n' }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
      Json{{"messages", messages}, {"add_generation_prompt", true}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->size(), 2000u * 2017 + 1000 * 5 + 14);
}

}  // namespace
}  // namespace folio::jinja
