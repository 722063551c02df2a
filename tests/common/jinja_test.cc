// Tests of folio's Jinja renderer (common/jinja/template.h).
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

#include <pthread.h>

#include <chrono>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/jinja/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio::jinja {
namespace {

using Code = absl::StatusCode;
using Json = nlohmann::ordered_json;

constexpr bool kRaised = true;

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

absl::StatusOr<std::string> Render(std::string_view tmpl, const Json& context, TemplateOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse(tmpl, options);
  if (!t.ok()) return t.status();
  return (*t)->Render(context);
}

void ExpectRenders(const RenderCase& c) {
  SCOPED_TRACE(c.tmpl);
  absl::StatusOr<std::string> out = Render(c.tmpl, Json::parse(c.context));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, c.want);
}

void ExpectFails(const ErrorCase& c) {
  SCOPED_TRACE(c.tmpl);
  absl::StatusOr<std::string> out = Render(c.tmpl, Json::parse(c.context));
  ASSERT_FALSE(out.ok()) << *out;
  EXPECT_EQ(out.status().code(), c.code) << out.status();
  EXPECT_EQ(out.status().message(), c.message);
  EXPECT_EQ(IsRaisedException(out.status()), c.raised);
}

TEST(JinjaConformanceTest, Whitespace) {
  static const RenderCase kCases[] = {
      {"hello\n", "{}", "hello"},
      {"hello\n\n", "{}", "hello\n"},
      {"a\r\nb\rc\n", "{}", "a\nb\nc"},
      {"{% if true %}\nA\n{% endif %}\nB", "{}", "A\nB"},
      {"{% if true %}\r\nA\r\n{% endif %}\r\nB\r\n", "{}", "A\nB"},
      {"x\n    {% if true %}   \nA{% endif %}", "{}", "x\n   \nA"},
      {"x    {% if true %}A{% endif %}", "{}", "x    A"},
      {"\t {% if true %}A{% endif %}", "{}", "A"},
      {"  {% if true %}\n  x\n  {% endif %}\n  y", "{}", "  x\n  y"},
      {"{{ 1 }}  {% if true %}x{% endif %}", "{}", "1  x"},
      {"x\n \t{# comment #}\ny", "{}", "x\ny"},
      {"x\n  {#- comment -#}  \n  y", "{}", "xy"},
      {"x {#+ c +#}\ny", "{}", "x \ny"},
      {"{#\n multi\n line\n#}\nx", "{}", "x"},
      {"{{- ' a ' -}}", "{}", " a "},
      {"a \n {{- 1 }} \n b", "{}", "a1 \n b"},
      {"a \n {{ 1 -}} \n b", "{}", "a \n 1b"},
      {"a\n  {{ 1 }}\nb", "{}", "a\n  1\nb"},
      {"a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc"},
      {"a\n{%+ if true %}b{% endif %}", "{}", "a\nb"},
      {"  {%+ if true %}x{% endif %}", "{}", "  x"},
      {"x  {%+ if true +%}\ny{% endif %}", "{}", "x  \ny"},
      {"{% if true %}a{% endif +%}\nb", "{}", "a\nb"},
      {"{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}\n", "{}", "  1\n  2\n"},
      {"{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}", "{}", "12"},
      {"{%- for i in [1,2] %}  {{ i }}  {% endfor -%}  ", "{}", "  1    2  "},
      {"{% raw %}{{ x }}{% if %}{% endraw %}", "{}", "{{ x }}{% if %}"},
      {"a {%- raw -%}  {{ x }}  {%- endraw -%} b", "{}", "a{{ x }}b"},
      {"a\n  {% raw %}\n x \n  {% endraw %}\nb", "{}", "a\n\n x \nb"},
      {"{% raw %}\na{% endraw %}", "{}", "\na"},
      {"a\n\n\n", "{}", "a\n\n"},
      {"{{ '\n' }}\n", "{}", "\n"},
      {"{% set x = 1 %}\n{% set y = 2 %}\n{{ x }}{{ y }}", "{}", "12"},
      {"{% macro m() %}\n  body\n{% endmacro %}\n[{{ m() }}]", "{}", "[  body\n]"},
      {"<<{%- if true %}\n\n  x{% endif -%}\n\n>>", "{}", "<<\n  x>>"},
      {"a{{ '' }}\n  {% if true %}b{% endif %}", "{}", "a\nb"},
      {"{{ 'a' }}\n{%- if true %}b{% endif %}", "{}", "ab"},
      {"  {% if true %}x{% endif %}", "{}", "x"},
      {"a　{%- if true %}x{% endif %}", "{}", "ax"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, Literals) {
  static const RenderCase kCases[] = {
      {"{{ 1 }}{{ -1 }}{{ 1.5 }}{{ 'a' }}{{ \"b\" }}{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}",
       "{}",
       "1-11.5abTrueTrueFalseNoneNone"},
      {"{{ 1_000 }}{{ 0x1F }}{{ 0o17 }}{{ 0b101 }}{{ 1.5e3 }}{{ 1E-3 }}{{ 2.5e+2 }}",
       "{}",
       "1000311551500.00.001250.0"},
      {"{{ 'a' 'b' }}{{ \"x\\\"y\" }}{{ 'x\\'y' }}{{ '\\u00e9\\x41\\101\\t|\\n|\\\\|\\q' }}",
       "{}",
       "abx\"yx'yéAA\t|\n|\\|\\q"},
      {"{{ [1, 'a', none, [2]] }}{{ (1, 'a') }}{{ () }}{{ (1,) }}{{ {'a': 1, 2: [3]} }}",
       "{}",
       "[1, 'a', None, [2]](1, 'a')()(1,){'a': 1, 2: [3]}"},
      {"{{ [1, 2, 3,] }}{{ {'a': 1,} }}{{ (1, 2,) }}", "{}", "[1, 2, 3]{'a': 1}(1, 2)"},
      {"{{ {1: 2, 'a': none, 'b': true, 'c': 1.5} }}", "{}", "{1: 2, 'a': None, 'b': True, 'c': 1.5}"},
      {"{{ {1: 'a', true: 'b', 1.0: 'c'} }}", "{}", "{1: 'c'}"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, PythonStr) {
  static const RenderCase kCases[] = {
      {"{{ x }}", "{\"x\": [1, \"a\", null, true, 1.5, {\"k\": \"v\"}]}", "[1, 'a', None, True, 1.5, {'k': 'v'}]"},
      {"{{ x }}", "{\"x\": \"it's\"}", "it's"},
      {"{{ [x] }}", "{\"x\": \"it's \\\"q\\\"\"}", "['it\\'s \"q\"']"},
      {"{{ ['a\\nb', 'c\\td', '\\\\', '\\r'] }}", "{}", "['a\\nb', 'c\\td', '\\\\', '\\r']"},
      {"{{ ['\\x00', '\\x7f', '\\u00a0', '\\u200b', 'é', '日本', \"'\", '\"', '\\'\"'] }}",
       "{}",
       "['\\x00', '\\x7f', '\\xa0', '\\u200b', 'é', '日本', \"'\", '\"', '\\'\"']"},
      {"{{ [1.0, 1e100, 1.5e-10, 100.0, 0.0001, 0.00001, 12345678901234567.0, 1/3, 2/3, -1.5, -0.0] }}",
       "{}",
       "[1.0, 1e+100, 1.5e-10, 100.0, 0.0001, 1e-05, 1.2345678901234568e+16, 0.3333333333333333, 0.6666666666666666, -1.5, -0.0]"},
      {"{{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 1.0 }} {{ 123456789.0 }} {{ 1e22 }} {{ 3.14 }} {{ 2.5e-7 }}",
       "{}",
       "1e+16 1000000000000000.0 1e-05 0.30000000000000004 1.0 123456789.0 1e+22 3.14 2.5e-07"},
      {"{{ x }}",
       "{\"x\": [1.0, 1e+100, 1.5e-10, 100.0, 0.0001, 123.456, 1e+16, 9007199254740993]}",
       "[1.0, 1e+100, 1.5e-10, 100.0, 0.0001, 123.456, 1e+16, 9007199254740993]"},
      {"{{ x }}", "{\"x\": {\"nested\": {\"list\": [[], {}, [[1]]]}}}", "{'nested': {'list': [[], {}, [[1]]]}}"},
      {"{{ True }}{{ False }}{{ None }}{{ true|string }}{{ none|string }}", "{}", "TrueFalseNoneTrueNone"},
      {"{{ x.items() }}{{ x.keys() }}{{ x.values() }}",
       "{\"x\": {\"a\": 1}}",
       "dict_items([('a', 1)])dict_keys(['a'])dict_values([1])"},
      {"{% set ns = namespace(a=1, b=[2]) %}{{ ns }}", "{}", "<Namespace {'a': 1, 'b': [2]}>"},
      {"{% macro f(a) %}{% endmacro %}{{ f }}", "{}", "<Macro 'f'>"},
      {"{{ x }}|{{ [x] }}", "{}", "|[Undefined]"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, Arithmetic) {
  static const RenderCase kCases[] = {
      {"{{ 1 + 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2**3**2 }}",
       "{}",
       "3 3.5 3 -4 2 -2 1024 0.5 64"},
      {"{{ 1.5 + 1 }} {{ 7.5 // 2 }} {{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} {{ 6 / 3 }} {{ 2 ** 0.5 }} {{ 4 ** 0.5 }}",
       "{}",
       "2.5 3.0 -4.0 1.5 0.5 2.0 1.4142135623730951 2.0"},
      {"{{ 10 // 3 * 3 + 10 % 3 }}{{ -2 ** 2 }}{{ (-2) ** 2 }}{{ 2 * -1 }}{{ not 1 == 2 }}{{ 1 + 2 * 3 - 4 / 2 }}",
       "{}",
       "1044-2True5.0"},
      {"{{ 'ab' * 3 }}{{ 3 * 'ab' }}{{ [1] * 2 }}{{ 'a' * 0 }}{{ 'a' * -1 }}{{ 'ab' + 'cd' }}{{ [1] + [2] }}{{ (1,) + (2,) }}",
       "{}",
       "abababababab[1, 1]abcd[1, 2](1, 2)"},
      {"{{ true + true }}{{ true * 3 }}{{ 1 + 1.0 }}{{ -true }}{{ +1 }}{{ -(-1) }}", "{}", "232.0-111"},
      {"{{ -1|abs }}{{ - 2 | string }}{{ (-2)|string }}", "{}", "1-2-2"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, ArithmeticErrors) {
  static const ErrorCase kCases[] = {
      {"{{ 'a' ~ 1 ~ none ~ true ~ 1.5 }}{{ 1 ~ 2 + 3 }}{{ 'a' ~ 1 * 2 }}{{ 2 + 3 ~ 4 }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: can only concatenate str (not \"int\") to str"},
      {"{{ 5 // 0 }}", "{}", Code::kInvalidArgument, "chat template line 1: integer division or modulo by zero"},
      {"{{ 5 / 0 }}", "{}", Code::kInvalidArgument, "chat template line 1: division by zero"},
      {"{{ 5 % 0 }}", "{}", Code::kInvalidArgument, "chat template line 1: integer modulo by zero"},
      {"{{ 1 + 'a' }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: unsupported operand type(s) for +: 'int' and 'str'"},
      {"{{ 'a' - 1 }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: unsupported operand type(s) for -: 'str' and 'int'"},
      {"{{ [1] + (1,) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: can only concatenate list (not \"tuple\") to list"},
      {"{{ none + 1 }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: unsupported operand type(s) for +: 'NoneType' and 'int'"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Comparisons) {
  static const RenderCase kCases[] = {
      {"{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 3 > 2 > 1 }}{{ 1 <= 1 >= 1 }}{{ 1 == 1 != 2 }}",
       "{}",
       "TrueFalseTrueTrueTrue"},
      {"{{ 'a' in 'abc' }}{{ 'd' in 'abc' }}{{ 1 not in [1] }}{{ 'a' in {'a': 1} }}{{ 2 in (1, 2) }}",
       "{}",
       "TrueFalseFalseTrueTrue"},
      {"{{ true == 1 }}{{ 1 == 1.0 }}{{ [1] == [1.0] }}{{ (1,) == [1] }}{{ {'a': 1} == {'a': 1.0} }}{{ 'a' == 'a' }}{{ none == none }}{{ 1 == '1' }}",
       "{}",
       "TrueTrueTrueFalseTrueTrueTrueFalse"},
      {"{{ 'abc' < 'abd' }}{{ [1, 2] < [1, 3] }}{{ [1] < [1, 0] }}{{ (2,) > (1, 9) }}{{ 'B' < 'a' }}",
       "{}",
       "TrueTrueTrueTrueTrue"},
      {"{{ x == x }}{{ x != 1 }}{{ x == none }}{{ x in [1] }}{{ 'a' in x }}", "{}", "TrueTrueFalseFalseFalse"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, ComparisonsErrors) {
  static const ErrorCase kCases[] = {
      {"{{ 1 < 'a' }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: '<' not supported between instances of 'int' and 'str'"},
      {"{{ none < none }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: '<' not supported between instances of 'NoneType' and 'NoneType'"},
      {"{{ x < 1 }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ 1 in 'abc' }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'in <string>' requires string as left operand, not int"},
      {"{{ 1 in 5 }}", "{}", Code::kInvalidArgument, "chat template line 1: argument of type 'int' is not iterable"},
      {"{{ [1] in {'a': 1} }}", "{}", Code::kInvalidArgument, "chat template line 1: unhashable type: 'list'"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Logic) {
  static const RenderCase kCases[] = {
      {"{{ 1 and 2 }}{{ 0 and 2 }}{{ 0 or 'x' }}{{ '' or [] }}{{ not 0 }}{{ not [] }}{{ not 'a' }}",
       "{}",
       "20x[]TrueTrueFalse"},
      {"{{ 1 if x else 2 }}{{ 3 if not x }}|{{ 1 if 0 else 2 if 0 else 3 }}", "{\"x\": false}", "23|3"},
      {"{{ 'a' if x is defined and x else 'b' }}{{ not x }}{{ not x is defined }}{{ x is not defined }}",
       "{}",
       "bTrueTrueTrue"},
      {"{% if x %}yes{% elif y %}y{% else %}no{% endif %}", "{\"x\": 0, \"y\": [1]}", "y"},
      {"{% if x %}yes{% elif y %}y{% else %}no{% endif %}", "{\"x\": 0, \"y\": []}", "no"},
      {"{% if x %}a{% endif %}{% if {} %}b{% endif %}{% if 0.0 %}c{% endif %}{% if ' ' %}d{% endif %}", "{}", "d"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, Access) {
  static const RenderCase kCases[] = {
      {"{{ x.y }}{{ x['y'] }}{{ x.z }}|{{ x['z'] }}|", "{\"x\": {\"y\": 3}}", "33||"},
      {"{{ x.0 }}{{ x.1.0 }}{{ x[-1][0] }}", "{\"x\": [1, [2]]}", "122"},
      {"{{ x[1:] }}{{ x[::-1] }}{{ x[-2:] }}{{ x[0:1] }}{{ x[:] }}{{ x[::2] }}{{ x[5:] }}{{ x[-10:2] }}{{ x[3:1:-1] }}",
       "{\"x\": [0, 1, 2, 3, 4]}",
       "[1, 2, 3, 4][4, 3, 2, 1, 0][3, 4][0][0, 1, 2, 3, 4][0, 2, 4][][0, 1][3, 2]"},
      {"{{ s[1:3] }}{{ s[::-1] }}{{ s[1] }}{{ s[-1] }}{{ 'abcdef'[1:-1:2] }}{{ 'héllo wörld'[::-2] }}{{ (1, 2, 3)[1:] }}",
       "{\"s\": \"héllo\"}",
       "élolléhéobddrwolh(2, 3)"},
      {"{{ [1, 2][5] }}|{{ {'a': 1}['b'] }}|{{ 'abc'[10] }}|{{ x[0] }}|{{ x.y }}|", "{\"x\": []}", "|||||"},
      {"{{ x.items is callable }}|{{ x['items'] }}|{{ x['get'] is callable }}|{{ x.items()|list }}",
       "{\"x\": {\"items\": 1}}",
       "True|1|True|[('items', 1)]"},
      {"{{ x.__class__ }}|{{ x._y }}|{{ x.append }}|", "{\"x\": {\"_y\": 1}}", "|1||"},
      {"{{ none.x }}|{{ none['x'] }}|{{ 1.x }}|", "{}", "|||"},
      {"{{ x['content'] is string }}{{ x.content is not none }}{{ x.tool_calls is not defined }}",
       "{\"x\": {\"content\": \"c\"}}",
       "TrueTrueTrue"},
      {"{{ tools[0].function.parameters.properties.a['items'] }}|{{ tools[0].function.parameters.properties.a.type }}",
       "{\"tools\": [{\"function\": {\"parameters\": {\"properties\": {\"a\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}}}]}",
       "{'type': 'string'}|array"},
      {"{% set x = {'k': [1, {'j': 2}]} %}{{ x.k[1].j }}{{ {'a': {'b': {'c': 1}}}['a']['b'] }}", "{}", "2{'c': 1}"},
      {"{{ x.keys()[0] }}|", "{\"x\": {\"a\": 1}}", "|"},
      {"{{ 'abc'[1:'x'] }}|", "{}", "|"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, AccessErrors) {
  static const ErrorCase kCases[] = {
      {"{{ x.y.z }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x.y.z }}", "{\"x\": {}}",
       Code::kInvalidArgument,
       "chat template line 1: 'dict object' has no attribute 'y'"},
      {"{{ x[0].a }}", "{\"x\": []}", Code::kInvalidArgument, "chat template line 1: list object has no element 0"},
      {"{{ none.y.z }}", "{}", Code::kInvalidArgument, "chat template line 1: 'None' has no attribute 'y'"},
      {"{{ [1][::0] }}", "{}", Code::kInvalidArgument, "chat template line 1: slice step cannot be zero"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Statements) {
  static const RenderCase kCases[] = {
      {"{% for i in range(3) %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.index0 }},{% endfor %}",
       "{}",
       "1TrueFalse3320,2FalseFalse3211,3FalseTrue3102,"},
      {"{% for k, v in x.items() %}{{ k }}={{ v }};{% endfor %}{% for k in x %}{{ k }}{% endfor %}",
       "{\"x\": {\"b\": 1, \"a\": 2}}",
       "b=1;a=2;ba"},
      {"{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}",
       "{}",
       "21/2 42/2 "},
      {"{% for x in [] %}{{ x }}{% else %}none{% endfor %}{% for x in [1] if false %}{% else %}filtered{% endfor %}",
       "{}",
       "nonefiltered"},
      {"{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", "{}", "13"},
      {"{% for x in [1,2,3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{}", "1"},
      {"{% for x in 'abc' %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }}|{% endfor %}", "{}", "-a-b|a-b-c|b-c-|"},
      {"{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}{% for x in [1,1,2,2,1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
       "{}",
       "aba121"},
      {"{% for i in [1,2] %}{% for j in [3,4] %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }}|{% endfor %}",
       "{}",
       "113 214 1|123 224 2|"},
      {"{% for a, b in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{% endfor %}{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}",
       "{}",
       "1234123"},
      {"{% for x in t recursive %}{{ x.n }}{% if x.c %}({{ loop(x.c) }}){% endif %}{% endfor %}",
       "{\"t\": [{\"n\": 1, \"c\": [{\"n\": 2, \"c\": [{\"n\": 3}]}]}, {\"n\": 4}]}",
       "1(2(3))4"},
      {"{% for x in t recursive %}{{ loop.depth }}{{ loop.depth0 }}{% if x.c %}{{ loop(x.c) }}{% endif %}{% endfor %}",
       "{\"t\": [{\"c\": [{\"c\": [{}]}]}]}",
       "102132"},
      {"{% set ns = namespace(x=0) %}{% for i in range(4) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
       "{}",
       "6"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ d }}{{ c }}", "{}", "12yx"},
      {"{% set x %}hello {{ 1 }}{% endset %}[{{ x }}]{% set y | upper | replace('L', '_') %}hello{% endset %}[{{ y }}]",
       "{}",
       "[hello 1][HE__O]"},
      {"{% filter upper %}abc{{ 'd' }}{% endfilter %}{% filter replace('a', 'b')|upper %}aaa{% endfilter %}",
       "{}",
       "ABCDBBB"},
      {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", "{}", "3"},
      {"{% generation %}gen {{ 1 }}{% endgeneration %}", "{}", "gen 1"},
      {"{% print 1, 'a' %}{% print x %}", "{\"x\": 2}", "1a2"},
      {"{% set x = 1 %}{% block b %}{{ x }}{% endblock %}{% for i in [1] %}{% block c scoped %}{{ i }}{% endblock c %}{% endfor %}",
       "{}",
       "11"},
      {"{{ loop }}", "{}", ""},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, StatementsErrors) {
  static const ErrorCase kCases[] = {
      {"{% for a, b in [(1, 2, 3)] %}{{ a }}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: too many values to unpack (expected 2)"},
      {"{% for a, b in [1] %}{{ a }}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: cannot unpack non-iterable int object"},
      {"{% for x in 5 %}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'int' object is not iterable"},
      {"{% for x in none %}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'NoneType' object is not iterable"},
      {"{% set x = 1 %}{% set x.y = 2 %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: cannot assign attribute on non-namespace object"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Scoping) {
  static const RenderCase kCases[] = {
      {"{% for i in [1,2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}[{{ x }}]", "{}", "[][]"},
      {"{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", "{}", "01020"},
      {"{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "{}", "2"},
      {"{% macro f() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ f() }}{% set x = 2 %}{{ f() }}", "{}", "12"},
      {"{% macro m() %}{% set y = 5 %}{{ y }}{% endmacro %}{{ m() }}{{ y }}", "{}", "5"},
      {"{% macro m() %}[{{ i }}]{% endmacro %}{% for i in [1,2] %}{{ m() }}{% endfor %}", "{}", "[][]"},
      {"{% for i in [1,2] %}{% macro m() %}[{{ i }}]{% endmacro %}{{ m() }}{% endfor %}", "{}", "[1][2]"},
      {"{% set ns = namespace(c=0) %}{% macro inc() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.c }}",
       "{}",
       "2"},
      {"{% for i in [1,2] %}{% if i == 1 %}{% set x = 'a' %}{% endif %}{{ x }}|{% endfor %}", "{}", "a||"},
      {"{% set messages = messages[1:] %}{{ messages|length }}{% for m in messages %}{% set messages = [] %}{{ m }}{% endfor %}",
       "{\"messages\": [1, 2, 3]}",
       "223"},
      {"{% set content = '' %}{% for m in messages %}{% set content = content + m %}{% endfor %}[{{ content }}]",
       "{\"messages\": [\"a\", \"b\"]}",
       "[]"},
      {"{% set range = 5 %}{{ range }}", "{}", "5"},
      {"{{ range }}", "{\"range\": \"ctx\"}", "ctx"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, Macros) {
  static const RenderCase kCases[] = {
      {"{% macro f(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }} {{ f(1, 3) }} {{ f(b=4, a=5) }} [{{ f() }}]",
       "{}",
       "1-2 1-3 5-4 [-2]"},
      {"{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}{{ m(1) }}",
       "{}",
       "1(2, 3){'k': 4}1(){}"},
      {"{% macro f() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, *[2, 3], **{'k': 4}) }}",
       "{}",
       "(1, 2, 3){'k': 4}"},
      {"{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}inside{% endcall %}", "{}", "[inside]"},
      {"{% macro m() %}[{{ caller(1, 2) }}]{% endmacro %}{% call(a, b) m() %}{{ a + b }}{% endcall %}", "{}", "[3]"},
      {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}{% endmacro %}{{ fact(5) }}",
       "{}",
       "120"},
      {"{% set x = 5 %}{% macro m(a=x) %}{{ a }}{% endmacro %}{{ m() }}{% macro n(a, b=a * 2) %}{{ b }}{% endmacro %}{{ n(3) }}",
       "{}",
       "56"},
      {"{% macro outer() %}{% macro inner() %}i{% endmacro %}{{ inner() }}o{% endmacro %}{{ outer() }}", "{}", "io"},
      {"{% macro m() %}x{% endmacro %}{{ m() is string }}{{ m()|length }}{{ m.name }}", "{}", "True1m"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, MacrosErrors) {
  static const ErrorCase kCases[] = {
      {"{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: macro 'f' takes not more than 1 argument(s)"},
      {"{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=2) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: macro 'f' takes no keyword argument 'b'"},
      {"{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, a=2) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: macro 'f' takes no keyword argument 'a'"},
      {"{% macro f() %}{{ caller() }}{% endmacro %}{{ f() }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: No caller defined"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Tests) {
  static const RenderCase kCases[] = {
      {"{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 1 is number }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ [] is sequence }}{{ 1 is iterable }}",
       "{\"x\": 1}",
       "TrueTrueTrueTrueTrueTrueTrueTrueFalse"},
      {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 'Ab' is upper }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is integer }}",
       "{}",
       "TrueTrueTrueFalseTrueTrueFalseTrueTrueFalse"},
      {"{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ true is number }}",
       "{}",
       "TrueFalseTrueFalseTrueTrue"},
      {"{{ 1 is in [1] }}{{ 'a' is in 'bc' }}{{ f is callable }}{{ range is callable }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ 'nope' is filter }}",
       "{\"f\": 1}",
       "TrueFalseFalseTrueTrueTrueFalse"},
      {"{{ x is not none }}{{ x is none }}{{ x is string }}{{ x is mapping }}{{ x is iterable }}{{ x is sequence }}{{ x is callable }}",
       "{}",
       "TrueFalseFalseFalseTrueTrueTrue"},
      {"{{ x|selectattr('tool_calls', 'defined')|list|length }}",
       "{\"x\": [{\"role\": \"a\"}, {\"tool_calls\": []}]}",
       "1"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, TestsErrors) {
  static const ErrorCase kCases[] = {
      {"{{ x is sameas x }}{{ x is sameas [1] }}{{ none is sameas none }}{{ 1 is eq 1 }}{{ 1 is equalto 1 }}{{ 1 is == 1 }}{{ 1 is ne 2 }}{{ 1 is != 1 }}", "{\"x\": [1]}",
       Code::kInvalidArgument,
       "chat template line 1: expected token 'name', got '=='"},
      {"{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 1 is le 1 }}{{ 1 is ge 1 }}{{ 1 is lessthan 2 }}{{ 2 is greaterthan 1 }}{{ 1 is < 2 }}{{ 1 is >= 2 }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: expected token 'name', got '<'"},
      {"{{ 1 is foo }}", "{}", Code::kInvalidArgument, "chat template line 1: No test named 'foo'."},
      {"{% if 1 is foo %}{% endif %}ok", "{}",
       Code::kInvalidArgument,
       "chat template line 1: No test named 'foo' found."},
      {"{% if true %}{{ 1 is foo }}{% endif %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: No test named 'foo' found."},
      {"{{ 'a' is odd }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: not all arguments converted during string formatting"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, StringFilters) {
  static const RenderCase kCases[] = {
      {"{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ '  　x  '|trim }}|", "{}", "a b|a|x|"},
      {"{{ 'Hello'|upper }}{{ 'Hello'|lower }}{{ 'hello world'|capitalize }}{{ 'hello wORLD-foo (bar'|title }}{{ \"they're bill's\"|title }}",
       "{}",
       "HELLOhelloHello worldHello World-Foo (BarThey're Bill's"},
      {"{{ 'ß'|upper }}{{ 'ÉCOLE'|lower }}{{ 'Ünïcödé'|upper }}{{ 'ΑΒΓ'|lower }}{{ 'абв'|upper }}{{ 'straße'|title }}",
       "{}",
       "SSécoleÜNÏCÖDÉαβγАБВStraße"},
      {"{{ x|default('d') }}{{ ''|default('e') }}{{ ''|default('e', true) }}{{ none|d('n') }}{{ false|d('f', boolean=true) }}{{ x|d }}|",
       "{}",
       "deNonef|"},
      {"{{ 'aaa'|replace('a', 'b') }}{{ 'aaa'|replace('a', 'b', 2) }}{{ 'abc'|replace('', '-') }}{{ 1|replace(1, 2) }}",
       "{}",
       "bbbbba-a-b-c-2"},
      {"{{ 'abc'|length }}{{ 'héllo'|length }}{{ [1,2]|count }}{{ {'a':1}|length }}{{ ''|length }}", "{}", "35210"},
      {"{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'a\nb'|indent('> ') }}|{{ '  x'|indent(2, true) }}|{{ ''|indent(first=true) }}|{{ 'a\n'|indent }}|",
       "{}",
       "a\n    b\n\n    c|  a\n  b|a\n  \n  b|a\n> b|    x|    |a\n|"},
      {"{{ 'one two  three'|wordcount }}{{ 'a-b c_d'|wordcount }}{{ 'abc'|center(9) }}|{{ 'abc'|center(8) }}|{{ 'ab'|center(7) }}|",
       "{}",
       "33   abc   |  abc   |   ab  |"},
      {"{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, true) }}|{{ 'foo bar baz qux'|truncate(11) }}|{{ 'foo bar baz qux'|truncate(11, false, '!', 0) }}|",
       "{}",
       "foo...|foo ba...|foo bar baz qux|foo bar!|"},
      {"{{ '<a>&\"\\''|e }}{{ '<b>'|escape }}{{ '<b>'|safe }}{{ '<p>a  <b>b</b><!-- c --></p> &amp; x'|striptags }}{{ 1|e }}",
       "{}",
       "&lt;a&gt;&amp;&#34;&#39;&lt;b&gt;<b>a b & x1"},
      {"{{ '%s-%d-%.2f'|format('a', 3, 2.5) }}{{ '%(a)s'|format(a=1) }}{{ '%5.1f|%-5d|%05d|%x|%X|%o|%e|%g|%r|%c|%%'|format(3.14159, 42, 42, 255, 255, 8, 12345.678, 0.00001, 'a', 65) }}",
       "{}",
       "a-3-2.501  3.1|42   |00042|ff|FF|10|1.234568e+04|1e-05|'a'|A|%"},
      {"{{ 'a%sb' % 'x' }}{{ '%d%%' % 5 }}{{ '%s %s' % (1, 2) }}{{ '%(a)s' % {'a': 3} }}{{ '%s' % [1, 2] }}",
       "{}",
       "axb5%1 23[1, 2]"},
      {"{{ 'abc' % [1, 2] }}{{ '%s' % [1, 2] }}{{ [1, 2]|truncate(5) }}{{ 'x'|truncate(5) }}",
       "{}",
       "abc[1, 2][1, 2]x"},
      {"{{ 42|string|length }}{{ [1]|string }}{{ 'abc'|reverse }}{{ 'abc'|list }}{{ 'abc'|first }}{{ 'abc'|last }}",
       "{}",
       "2[1]cba['a', 'b', 'c']ac"},
      {"{{ 'a b'|urlencode }}{{ {'a': 'b c', 'd': 1}|urlencode }}{{ 'x/y?z'|urlencode }}",
       "{}",
       "a%20ba=b+c&d=1x/y%3Fz"},
      {"{{ 1000|filesizeformat }}{{ 1|filesizeformat }}{{ 1500000|filesizeformat }}{{ 1048576|filesizeformat(true) }}",
       "{}",
       "1.0 kB1 Byte1.5 MB1.0 MiB"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, StringFiltersErrors) {
  static const ErrorCase kCases[] = {
      {"{{ true|truncate(5) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: object of type 'bool' has no len()"},
      {"{{ '%s %s'|format(1) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: not enough arguments for format string"},
      {"{{ '%s'|format(1, 2) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: not all arguments converted during string formatting"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, NumberFilters) {
  static const RenderCase kCases[] = {
      {"{{ -3|abs }}{{ (-3.5)|abs }}{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 2.1|round(method='ceil') }}{{ 2.9|round(0, 'floor') }}{{ 5|round }}{{ 1234.5678|round(-2) }}{{ 0.5|round }}{{ 1.5|round }}",
       "{}",
       "33.52.04.02.673.02.051200.00.02.0"},
      {"{{ '42'|int + 1 }}{{ '4.7'|int }}{{ 'x'|int(5) }}{{ '3.5'|float }}{{ 'x'|float }}{{ 4.0|int }}{{ '0x1A'|int(base=16) }}{{ '0b101'|int(0, 0) }}{{ ' 12 '|int }}{{ '1_000'|int }}{{ '1e3'|int }}{{ true|int }}{{ none|int }}",
       "{}",
       "43453.50.04265121000100010"},
      {"{{ 'inf'|float }}{{ '-1.5e2'|float }}{{ ' 2 '|float }}{{ 3.7|int }}{{ -3.7|int }}{{ 1|float }}{{ none|float }}{{ [1]|int }}",
       "{}",
       "inf-150.02.03-31.00.00"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, NumberFiltersErrors) {
  static const ErrorCase kCases[] = {
      {"{{ x|int }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x|float }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ 'a'|abs }}", "{}", Code::kInvalidArgument, "chat template line 1: bad operand type for abs(): 'str'"},
      {"{{ 'a'|round }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: type str doesn't define __round__ method"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, SequenceFilters) {
  static const RenderCase kCases[] = {
      {"{{ [3,1,2]|first }}{{ [3,1,2]|last }}{{ []|first }}|{{ {'a': 1}|first }}", "{}", "32|a"},
      {"{{ [1,2,3]|join(', ') }}{{ x|join('-', attribute='n') }}{{ [1, none, 'a']|join }}{{ []|join(',') }}",
       "{\"x\": [{\"n\": \"a\"}, {\"n\": \"b\"}]}",
       "1, 2, 3a-b1Nonea"},
      {"{{ {'a': 1}|items|list }}{{ {'a': 1}.items()|list }}{{ (1, 2)|list }}", "{}", "[('a', 1)][('a', 1)][1, 2]"},
      {"{{ [1,2,3]|reverse|list }}{{ (1,2)|reverse|list }}{{ {'a': 1, 'b': 2}|reverse|list }}{{ [1,2]|select|reverse }}",
       "{}",
       "[3, 2, 1][2, 1]['b', 'a'][2, 1]"},
      {"{{ [3,1,2]|sort }}{{ [3,1,2]|sort(reverse=true) }}{{ ['b','A','c']|sort }}{{ ['b','A','c']|sort(case_sensitive=true) }}{{ [3, 1, 2]|sort|join(',') }}{{ 'cba'|sort|join }}",
       "{}",
       "[1, 2, 3][3, 2, 1]['A', 'b', 'c']['A', 'b', 'c']1,2,3abc"},
      {"{{ x|sort(attribute='n')|map(attribute='n')|list }}{{ x|sort(attribute='n', reverse=true)|map(attribute='n')|join }}",
       "{\"x\": [{\"n\": 3}, {\"n\": 1}, {\"n\": 2}]}",
       "[1, 2, 3]321"},
      {"{{ x|sort(attribute='a,b') }}{{ y|sort(attribute='a.0') }}",
       "{\"x\": [{\"a\": 2, \"b\": 1}, {\"a\": 1, \"b\": 2}, {\"a\": 1, \"b\": 1}], \"y\": [{\"a\": [2]}, {\"a\": [1]}]}",
       "[{'a': 1, 'b': 1}, {'a': 1, 'b': 2}, {'a': 2, 'b': 1}][{'a': [1]}, {'a': [2]}]"},
      {"{{ [[1], [0]]|sort }}{{ [(2, 'a'), (1, 'b')]|sort }}{{ [(1, 'b'), (1, 'a')]|sort(reverse=true) }}",
       "{}",
       "[[0], [1]][(1, 'b'), (2, 'a')][(1, 'b'), (1, 'a')]"},
      {"{{ [1,2,1,3]|unique|list }}{{ ['a','A','b']|unique|list }}{{ ['b', 'A', 'a', 'B']|unique(case_sensitive=true)|list }}{{ [1, 1.0, true]|unique|list }}",
       "{}",
       "[1, 2, 3]['a', 'b']['b', 'A', 'a', 'B'][1]"},
      {"{{ [1,5,3]|min }}{{ [1,5,3]|max }}{{ ['b', 'A']|min }}{{ ['b', 'A']|max(case_sensitive=true) }}{{ []|max }}|{{ x|max(attribute='a') }}{{ x|min(attribute='a') }}",
       "{\"x\": [{\"a\": 1}, {\"a\": 3}, {\"a\": 2}]}",
       "15Ab|{'a': 3}{'a': 1}"},
      {"{{ [1,2,3]|sum }}{{ x|sum(attribute='n') }}{{ [1.5, 2]|sum }}{{ [[1], [2]]|sum(start=[]) }}{{ []|sum }}",
       "{\"x\": [{\"n\": 3}, {\"n\": 1}]}",
       "643.5[1, 2]0"},
      {"{{ x|selectattr('role', 'equalto', 'user')|list|length }}{{ x|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}{{ x|selectattr('role', '==', 'system')|first }}",
       "{\"x\": [{\"role\": \"user\"}, {\"role\": \"system\"}, {\"role\": \"user\"}]}",
       "2['system']{'role': 'system'}"},
      {"{{ [1,2,3,4]|select('odd')|list }}{{ [1,2,3,4]|reject('odd')|list }}{{ [0,1,'',2]|select|list }}{{ x|selectattr('a')|list }}{{ [1,5,3]|select('gt', 2)|list }}{{ ['a', 'b']|select('in', 'abc')|list }}",
       "{\"x\": [{\"a\": 1}, {\"a\": 0}, {\"b\": 1}]}",
       "[1, 3][2, 4][1, 2][{'a': 1}][5, 3]['a', 'b']"},
      {"{{ ['a','b']|map('upper')|join }}{{ [1.5, 2.5]|map('round')|list }}{{ [1, 2]|map('string')|list }}{{ x|map(attribute='a', default='z')|list }}{{ ['a,b']|map('replace', ',', ';')|list }}",
       "{\"x\": [{\"a\": 1}, {}]}",
       "AB[2.0, 2.0]['1', '2'][1, 'z']['a;b']"},
      {"{{ {'b': 1, 'a': 2}|dictsort }}{{ {'b': 1, 'a': 2}|dictsort(by='value') }}{{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}{{ {'b': 1, 'B': 2, 'a': 3}|dictsort }}{{ {'b': 1, 'B': 2, 'a': 3}|dictsort(true) }}",
       "{}",
       "[('a', 2), ('b', 1)][('b', 1), ('a', 2)][('b', 1), ('a', 2)][('a', 3), ('b', 1), ('B', 2)][('B', 2), ('a', 3), ('b', 1)]"},
      {"{{ [1,2,3,4,5]|batch(2)|list }}{{ [1,2,3,4,5]|batch(2, 'x')|list }}{{ [1,2,3,4,5]|slice(2)|list }}{{ [1,2,3,4]|slice(3, 0)|list }}",
       "{}",
       "[[1, 2], [3, 4], [5]][[1, 2], [3, 4], [5, 'x']][[1, 2, 3], [4, 5]][[1, 2], [3, 0], [4, 0]]"},
      {"{{ x|groupby('g')|list }}{% for g in x|groupby('g') %}{{ g.grouper }}:{{ g.list|map(attribute='v')|join(',') }};{% endfor %}{% for k, items in x|groupby('g') %}{{ k }}{{ items|length }}{% endfor %}",
       "{\"x\": [{\"g\": \"b\", \"v\": 1}, {\"g\": \"a\", \"v\": 2}, {\"g\": \"B\", \"v\": 3}]}",
       "[('a', [{'g': 'a', 'v': 2}]), ('b', [{'g': 'b', 'v': 1}, {'g': 'B', 'v': 3}])]a:2;b:1,3;a1b2"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, SequenceFiltersErrors) {
  static const ErrorCase kCases[] = {
      {"{{ [1, 'a']|sort }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: '<' not supported between instances of 'str' and 'int'"},
      {"{{ [[1]]|unique|list }}", "{}", Code::kInvalidArgument, "chat template line 1: unhashable type: 'list'"},
      {"{{ 1|first }}", "{}", Code::kInvalidArgument, "chat template line 1: 'int' object is not iterable"},
      {"{{ 1|join }}", "{}", Code::kInvalidArgument, "chat template line 1: 'int' object is not iterable"},
      {"{{ [1, 2]|dictsort }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'list' object has no attribute 'items'"},
      {"{{ [1, 2]|items|list }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Can only get item pairs from a mapping."},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Generators) {
  static const RenderCase kCases[] = {
      {"{% if [0]|select %}T{% else %}F{% endif %}{% if []|select %}T{% else %}F{% endif %}{% if []|map('upper') %}T{% endif %}",
       "{}",
       "TTT"},
      {"{% set g = [1,2]|map('string') %}{{ g|list }}{{ g|list }}", "{}", "['1', '2'][]"},
      {"{% set g = [1,2]|select %}{% for x in g %}{{ x }}{% endfor %}{% for x in g %}{{ x }}{% endfor %}|{{ 1 in g }}",
       "{}",
       "12|False"},
      {"{{ [1,2]|select|first }}{{ x|items|list }}{{ [1,2]|reverse|first }}", "{\"x\": {\"a\": 1}}", "1[('a', 1)]2"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, GeneratorsErrors) {
  static const ErrorCase kCases[] = {
      {"{{ [1,2]|map('string')|length }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: object of type 'generator' has no len()"},
      {"{{ [1,2]|select|last }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'generator' object is not reversible"},
      {"{{ [1,2]|select|tojson }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Object of type generator is not JSON serializable"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, ToJson) {
  static const RenderCase kCases[] = {
      {"{{ x|tojson }}",
       "{\"x\": {\"a\": [1, 2.5, null, true, \"é\\n\\\"\\\\/\\u0001 \"], \"b\": {}}}",
       "{\"a\": [1, 2.5, null, true, \"é\\n\\\"\\\\/\\u0001 \"], \"b\": {}}"},
      {"{{ x|tojson(indent=2) }}",
       "{\"x\": {\"a\": [1, {\"c\": []}], \"b\": {}}}",
       "{\n  \"a\": [\n    1,\n    {\n      \"c\": []\n    }\n  ],\n  \"b\": {}\n}"},
      {"{{ x|tojson(indent=2, sort_keys=true) }}{{ x|tojson(separators=(',', ':')) }}{{ x|tojson(indent=1, separators=[', ', ' = ']) }}",
       "{\"x\": {\"b\": [1, 2], \"a\": \"x\"}}",
       "{\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    2\n  ]\n}{\"b\":[1,2],\"a\":\"x\"}{\n \"b\" = [\n  1, \n  2\n ], \n \"a\" = \"x\"\n}"},
      {"{{ x|tojson(indent=0) }}|{{ x|tojson(indent='\t') }}|{{ []|tojson(indent=2) }}{{ {}|tojson(indent=2) }}",
       "{\"x\": {\"a\": [1]}}",
       "{\n\"a\": [\n1\n]\n}|{\n\t\"a\": [\n\t\t1\n\t]\n}|[]{}"},
      {"{{ x|tojson(ensure_ascii=true) }}{{ x|tojson(ensure_ascii=false) }}",
       "{\"x\": \"é😀\177\"}",
       "\"\\u00e9\\ud83d\\ude00\\u007f\"\"é😀\177\""},
      {"{{ {1: 'a', 'b': 2, none: 3, true: 4, 2.5: 5}|tojson }}{{ (1, 2)|tojson }}{{ 1.0|tojson }}{{ 1e20|tojson }}{{ 'x'|tojson }}",
       "{}",
       "{\"1\": 4, \"b\": 2, \"null\": 3, \"2.5\": 5}[1, 2]1.01e+20\"x\""},
      {"{{ x|tojson }}",
       "{\"x\": [1.0, 1e+100, 1.5e-10, 100.0, 0.0001, 123.456, 1e+16, 9007199254740993, -0.0]}",
       "[1.0, 1e+100, 1.5e-10, 100.0, 0.0001, 123.456, 1e+16, 9007199254740993, -0.0]"},
      {"{% for t in tools %}{{ t | tojson }}\n{% endfor %}",
       "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"enum\": [\"x\", \"y\"]}}, \"required\": [\"a\"]}}}]}",
       "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"enum\": [\"x\", \"y\"]}}, \"required\": [\"a\"]}}}\n"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, ToJsonErrors) {
  static const ErrorCase kCases[] = {
      {"{{ x|tojson }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Object of type Undefined is not JSON serializable"},
      {"{{ {'a': 1}.items()|tojson }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Object of type dict_items is not JSON serializable"},
      {"{{ {(1, 2): 3}|tojson }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: keys must be str, int, float, bool or None, not tuple"},
      {"{{ {'b': 1, 1: 2}|tojson(sort_keys=true) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: '<' not supported between instances of 'int' and 'str'"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, StrMethods) {
  static const RenderCase kCases[] = {
      {"{{ '  ab  '.strip() }}|{{ 'xxabxx'.strip('x') }}|{{ '  ab'.lstrip() }}|{{ 'ab  '.rstrip() }}|{{ 'xab'.lstrip('x') }}|{{ 'abx'.rstrip('x') }}|{{ 'ab'.strip(none) }}|",
       "{}",
       "ab|ab|ab|ab|ab|ab|ab|"},
      {"{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.startswith('b', 1) }}{{ 'abc'.endswith('b', 0, 2) }}{{ 'é'.startswith('é') }}",
       "{}",
       "TrueTrueTrueTrueTrue"},
      {"{{ 'a b  c'.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ '  a b  c  '.split(None, 1) }}{{ '  a b  c  '.rsplit(None, 1) }}{{ ''.split() }}{{ ''.split(',') }}",
       "{}",
       "['a', 'b', 'c']['a', 'b', '', 'c']['a', 'b,c']['a,b', 'c']['a', 'b  c  ']['  a b', 'c'][]['']"},
      {"{{ 'a\nb\r\nc\rd'.splitlines() }}{{ 'a\nb\n'.splitlines(true) }}{{ 'a b'.splitlines() }}{{ 'a　b'.split() }}",
       "{}",
       "['a', 'b', 'c', 'd']['a\\n', 'b\\n']['a', 'b']['a', 'b']"},
      {"{{ 'hello world'.title() }}{{ \"they're 1st\".title() }}{{ 'hELLO'.capitalize() }}{{ 'ab'.upper() }}{{ 'AB'.lower() }}{{ 'aB'.swapcase() }}{{ 'ß'.upper() }}",
       "{}",
       "Hello WorldThey'Re 1StHelloABabAbSS"},
      {"{{ 'aaa'.replace('a', 'b', 1) }}{{ 'abcabc'.find('c') }}{{ 'abcabc'.rfind('c') }}{{ 'abcabc'.find('x') }}{{ 'abcabc'.index('b') }}{{ 'abcabc'.rindex('b') }}{{ 'abcabc'.count('bc') }}{{ 'héllo'.find('l') }}{{ 'abc'.find('c', 1, 2) }}{{ 'aaa'.count('') }}",
       "{}",
       "baa25-11422-14"},
      {"{{ '-'.join(['a', 'b']) }}{{ ''.join('abc') }}{{ ', '.join(x) }}", "{\"x\": [\"p\", \"q\"]}", "a-babcp, q"},
      {"{{ '{} {}'.format(1, 'x') }}{{ '{0}{0}'.format('y') }}{{ '{name}!'.format(name='n') }}{{ '{:>5}|{:<4}|{:^5}|{:.2f}'.format('a', 'b', 'c', 3.14159) }}{{ '{{}}{}'.format(1) }}",
       "{}",
       "1 xyyn!    a|b   |  c  |3.14{}1"},
      {"{{ '{:,}'.format(1234567) }}{{ '{:08.3f}'.format(3.14159) }}{{ '{!r}'.format('a') }}{{ '{0[1]}'.format([5, 6]) }}{{ '{a.b}'.format(a={'b': 1}) }}{{ '{:*^7}'.format('x') }}",
       "{}",
       "1,234,5670003.142'a'61***x***"},
      {"{{ '{:x}'.format(255) }}{{ '{:#x}'.format(255) }}{{ '{:+d}'.format(5) }}{{ '{:e}'.format(1234.5) }}{{ '{:%}'.format(0.25) }}{{ '{:.3}'.format(3.14159) }}{{ '{}'.format(1.0) }}{{ '{:10}'.format(1.5) }}{{ '{:05}'.format(-3) }}{{ '{:b}'.format(5) }}",
       "{}",
       "ff0xff+51.234500e+0325.000000%3.141.0       1.5-0003101"},
      {"{{ '123'.isdigit() }}{{ 'abc'.isalpha() }}{{ '  '.isspace() }}{{ 'a1'.isalnum() }}{{ 'AB'.isupper() }}{{ 'ab'.islower() }}{{ ''.isdigit() }}{{ 'Ab Cd'.istitle() }}{{ 'é'.isalpha() }}{{ '1'.isdecimal() }}",
       "{}",
       "TrueTrueTrueTrueTrueTrueFalseTrueTrueTrue"},
      {"{{ 'ab'.center(6, '*') }}{{ 'ab'.ljust(4, '.') }}{{ 'ab'.rjust(4) }}{{ '42'.zfill(5) }}{{ '-42'.zfill(5) }}{{ 'a,b,c'.partition(',') }}{{ 'a,b,c'.rpartition(',') }}{{ 'abc'.partition('x') }}",
       "{}",
       "**ab**ab..  ab00042-0042('a', ',', 'b,c')('a,b', ',', 'c')('abc', '', '')"},
      {"{{ 'prefix-x'.removeprefix('prefix-') }}{{ 'x.txt'.removesuffix('.txt') }}{{ 'a\tb'.expandtabs(4) }}{{ 'abc'.casefold() }}{{ 'a_1'.isidentifier() }}{{ '1a'.isidentifier() }}",
       "{}",
       "xxa   babcTrueFalse"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, StrMethodsErrors) {
  static const ErrorCase kCases[] = {
      {"{{ '{}{0}'.format(1) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: cannot switch from manual field specification to automatic field numbering"},
      {"{{ ''.join([1]) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: sequence item 0: expected str instance, int found"},
      {"{{ 'a'.split('') }}", "{}", Code::kInvalidArgument, "chat template line 1: empty separator"},
      {"{{ 'abc'.index('x') }}", "{}", Code::kInvalidArgument, "chat template line 1: substring not found"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, CollectionMethods) {
  static const RenderCase kCases[] = {
      {"{{ x.get('a') }}{{ x.get('b') }}{{ x.get('b', 5) }}{{ x.keys()|list }}{{ x.values()|list }}{{ x.items()|list }}{{ x.copy() }}",
       "{\"x\": {\"a\": 1}}",
       "1None5['a'][1][('a', 1)]{'a': 1}"},
      {"{{ x.index(2) }}{{ x.count(1) }}{{ x.pop() }}{{ x }}{{ x.pop(0) }}{{ x }}{{ x.copy() }}{{ x.clear() }}{{ x }}",
       "{\"x\": [1, 2, 1]}",
       "121[1, 2]1[2][2]None[]"},
      {"{{ (1, 2, 1).count(1) }}{{ (1, 2).index(2) }}", "{}", "21"},
      {"{% set l = [1, 2] %}{% set _ = l.pop() %}{{ l }}", "{}", "[1]"},
      {"{{ x.append }}|{{ x.update }}|", "{\"x\": []}", "||"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, CollectionMethodsErrors) {
  static const ErrorCase kCases[] = {
      {"{{ x.append(1) }}", "{\"x\": []}",
       Code::kInvalidArgument,
       "chat template line 1: access to attribute 'append' of 'list' object is unsafe."},
      {"{{ x.update({}) }}", "{\"x\": {}}",
       Code::kInvalidArgument,
       "chat template line 1: access to attribute 'update' of 'dict' object is unsafe."},
      {"{{ x.sort() }}", "{\"x\": []}",
       Code::kInvalidArgument,
       "chat template line 1: access to attribute 'sort' of 'list' object is unsafe."},
      {"{{ [].pop() }}", "{}", Code::kInvalidArgument, "chat template line 1: pop from empty list"},
      {"{{ [1].index(5) }}", "{}", Code::kInvalidArgument, "chat template line 1: 5 is not in list"},
      {"{{ {}.get([1]) }}", "{}", Code::kInvalidArgument, "chat template line 1: unhashable type: 'list'"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Globals) {
  static const RenderCase kCases[] = {
      {"{{ range(5)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(0)|list }}{{ range(3)|length }}",
       "{}",
       "[0, 1, 2, 3, 4][1, 4, 7][5, 3, 1][]3"},
      {"{% set d = dict(a=1, b=2) %}{{ d }}{{ dict(x=1) }}{{ dict({'a': 1}, b=2) }}{{ dict([('k', 'v')]) }}{% set n = namespace(a=1, b='x') %}{{ n.a }}{{ n.b }}{{ namespace({'z': 1}).z }}",
       "{}",
       "{'a': 1, 'b': 2}{'x': 1}{'a': 1, 'b': 2}{'k': 'v'}1x1"},
      {"{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{{ c.reset() }}{{ c.next() }}",
       "{}",
       "ababNonea"},
      {"{% set j = joiner(', ') %}{% for x in [1,2,3] %}{{ j() }}{{ x }}{% endfor %}{% set k = joiner() %}{{ k() }}{{ k() }}",
       "{}",
       "1, 2, 3, "},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, GlobalsErrors) {
  static const ErrorCase kCases[] = {
      {"{{ range(100001)|length }}", "{}",
       Code::kResourceExhausted,
       "chat template line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
      {"{{ range(1.5) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'float' object cannot be interpreted as an integer"},
      {"{{ range(1, 2, 0) }}", "{}", Code::kInvalidArgument, "chat template line 1: range() arg 3 must not be zero"},
      {"{{ cycler() }}", "{}", Code::kInvalidArgument, "chat template line 1: at least one item has to be provided"},
      {"{{ raise_exception('boom') }}", "{}", Code::kInvalidArgument, "boom", kRaised},
      {"{{ raise_exception('line 1\\nline 2 ' ~ 42) }}", "{}", Code::kInvalidArgument, "line 1\nline 2 42", kRaised},
      {"{% if messages[0].role != 'user' %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}", "{\"messages\": [{\"role\": \"assistant\"}]}",
       Code::kInvalidArgument,
       "Conversation roles must alternate user/assistant/user/assistant/...", kRaised},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, Undefined) {
  static const RenderCase kCases[] = {
      {"{{ x|length }}{{ x|list }}{{ x|join }}{{ x|upper }}|{{ x|default('d') }}{{ x == x }}{{ x is none }}{{ 'a' in x }}{{ x ~ 'a' }}",
       "{}",
       "0[]|dTrueFalseFalsea"},
      {"{% for i in x %}a{% else %}b{% endfor %}{% if x %}t{% else %}f{% endif %}{% if not x %}n{% endif %}",
       "{}",
       "bfn"},
      {"{{ x|first }}{{ x|last }}{{ x|min }}{{ x|sum }}{{ x|sort }}{{ x|unique|list }}{{ x|reverse|list }}{{ x|batch(2)|list }}{{ x|center(3) }}|{{ x|truncate(5) }}|{{ x|wordcount }}{{ x|title }}{{ x|trim }}{{ x|replace('a','b') }}{{ x|items|list }}{{ x|map('upper')|list }}{{ x|select|list }}{{ x|string }}{{ x|safe }}{{ x|e }}{{ x|capitalize }}{{ x|format }}",
       "{}",
       "0[][][][]   ||0[][][]"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, UndefinedErrors) {
  static const ErrorCase kCases[] = {
      {"{{ x + 1 }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ 1 + x }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x() }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ -x }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x|tojson }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Object of type Undefined is not JSON serializable"},
      {"{{ x|indent }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x|dictsort }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x|attr('a') }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ x[0] }}", "{}", Code::kInvalidArgument, "chat template line 1: 'x' is undefined"},
      {"{{ (1 if false).a }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: the inline if-expression on line 1 evaluated to false and no else section was defined."},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, SyntaxErrors) {
  static const RenderCase kCases[] = {
      {"{% if false %}{{ x|nosuchfilter }}{% endif %}ok", "{}", "ok"},
      {"{{ x|nosuchfilter if false }}ok", "{}", "ok"},
  };
  for (const RenderCase& c : kCases) ExpectRenders(c);
}

TEST(JinjaConformanceTest, SyntaxErrorsErrors) {
  static const ErrorCase kCases[] = {
      {"{% for %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Expected an expression, got 'end of statement block'"},
      {"{{ 1 +  }}", "{}", Code::kInvalidArgument, "chat template line 1: unexpected 'end of print statement'"},
      {"{% if x %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."},
      {"{% endif %}", "{}", Code::kInvalidArgument, "chat template line 1: Encountered unknown tag 'endif'."},
      {"{% foo %}", "{}", Code::kInvalidArgument, "chat template line 1: Encountered unknown tag 'foo'."},
      {"{{ x|nosuchfilter }}", "{}", Code::kInvalidArgument, "chat template line 1: No filter named 'nosuchfilter'."},
      {"{% if false %}{% for i in x %}{{ x|foo }}{% endfor %}{% endif %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: No filter named 'foo'."},
      {"{% break %}", "{}", Code::kInvalidArgument, "chat template line 1: 'break' outside loop"},
      {"{% for i in [1] %}{% macro f() %}{% continue %}{% endmacro %}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'continue' not properly in loop"},
      {"{% for i in [] %}{% else %}{% break %}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: 'break' outside loop"},
      {"line1\nline2\n{% for x in %}", "{}",
       Code::kInvalidArgument,
       "chat template line 3: Expected an expression, got 'end of statement block'"},
      {"a\n{{ 'unterminated }}", "{}", Code::kInvalidArgument, "chat template line 2: unexpected char \"'\" at 5"},
      {"a\n{{ foo(}}", "{}", Code::kInvalidArgument, "chat template line 2: unexpected '}', expected ')'"},
      {"a\n{{ ) }}", "{}", Code::kInvalidArgument, "chat template line 2: unexpected ')'"},
      {"a\n{# unterminated", "{}", Code::kInvalidArgument, "chat template line 2: Missing end of comment tag"},
      {"a\n{% raw %} unterminated", "{}", Code::kInvalidArgument, "chat template line 2: Missing end of raw directive"},
      {"{% macro f(a=1, b) %}{% endmacro %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: non-default argument follows default argument"},
      {"{% set 1 = 2 %}", "{}", Code::kInvalidArgument, "chat template line 1: can't assign to 'const'"},
      {"{{ x is is }}", "{}", Code::kInvalidArgument, "chat template line 1: No test named 'is'."},
      {"{% block a %}{% endblock %}{% block a %}{% endblock %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: block 'a' defined twice"},
      {"{% block b required %}x{% endblock %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Required blocks can only contain comments or whitespace"},
      {"{{ a b }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: expected token 'end of print statement', got 'b'"},
      {"{{ f(a=1, 2) }}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: invalid syntax for function call expression"},
      {"{{ 1 }", "{}", Code::kInvalidArgument, "chat template line 1: unexpected '}'"},
      {"{% if true %}{% endfor %}", "{}",
       Code::kInvalidArgument,
       "chat template line 1: Encountered unknown tag 'endfor'. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."},
      {"{{ 'a' @ 'b' }}", "{}", Code::kInvalidArgument, "chat template line 1: unexpected char '@' at 7"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

TEST(JinjaConformanceTest, RuntimeErrorLinesErrors) {
  static const ErrorCase kCases[] = {
      {"line1\n{{ x.y.z }}\nline3", "{}", Code::kInvalidArgument, "chat template line 2: 'x' is undefined"},
      {"line1\n{% if true %}\n{{ 1 + none }}\n{% endif %}", "{}",
       Code::kInvalidArgument,
       "chat template line 3: unsupported operand type(s) for +: 'int' and 'NoneType'"},
      {"{% for m in messages %}\n{% if m.role == 'user' %}\n{{ m.content + 1 }}\n{% endif %}\n{% endfor %}", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}",
       Code::kInvalidArgument,
       "chat template line 3: can only concatenate str (not \"int\") to str"},
      {"{% macro f() %}\n\n{{ 1 // 0 }}\n{% endmacro %}\n{{ f() }}", "{}",
       Code::kInvalidArgument,
       "chat template line 3: integer division or modulo by zero"},
  };
  for (const ErrorCase& c : kCases) ExpectFails(c);
}

// ---- API, options and limits ----

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

// Renders `tmpl` and expects RESOURCE_EXHAUSTED mentioning `what`, fast.
void ExpectExhausted(const std::string& tmpl, const std::string& what, TemplateOptions options = {}) {
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
