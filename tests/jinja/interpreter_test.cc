// The interpreter on small templates: expected outputs are what jinja2
// renders for them in Hugging Face's environment (tests/python checks the
// same against jinja2 itself), plus scoping, errors and the sandbox bounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "jinja/error.h"
#include "jinja/template.h"

namespace folio::jinja {
namespace {

std::string render(const std::string& source, const std::string& variables = "{}",
                   const RenderOptions& options = {}) {
  return JinjaTemplate(source).render(nlohmann::ordered_json::parse(variables), options);
}

// The error rendering `source` raises.
JinjaError render_error(const std::string& source, const std::string& variables = "{}",
                        const RenderOptions& options = {}) {
  try {
    render(source, variables, options);
  } catch (const JinjaError& e) {
    return e;
  }
  ADD_FAILURE() << "no error rendering " << source;
  return JinjaError(JinjaError::Kind::kRuntime, "none");
}

struct Case {
  const char* name;
  const char* source;
  const char* variables;
  const char* expected;
};

const Case kCases[] = {
    {"loop", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}:{{ x }} {% endfor %}",
     R"json({"xs": ["a", "b"]})json",
     "102TrueFalse2:a 211FalseTrue2:b "},
    {"loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}",
     R"json({})json",
     "empty"},
    {"loop_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }},{% endfor %}",
     R"json({})json",
     "15,35,55,75,95,"},
    {"loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     R"json({"d": {"b": 1, "a": [2]}})json",
     "b=1;a=[2];"},
    {"break_continue", "{% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     R"json({})json",
     "023"},
    {"scope", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}",
     R"json({})json",
     "23|1"},
    {"namespace", "{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
     R"json({})json",
     "6"},
    {"macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', punct='?') }}",
     R"json({})json",
     "Hi Ann! Hi Bo?"},
    {"macro_recursion", "{% macro count(n) %}{{ n }}{% if n > 0 %}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}",
     R"json({})json",
     "3210"},
    {"undefined", "[{{ missing }}][{{ missing is defined }}][{{ missing|default('d') }}][{{ d.nope }}][{{ none.nope }}]",
     R"json({"d": {}})json",
     "[][False][d][][]"},
    {"whitespace", "<ul>\n  {% for x in [1, 2] %}\n  <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n",
     R"json({})json",
     "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>"},
    {"strip_markers", "a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e",
     R"json({})json",
     "abc d e"},
    {"tojson", "{{ x|tojson }}|{{ x|tojson(indent=2) }}",
     R"json({"x": {"a": [1, 2.0, "é\"\n"], "b": null, "c": true}})json",
     "{\"a\": [1, 2.0, \"é\\\"\\n\"], \"b\": null, \"c\": true}|{\n  \"a\": [\n    1,\n    2.0,\n    \"é\\\"\\n\"\n  ],\n  \"b\": null,\n  \"c\": true\n}"},
    {"strings", "{{ s|trim|upper }}|{{ s.split() }}|{{ s|length }}|{{ s[::-1] }}|{{ s|title }}|{{ s.strip().capitalize() }}",
     R"json({"s": " héllo wörld "})json",
     "HÉLLO WÖRLD|['héllo', 'wörld']|13| dlröw olléh | Héllo Wörld |Héllo wörld"},
    {"arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 4 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 2 ~ 'x' }} {{ -2 ** 2 }}",
     R"json({})json",
     "3 -4 -2 1024 0.25 0.30000000000000004 1e+16 2x 4"},
    {"compare", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ [1, 2] < [1, 3] }} {{ none == false }}",
     R"json({})json",
     "True True True True True False"},
    {"filters", "{{ l|sort|join(',') }} {{ l|unique|list }} {{ l|map('upper')|list }} {{ l|select('equalto', 'b')|list }} {{ l|first }}{{ l|last }} {{ l|max }}",
     R"json({"l": ["b", "a", "B", "c"]})json",
     "a,b,B,c ['b', 'a', 'c'] ['B', 'A', 'B', 'C'] ['b'] bc c"},
    {"selectattr", "{{ m|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(' ') }}",
     R"json({"m": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})json",
     "a c"},
    {"repr", "{{ [1, 'a', none, true, 1.5, {'k': (1,)}] }} {{ \"it's\" }} {{ ['it\\'s'] }}",
     R"json({})json",
     "[1, 'a', None, True, 1.5, {'k': (1,)}] it's [\"it's\"]"},
    {"dictsort", "{{ d|dictsort }} {{ d|dictsort(by='value', reverse=true) }}",
     R"json({"d": {"b": 1, "a": 2}})json",
     "[('a', 2), ('b', 1)] [('a', 2), ('b', 1)]"},
    {"set_block", "{% set body | trim %}\n  text {{ 1 }}\n{% endset %}[{{ body }}]",
     R"json({})json",
     "[text 1]"},
    {"filter_block", "{% filter upper %}abc{% endfilter %}",
     R"json({})json",
     "ABC"},
    {"raw", "{% raw %}{{ not rendered }}{% endraw %}",
     R"json({})json",
     "{{ not rendered }}"},
    {"inline_if", "{{ 'yes' if x else 'no' }} {{ 'only' if not x }}|",
     R"json({"x": 0})json",
     "no only|"},
    {"round", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1234|round(-2) }} {{ 2.1|round(0, 'ceil') }}",
     R"json({})json",
     "2.0 4.0 2.67 1200 3.0"},
    {"int_float", "{{ '42'|int }} {{ '3.9'|int }} {{ 'x'|int(7) }} {{ '0x10'|int(base=16) }} {{ '2.5'|float }} {{ 'x'|float }}",
     R"json({})json",
     "42 3 7 16 2.5 0.0"},
    {"indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}",
     R"json({})json",
     "a\n  b\n\n  c|  a\n  b"},
    {"percent", "{{ '%s=%d' % ('n', 3) }} {{ '%05.1f' % 2.25 }} {{ '%(k)s' % {'k': 'v'} }}",
     R"json({})json",
     "n=3 002.2 v"},
    {"str_format", "{{ '{} + {}'.format(1, 'b') }} {{ '{0}{0}'.format('x') }}",
     R"json({})json",
     "1 + b xx"},
    {"with", "{% with a = 2 %}{{ a * 3 }}{% endwith %}{{ a }}|",
     R"json({})json",
     "6|"},
};

TEST(JinjaInterpreter, RendersAsJinja2Does) {
  for (const Case& c : kCases) {
    EXPECT_EQ(render(c.source, c.variables), c.expected) << c.name;
  }
}

TEST(JinjaInterpreter, OneParseRendersManyTimes) {
  JinjaTemplate t("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}");
  EXPECT_EQ(t.render(nlohmann::ordered_json::parse(R"({"xs": [1, 2]})")), "3");
  EXPECT_EQ(t.render(nlohmann::ordered_json::parse(R"({"xs": [5]})")), "5");
  EXPECT_EQ(t.render(nlohmann::ordered_json::parse(R"({"xs": [1, 2]})")), "3");
}

TEST(JinjaInterpreter, UndefinedFailsWhenUsed) {
  JinjaError e = render_error("line one\n{{ missing.attr }}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kRuntime);
  EXPECT_EQ(e.detail(), "'missing' is undefined");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(render_error("{{ d.a.b }}", R"({"d": {}})").detail(), "'dict object' has no attribute 'a'");
  EXPECT_EQ(render_error("{{ l[3].x }}", R"({"l": [1]})").detail(), "list object has no element 3");
  EXPECT_EQ(render_error("{{ u + 1 }}").detail(), "'u' is undefined");
}

TEST(JinjaInterpreter, PythonTypeErrorsAreRuntimeErrors) {
  EXPECT_EQ(render_error("{{ 'a' + 1 }}").detail(), "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{{ 1 < 'a' }}").detail(), "'<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(render_error("{{ 1 / 0 }}").detail(), "division by zero");
  EXPECT_EQ(render_error("{{ [1]|select|length }}").detail(), "object of type 'generator' has no len()");
  EXPECT_EQ(render_error("{% for a, b in [[1]] %}{% endfor %}").detail(), "not enough values to unpack (expected 2, got 1)");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").detail(), "macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(render_error("{% set x = 1 %}{% set x.y = 2 %}").detail(), "cannot assign attribute on non-namespace object");
}

TEST(JinjaInterpreter, IntegersAreSixtyFourBitsAndSayWhenTheyOverflow) {
  EXPECT_EQ(render("{{ 9223372036854775806 + 1 }}"), "9223372036854775807");
  JinjaError e = render_error("{{ 9223372036854775807 + 1 }}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kRuntime);
  EXPECT_NE(e.detail().find("64 bits"), std::string::npos);
}

TEST(JinjaInterpreter, SandboxRefusesMutationAndInternals) {
  EXPECT_EQ(render("{{ l.append }}|{{ ''.__class__ }}|", R"({"l": []})"), "||");
  JinjaError e = render_error("{{ l.append(1) }}", R"({"l": []})");
  EXPECT_EQ(e.detail(), "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(render_error("{{ d.update({'a': 1}) }}", R"({"d": {}})").kind(), JinjaError::Kind::kRuntime);
}

TEST(JinjaInterpreter, RaiseExceptionRejectsWithTheTemplatesMessage) {
  JinjaError e = render_error("{% if true %}\n{{ raise_exception('roles must alternate') }}\n{% endif %}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kRaised);
  EXPECT_EQ(e.detail(), "roles must alternate");
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(std::string(e.what()).find("roles must alternate"), std::string::npos);
}

TEST(JinjaInterpreter, StrftimeNowReadsTheGivenClock) {
  RenderOptions options;
  options.now = 1'722'000'000;  // 26 Jul 2024 in every time zone at noon UTC +- 12h
  EXPECT_EQ(render("{{ strftime_now('%Y') }}", "{}", options), "2024");
  EXPECT_EQ(render("{{ strftime_now('%f|%z|%Z') }}", "{}", options), "000000||");
}

TEST(JinjaInterpreter, StepBoundStopsARunawayLoop) {
  JinjaError e = render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kLimit);
  EXPECT_NE(e.detail().find("1000000 steps"), std::string::npos);
  RenderOptions tight;
  tight.limits.max_steps = 50;
  EXPECT_EQ(render_error("{% for i in range(100) %}{{ i }}{% endfor %}", "{}", tight).kind(), JinjaError::Kind::kLimit);
  EXPECT_EQ(render("{% for i in range(3) %}{{ i }}{% endfor %}", "{}", tight), "012");
}

TEST(JinjaInterpreter, OutputBoundStopsHugeOutput) {
  JinjaError e = render_error("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kLimit);
  EXPECT_NE(e.detail().find("1048576 bytes"), std::string::npos);
  // A value that would be huge fails before it is built, not after.
  EXPECT_EQ(render_error("{{ 'x' * 1000000000000 }}").kind(), JinjaError::Kind::kLimit);
  EXPECT_EQ(render_error("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}")
                .kind(),
            JinjaError::Kind::kLimit);
  RenderOptions small;
  small.limits.max_output_bytes = 10;
  EXPECT_EQ(render("{{ 'x' * 10 }}", "{}", small), "xxxxxxxxxx");
  EXPECT_EQ(render_error("{{ 'x' * 11 }}", "{}", small).kind(), JinjaError::Kind::kLimit);
}

TEST(JinjaInterpreter, CallDepthBoundStopsEndlessRecursion) {
  JinjaError e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kLimit);
  EXPECT_NE(e.detail().find("64 deep"), std::string::npos);
  EXPECT_EQ(render("{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{% else %}{{ n }}{% endif %}{% endmacro %}{{ f(0) }}"),
            "60");
}

TEST(JinjaInterpreter, RangeIsBoundedAsTheSandboxBoundsIt) {
  EXPECT_EQ(render("{{ range(100000)|length }}"), "100000");
  JinjaError e = render_error("{{ range(100001)|length }}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kRuntime);
  EXPECT_EQ(e.detail(), "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
}

TEST(JinjaInterpreter, CyclesAreBrokenWhenTheRenderEnds) {
  // A macro's scope holds the macro, and a namespace can hold itself; the
  // interpreter breaks both when the render ends (AddressSanitizer builds,
  // FOLIO_SANITIZE=ON, report a leak here otherwise).
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.self = ns %}{% set ns.items = [ns] %}"
                   "{% macro m(n) %}{{ n }}{% if n %}{{ m(n - 1) }}{% endif %}{% endmacro %}{% set ns.m = m %}"
                   "{{ ns.m(2) }}{{ ns.self.self is defined }}"),
            "210True");
}

TEST(JinjaInterpreter, VariablesMustBeAnObject) {
  EXPECT_THROW(JinjaTemplate("x").render(nlohmann::ordered_json::array()), JinjaError);
}

}  // namespace
}  // namespace folio::jinja
