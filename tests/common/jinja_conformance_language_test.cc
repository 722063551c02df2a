// JinjaConformanceTest, the language: whitespace control, literals, Python
// str(), operators, attribute and item access, statements, scoping, macros,
// tests, undefined values, syntax errors and the line numbers of runtime
// errors, each rendered as jinja2 renders it (the oracle is described in
// jinja_test_util.h). Filters, methods and globals:
// jinja_conformance_builtins_test.cc.

#include "gtest/gtest.h"
#include "tests/common/jinja_test_util.h"

namespace folio::jinja {
namespace {

using testing_util::Code;
using testing_util::ErrorCase;
using testing_util::ExpectFails;
using testing_util::ExpectRenders;
using testing_util::RenderCase;

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

}  // namespace
}  // namespace folio::jinja
