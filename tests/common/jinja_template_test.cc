// JinjaTemplateTest: the API of folio's Jinja renderer (common/jinja/
// template.h) beyond jinja2 conformance: raised exceptions, error payloads,
// the trim_blocks / lstrip_blocks options, the JSON context, documented
// differences from Python, strftime_now and concurrent renders.

#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
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

TEST(JinjaTemplateTest, RaisedExceptionsAreMarked) {
  absl::StatusOr<std::string> out = Render("a\n{{ raise_exception('Only user and assistant roles') }}", Json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Only user and assistant roles");
  EXPECT_TRUE(IsRaisedException(out.status()));

  absl::StatusOr<std::string> other = Render("{{ 1 // 0 }}", Json::object());
  ASSERT_FALSE(other.ok());
  EXPECT_FALSE(IsRaisedException(other.status()));
  EXPECT_FALSE(IsRaisedException(absl::InvalidArgumentError("Only user and assistant roles")));
  EXPECT_FALSE(IsRaisedException(absl::OkStatus()));
}

TEST(JinjaTemplateTest, ErrorsCarryNoInternalPayloads) {
  absl::StatusOr<std::string> out = Render("{{ x.y.z }}", Json::object());
  ASSERT_FALSE(out.ok());
  int payloads = 0;
  out.status().ForEachPayload([&](absl::string_view, const absl::Cord&) { ++payloads; });
  EXPECT_EQ(payloads, 0);
}

TEST(JinjaTemplateTest, TrimAndLstripOptions) {
  const char* kSources[] = {"  {% if true %}\n  x\n  {% endif %}\n  y", "a\n  {# c #}\nb",
                            "{% for i in [1,2] %}\n{{ i }}\n{% endfor %}"};
  struct {
    bool trim, lstrip;
    const char* want[3];
  } kWant[] = {
      {false, false, {"  \n  x\n  \n  y", "a\n  \nb", "\n1\n\n2\n"}},
      {false, true, {"\n  x\n\n  y", "a\n\nb", "\n1\n\n2\n"}},
      {true, false, {"    x\n    y", "a\n  b", "1\n2\n"}},
      {true, true, {"  x\n  y", "a\nb", "1\n2\n"}},
  };
  for (const auto& w : kWant) {
    TemplateOptions options;
    options.trim_blocks = w.trim;
    options.lstrip_blocks = w.lstrip;
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(testing::Message() << w.trim << w.lstrip << " " << kSources[i]);
      absl::StatusOr<std::string> out = Render(kSources[i], Json::object(), options);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(*out, w.want[i]);
    }
  }
}

TEST(JinjaTemplateTest, JsonContextKeepsIntFloatAndOrder) {
  Json context = Json::parse(R"({"z": 1, "a": 1.0, "m": [2, 2.5e0, 18446744073709551615, -9223372036854775808]})");
  absl::StatusOr<std::string> out =
      Render("{% for k, v in ctx.items() %}{{ k }}={{ v }};{% endfor %}{{ z is integer }}{{ a is float }}{{ m }}",
             Json{{"ctx", context}, {"z", 1}, {"a", 1.0}, {"m", context["m"]}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "z=1;a=1.0;m=[2, 2.5, 1.8446744073709552e+19, -9223372036854775808];TrueTrue"
                  "[2, 2.5, 1.8446744073709552e+19, -9223372036854775808]");
}

TEST(JinjaTemplateTest, ContextMustBeAnObject) {
  absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Render(Json::array()).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(*(*t)->Render(Json()), "x");  // null: no variables
}

TEST(JinjaTemplateTest, DeepContextIsRefused) {
  Json deep = Json::array();
  for (int i = 0; i < 2000; ++i) deep = Json::array({deep});
  absl::StatusOr<std::string> out = Render("{{ x|length }}", Json{{"x", deep}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kInvalidArgument);
}

// Where folio knowingly differs from Python (documented in template.h).
TEST(JinjaTemplateTest, DocumentedDifferences) {
  absl::StatusOr<std::string> big = Render("{{ 2 ** 62 * 2 }}", Json::object());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "chat template line 1: integer overflow (folio's template integers are 64-bit)");
  EXPECT_EQ(*Render("{{ range(3) }}", Json::object()), "[0, 1, 2]");  // Python: range(0, 3)
  EXPECT_EQ(*Render("{{ 'ab'.upper }}", Json::object()), "<built-in method upper of str object>");  // no address
}

TEST(JinjaTemplateTest, StrftimeNowIsLocalTime) {
  std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  char want[64];
  std::strftime(want, sizeof(want), "%d %b %Y", &local);
  absl::StatusOr<std::string> out = Render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('') }}|", Json::object());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::string(want) + "||");  // (fails only across midnight)
}

TEST(JinjaTemplateTest, ConcurrentRendersOfOneTemplate) {
  absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content|trim }}{% endfor %}{{ ns.n }}{{ [1,2]|select|list }}");
  ASSERT_TRUE(t.ok()) << t.status();
  Json context = {{"messages", Json::array()}};
  std::string want;
  for (int i = 0; i < 50; ++i) {
    context["messages"].push_back({{"role", "user"}, {"content", " m" + std::to_string(i) + " "}});
    want += "<user>m" + std::to_string(i);
  }
  want += "50[1, 2]";
  std::vector<std::thread> threads;
  std::vector<int> good(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int r = 0; r < 50; ++r) {
        absl::StatusOr<std::string> out = (*t)->Render(context);
        good[k] += out.ok() && *out == want;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(good[k], 50);
}

}  // namespace
}  // namespace folio::jinja
