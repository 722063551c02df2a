// JinjaConformanceTest, the built-ins: string, number and sequence filters,
// generators, tojson, str / list / dict methods and the globals (range, dict,
// namespace, cycler, joiner, raise_exception), each rendered as jinja2
// renders it (the oracle is described in jinja_test_util.h). The language
// itself: jinja_conformance_language_test.cc.

#include "gtest/gtest.h"
#include "tests/common/jinja_test_util.h"

namespace folio::jinja {
namespace {

using testing_util::Code;
using testing_util::ErrorCase;
using testing_util::ExpectFails;
using testing_util::ExpectRenders;
using testing_util::kRaised;
using testing_util::RenderCase;

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

}  // namespace
}  // namespace folio::jinja
