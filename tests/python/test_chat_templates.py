"""folio's Jinja interpreter against jinja2 itself, byte for byte.

Every template in tests/data/chat_templates/ (the ones our models carry, and
the common shapes as their models publish them) is rendered for a set of
conversations twice: by jinja2 in the environment Hugging Face's
apply_chat_template uses, and by folio through tests/tools/folio_render_template.
The two renderings must be equal, or both must fail; where the template
itself rejects the conversation (raise_exception) folio must report the same
message. A second set of small snippets checks the language corner by corner
(whitespace control, filters, tests, undefined values, scoping) the same way.
"""
import json
import subprocess
from datetime import datetime
from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from conftest import BUILD_DIR, SOURCE_DIR

TEMPLATES_DIR = SOURCE_DIR / "tests" / "data" / "chat_templates"
TEMPLATES = sorted(TEMPLATES_DIR.glob("*.jinja"))
NOW = 1_722_000_000  # the clock strftime_now() reads on both sides: 26 Jul 2024
BOS, EOS = "<s>", "</s>"


class GenerationTracker(Extension):
    """HF's {% generation %} tag: renders its body in place."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment() -> ImmutableSandboxedEnvironment:
    """The environment transformers' apply_chat_template compiles templates in."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(NOW).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = hf_environment()


def reference(source: str, variables: dict):
    """jinja2's rendering, or ("error", kind, message)."""
    try:
        return ENV.from_string(source).render(**variables)
    except jinja2.exceptions.TemplateSyntaxError as e:
        return ("error", "syntax", str(e))
    except Exception as e:  # what the template raised, or what Python raised
        kind = "raised" if type(e) is jinja2.exceptions.TemplateError else "runtime"
        return ("error", kind, str(e))


@pytest.fixture(scope="session")
def tool() -> Path:
    path = BUILD_DIR / "tests" / "folio_render_template"
    assert path.exists(), f"{path} is missing; build the folio_render_template target"
    return path


def folio(tool: Path, template: Path, payload: dict, raw: bool = False):
    """folio's rendering, or ("error", kind, detail)."""
    cmd = [str(tool), "--now", str(NOW)] + (["--raw"] if raw else []) + [str(template)]
    run = subprocess.run(cmd, input=json.dumps(payload).encode(), capture_output=True, timeout=60)
    if run.returncode == 0:
        return run.stdout.decode("utf-8")
    assert run.returncode == 1, f"folio_render_template failed to run: {run.stderr.decode()}"
    error = json.loads(run.stderr.decode("utf-8").splitlines()[-1])
    return ("error", error["kind"], error["detail"])


def assert_same(expected, got):
    if isinstance(expected, tuple):
        assert isinstance(got, tuple), f"jinja2 raised {expected[1]}: {expected[2]!r}, folio rendered {got!r}"
        if expected[1] == "raised":
            assert got[1:] == expected[1:], f"jinja2 raised {expected[2]!r}, folio said {got}"
        else:
            assert got[1] == expected[1], f"jinja2 failed ({expected[1]}: {expected[2]}), folio: {got}"
    else:
        assert got == expected, f"folio rendered {got!r}\njinja2 rendered {expected!r}"


# --- conversations ---------------------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Température « ° » included.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}

TOOL_CALL = {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "assistant_last": [
        {"role": "user", "content": "Say yes."},
        {"role": "assistant", "content": "Yes."},
    ],
    "content_parts": [
        {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]},
    ],
    "unicode": [
        {"role": "user", "content": "Grüße aus Köln — 世界 🌍👋🏽 naïve café\u00a0\u3000"},
        {"role": "assistant", "content": "\u2028Привет, Σίσυφος! ǅ ß İ 😀"},
        {"role": "user", "content": "עברית العربية हिन्दी"},
    ],
    "tricky_text": [
        {"role": "system", "content": "  padded system  \n\n"},
        {"role": "user", "content": "{{ not_a_variable }} {% if x %}not a block{% endif %} {# nor a comment #} "
                                    "'single' \"double\" \\backslash\\ \ttab\n\nnew\r\nlines <tag>&amp;"},
    ],
    "tools": [
        {"role": "system", "content": "Use tools when needed."},
        {"role": "user", "content": "What's the weather in Paris?"},
    ],
    "tool_round_trip": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call12345"},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ],
    "tool_call_null_content": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call12345"},
    ],
    "reasoning": [
        {"role": "user", "content": "Think first."},
        {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nThe answer is 4."},
        {"role": "user", "content": "And now?"},
    ],
    "two_users_in_a_row": [
        {"role": "user", "content": "One"},
        {"role": "user", "content": "Two"},
    ],
    "assistant_first": [
        {"role": "assistant", "content": "I speak first."},
        {"role": "user", "content": "Fine."},
    ],
    "unknown_role": [
        {"role": "narrator", "content": "Meanwhile..."},
    ],
    # gpt-oss's harmony format: a developer message, the analysis channel in
    # an assistant message's "thinking", a call with its thinking.
    "developer_thinking": [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "thinking": "Simple sum: 4.", "content": "Quatre."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "tool_call_thinking": [
        {"role": "system", "content": "Use tools when needed."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "thinking": "I should call get_weather.", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call12345"},
    ],
    "empty": [],
    # Two calls in one turn and their results, ids of the 9 characters Mistral's templates require.
    "parallel_calls": [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
            {"id": "xyz987UVW", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}}]},
        {"role": "tool", "content": "{\"sky\": \"sunny\"}", "tool_call_id": "abcDEF123"},
        {"role": "tool", "content": "rain", "tool_call_id": "xyz987UVW"},
    ],
    # GLM-4-0414's own shape of a call (the name in metadata) and its result (an observation).
    "glm_call_history": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "metadata": "get_weather", "content": "{\"city\": \"Paris\"}"},
        {"role": "observation", "content": "{\"sky\": \"sunny\"}"},
    ],
    # Phi-4-mini's: the tools as JSON text in the system message's own field.
    "system_tools_field": [
        {"role": "system", "content": "You are a helpful assistant with some tools.",
         "tools": "[{\"name\": \"get_weather\", \"parameters\": {\"city\": {\"type\": \"str\"}}}]"},
        {"role": "user", "content": "Weather in Paris?"},
    ],
    "thinking_on": [
        {"role": "system", "content": "Think first."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "long": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * (i % 7)}
             for i in range(60)] + [{"role": "user", "content": "last"}],
}

# Extra template variables some conversations are rendered with (HF's **kwargs).
EXTRAS = {
    "reasoning": {"enable_thinking": False},
    "multi_turn": {"date_string": "01 Jan 2025", "unk_token": "<unk>"},
    "thinking_on": {"enable_thinking": True, "thinking": True},
    # gpt-oss's system message: reasoning effort, identity, built-in tools.
    "developer_thinking": {"reasoning_effort": "high", "model_identity": "You are a tiny test model."},
    "tool_call_thinking": {"reasoning_effort": "low", "builtin_tools": ["browser", "python"]},
}

CASES = [(t, name, agp) for t in TEMPLATES for name in CONVERSATIONS for agp in (True, False)]


@pytest.mark.parametrize("template,conversation,add_generation_prompt", CASES,
                         ids=[f"{t.stem}-{c}-{'gen' if g else 'nogen'}" for t, c, g in CASES])
def test_template_matches_jinja2(tool, template, conversation, add_generation_prompt):
    messages = CONVERSATIONS[conversation]
    tools = [WEATHER_TOOL] if conversation in ("tools", "tool_round_trip", "parallel_calls",
                                               "tool_call_thinking") else None
    extra = EXTRAS.get(conversation, {})
    variables = {"messages": messages, "tools": tools, "documents": None,
                 "add_generation_prompt": add_generation_prompt, "bos_token": BOS, "eos_token": EOS, **extra}
    expected = reference(template.read_text(encoding="utf-8"), variables)
    payload = {"messages": messages, "add_generation_prompt": add_generation_prompt,
               "bos_token": BOS, "eos_token": EOS, "extra": extra}
    if tools is not None:
        payload["tools"] = tools
    assert_same(expected, folio(tool, template, payload))


def test_every_template_renders_somewhere(tool):
    """Each template renders at least the plain conversations: the cases above are not all errors."""
    for template in TEMPLATES:
        payload = {"messages": CONVERSATIONS["multi_turn"][1:], "add_generation_prompt": True,
                   "bos_token": BOS, "eos_token": EOS}
        got = folio(tool, template, payload)
        assert isinstance(got, str) and "Tell me a joke." in got, (template.name, got)


# --- snippets --------------------------------------------------------------------------------------

# (template, variables): each rendered by both and compared.
SNIPPETS = [
    # whitespace control, trim_blocks, lstrip_blocks
    ("a\n  {% if true %}\n  x\n  {% endif %}\nb", {}),
    ("a  {%- if true -%}  x  {%- endif -%}  b", {}),
    ("  {{- 'x' -}}  \n y", {}),
    ("  {%+ if true %}x{% endif %}\n", {}),
    ("{% if true +%}\nx{% endif %}", {}),
    ("line\n    {# comment #}\nafter", {}),
    ("line\n    {#- comment -#}   \n  after", {}),
    ("a {# c #} b {#+ d +#}\n e", {}),
    ("{% raw %}\n{{ x }}{% if %}\n{% endraw %}\nq", {}),
    ("  {%- raw -%}  {{ y }}  {%- endraw -%}  z", {}),
    ("x\n{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", {}),
    ("\t  {% if true %}tab{% endif %}", {}),
    ("a\u3000{%- if true %}b{% endif %}", {}),
    ("trailing newline kept once\n\n", {}),
    ("crlf\r\nline\r{% if true %}\r\nx{% endif %}", {}),
    ("{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("{% set x = 1 %}\n\n{{ x }}", {}),
    # literals
    ("{{ 'a\\tb\\n\\x41\\u00e9\\U0001F600\\101\\q\\\\' }}", {}),
    ("{{ \"it's\" ~ 'say \"hi\"' }}", {}),
    ("{{ 'adjacent' 'strings' \"join\" }}", {}),
    ("{{ 1_000 + 0x1F + 0o17 + 0b101 }} {{ 1.5e3 }} {{ 2.5E-3 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789.0 }}", {}),
    ("{{ [1, 'two', none, true, False, 1.0, {'k': [None]}] }}", {}),
    ("{{ (1,) }} {{ () }} {{ (1, 'a') }} {{ {} }} {{ [] }}", {}),
    ("{{ True }} {{ FALSE }} {{ None }} {{ none }}", {}),
    ("{{ 'quote\\'s' }} {{ ['it\\'s', 'say \"x\"', 'both \\' \"'] }}", {}),
    ("{{ ['\\n\\t\\\\', '\\x00\\x7f\\xa0\\u2028', 'é😀'] }}", {}),
    ("{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 2.0 ** 100 }} {{ -0.0 }} {{ 1e300 * 1e300 }}", {}),
    # operators and precedence
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}", {}),
    ("{{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }}", {}),
    ("{{ 'a' ~ 1 + 2 }} {{ 1 ~ 2 * 3 }} {{ 'x' * 3 }} {{ 3 * [0] }} {{ [1] + [2] }}", {}),
    ("{{ not true and false }} {{ not (true and false) }} {{ 0 or '' or 'x' }} {{ 1 and 2 }} {{ [] and 'no' }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }}", {}),
    ("{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' in u }}", {}),
    ("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 }}| {{ 'a' if false else 'b' if false else 'c' }}", {}),
    ("{{ -x|abs }} {{ 'a' + 'b'|upper }} {{ 3 - 1|string }}", {"x": 5}),
    ("{{ true + 1 }} {{ 5 / 2 }} {{ 4 / 2 }} {{ 1 / 0 }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{{ u + 1 }}", {}),
    # undefined values
    ("[{{ u }}] [{{ u ~ 'x' }}] [{{ u|default('d') }}] [{{ u is defined }}] [{{ u|length }}]", {}),
    ("{{ d.missing }}|{{ d['missing'] }}|{{ d.missing is defined }}|{{ l[5] }}|{{ none.attr }}|", {"d": {}, "l": [1]}),
    ("{{ u.attr }}", {}),
    ("{{ d.missing.attr }}", {"d": {}}),
    ("{{ u[0] }}", {}),
    ("{{ u() }}", {}),
    ("{% for x in u %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("{{ u == u2 }} {{ u != none }} {{ u is none }} {{ u is iterable }} {{ u is sequence }} {{ u is callable }}", {}),
    ("{{ u|list }} {{ u|join(',') }} {{ u|first }}| {{ u|string }}| {{ u|trim }}|", {}),
    ("{{ u|tojson }}", {}),
    ("{{ u > 1 }}", {}),
    ("{{ u|int }}", {}),
    ("{{ x }}", {"x": None}),
    # attribute and item access
    ("{{ d.items is callable }}|{{ d['items'] }}|{{ d.get('items') }}|{{ d.keys()|list }}|{{ d.values()|list }}",
     {"d": {"items": 3, "other": 4}}),
    ("{{ m.role }} {{ m['role'] }} {{ m.get('nope', 'dflt') }} {{ m.get('nope') }} {{ m.content[1] }}",
     {"m": {"role": "user", "content": "hey"}}),
    ("{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[::-1] }} {{ l[:-1] }} {{ l[::2] }} {{ l[5:] }} {{ l[-10:2] }}",
     {"l": [1, 2, 3, 4]}),
    ("{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[10] }}| {{ s.0 }}", {"s": "héllo😀"}),
    ("{{ l.0 }} {{ l.1.a }}", {"l": [7, {"a": "b"}]}),
    ("{{ d[1] }} {{ d[(1, 2)] }}", {"d": {}}),
    ("{{ {1: 'int', 'a': 'str'}[1] }} {{ {'k': 'v'}['k'] }}", {}),
    ("{{ l[::0] }}", {"l": [1]}),
    ("{{ s.__class__ }}|{{ d.__len__ }}|", {"s": "x", "d": {}}),
    ("{{ l.append }}|", {"l": []}),
    ("{{ l.append(1) }}", {"l": []}),
    ("{{ d.update({'a': 1}) }}", {"d": {}}),
    # string methods
    ("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.strip(' x') }}", {"s": "  xhix  "}),
    ("{{ s.split() }} {{ s.split(',') }} {{ s.split(',', 1) }} {{ s.rsplit(',', 1) }} {{ s.split(None, 1) }}",
     {"s": " a, b ,,c  d "}),
    ("{{ s.startswith('ab') }} {{ s.endswith(('x', 'cd')) }} {{ s.startswith('b', 1) }} {{ s.find('c') }} "
     "{{ s.rfind('z') }} {{ s.count('b') }} {{ s.replace('b', 'B') }} {{ s.replace('', '-') }}", {"s": "abcdb"}),
    ("{{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ s.capitalize() }}", {"s": "hELLo wOrld's ß-straße ǆ"}),
    ("{{ ', '.join(['a', 'b']) }} {{ s.splitlines() }} {{ s.center(9, '*') }} {{ 'x'.zfill(3) }}",
     {"s": "a\nb\r\nc"}),
    ("{{ s.isdigit() }} {{ s.isalpha() }} {{ s.islower() }} {{ s.isupper() }} {{ ' '.isspace() }}", {"s": "abc"}),
    ("{{ s.removeprefix('<tool_response>') }} {{ s.partition(':') }} {{ s.rpartition(':') }}",
     {"s": "<tool_response>a:b:c"}),
    ("{{ s.split('') }}", {"s": "abc"}),
    ("{{ s.format(1) }}", {"s": "{}"}),
    # filters
    ("{{ s|trim }}|{{ s|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s|capitalize }}",
     {"s": " xhello wORLD-foo(bar [baz <q>x "}),
    ("{{ s|length }} {{ s|count }} {{ l|length }} {{ d|length }} {{ s|wordcount }} {{ s|reverse }}",
     {"s": "héllo wörld 😀", "l": [1, 2], "d": {"a": 1}}),
    ("{{ l|first }} {{ l|last }} {{ l|join('-') }} {{ l|sum }} {{ l|min }} {{ l|max }} {{ l|sort }} {{ l|sort(true) }}",
     {"l": [3, 1, 2]}),
    ("{{ l|sort }} {{ l|sort(case_sensitive=true) }} {{ l|min }} {{ l|max }} {{ l|unique|list }} {{ l|first }}",
     {"l": ["b", "B", "a", "A", "c"]}),
    ("{{ l|map(attribute='n')|list }} {{ l|map(attribute='x', default='?')|list }} {{ l|sort(attribute='n')|map(attribute='n')|join }}",
     {"l": [{"n": 2}, {"n": 1}, {"n": 3, "x": "X"}]}),
    ("{{ l|selectattr('role', 'equalto', 'user')|list|length }} {{ l|rejectattr('role', 'eq', 'user')|map(attribute='c')|join(',') }} "
     "{{ l|selectattr('flag')|list }} {{ l|map(attribute='role')|unique|list }}",
     {"l": [{"role": "user", "c": 1}, {"role": "bot", "c": 2, "flag": True}, {"role": "user", "c": 3}]}),
    ("{{ l|select('odd')|list }} {{ l|reject('even')|list }} {{ l|select|list }} {{ l|select('>', 2)|list }} "
     "{{ l|select('in', [1, 4])|list }} {{ l|map('string')|join('+') }}", {"l": [0, 1, 2, 3, 4]}),
    ("{{ l|select|length }}", {"l": [1]}),
    ("{% if []|select %}generators are true{% endif %}", {}),
    ("{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }} {{ d|items|list }}",
     {"d": {"b": 2, "A": 3, "a": 1}}),
    ("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %} {% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}",
     {"d": {"x": 1, "y": [2]}}),
    ("{{ x|int }} {{ '42'|int }} {{ '3.7'|int }} {{ ' 12 '|int }} {{ 'z'|int }} {{ 'z'|int(7) }} {{ '0x1A'|int(base=16) }} "
     "{{ 3.99|int }} {{ true|int }} {{ '1_000'|int }} {{ none|int }}", {"x": "-5"}),
    ("{{ '1.5'|float }} {{ 2|float }} {{ 'x'|float }} {{ 'inf'|float }} {{ '1e3'|float }} {{ none|float(-1) }}", {}),
    ("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.55|round(1) }} {{ 7|round }} {{ 1234.5|round(-2) }} "
     "{{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ -0.5|round }}", {}),
    ("{{ -3|abs }} {{ -2.5|abs }} {{ [1, 2.5]|sum }} {{ l|sum(attribute='v') }} {{ [[1], [2]]|sum(start=[]) }}",
     {"l": [{"v": 1}, {"v": 2}]}),
    ("{{ l|batch(2)|list }} {{ l|batch(2, 'x')|list }}", {"l": [1, 2, 3]}),
    ("{{ s|replace('a', 'b') }} {{ s|replace('a', 'b', 1) }} {{ 123|replace('2', 'x') }}", {"s": "banana"}),
    ("{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|d('n') }} {{ false|d('f', boolean=true) }}",
     {}),
    ("{{ 'abc'|list }} {{ d|list }} {{ (1, 2)|list }} {{ l|reverse|list }} {{ d|reverse|list }} {{ l|reverse|first }}", {"d": {"k": 1}, "l": [1, 2]}),
    ("{{ s|indent }}|{{ s|indent(2, true) }}|{{ s|indent('> ', blank=true) }}|{{ ''|indent }}", {"s": "a\n\nb\nc"}),
    ("{{ s|escape }} {{ s|e }} {{ s|safe }} {{ (s|safe) + '<i>' }} {{ '<i>' + s|e }} {{ s|forceescape|length }}",
     {"s": "<b>\"Tom\" & 'Jerry'</b>"}),
    ("{{ 'hello'|center(11) }}|{{ 'x'|string }}|{{ 1|string ~ 2 }}|{{ [1]|string }}", {}),
    ("{{ x|tojson }}", {"x": {"a": [1, 2.5, "é\"\\\n\u2028\x01"], "b": None, "c": True, "d": {}, "e": [], "f": 1e20}}),
    ("{{ x|tojson(indent=2) }}|{{ x|tojson(indent='\t') }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}",
     {"x": {"z": [1, {"y": []}], "a": "b"}}),
    ("{{ x|tojson(ensure_ascii=true) }} {{ 'ünï 😀'|tojson }} {{ (1, 'a')|tojson }} {{ 1.0|tojson }} {{ none|tojson }}",
     {"x": "ünï 😀"}),
    ("{{ x|tojson }}", {"x": {"gen": None}, "g": [1]}),
    ("{{ [1]|select|tojson }}", {}),
    ("{{ 'x'|nosuchfilter }}", {}),
    ("{{ 'x' is nosuchtest }}", {}),
    # tests
    ("{{ 1 is odd }} {{ 2 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 3.0 is odd }}", {}),
    ("{{ x is string }} {{ x is number }} {{ x is integer }} {{ x is float }} {{ 1.0 is float }} {{ true is number }} "
     "{{ true is integer }} {{ true is boolean }} {{ 0 is false }} {{ false is false }} {{ none is none }}", {"x": "s"}),
    ("{{ d is mapping }} {{ l is mapping }} {{ l is sequence }} {{ d is sequence }} {{ 's' is sequence }} {{ 1 is sequence }} "
     "{{ l is iterable }} {{ 1 is iterable }} {{ d.items() is sequence }}", {"d": {}, "l": []}),
    ("{{ 'a' is in 'abc' }} {{ 2 is in [1, 2] }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 2 is gt 1 }} {{ 2 is lessthan 1 }} "
     "{{ 1 is ne 1 }} {{ 1 is ge 1 }} {{ 1 is le 0 }} {{ 1 is == 1 }}", {}),
    ("{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'Abc' is lower }} {{ 'upper' is filter }} {{ 'odd' is test }} "
     "{{ 'nope' is filter }} {{ range is callable }} {{ 'x' is callable }}", {}),
    ("{{ x is not none and x is not string }} {{ not x is defined }} {{ x is defined and x }}", {"x": 0}),
    ("{{ 'x' is divisibleby 2 }}", {}),
    # statements
    ("{% for a, b in [[1, 2], [3, 4]] if a > 1 %}{{ loop.index }}/{{ loop.length }}:{{ a }}{{ b }}{% else %}E{% endfor %}", {}),
    ("{% for x in 'ab' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}"
     "{{ loop.cycle('o', 'e') }}{{ loop.previtem }}|{{ loop.nextitem }};{% endfor %}", {}),
    ("{% for x in [1, 1, 2] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %} {{ loop }}", {}),
    ("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{% endfor %}{% endfor %}", {}),
    ("{% for x in {'a': 1, 'b': 2} %}{{ x }}{% endfor %} {% for c in 'hé' %}[{{ c }}]{% endfor %}", {}),
    ("{% for x in 5 %}{% endfor %}", {}),
    ("{% for a, b in [[1]] %}{% endfor %}", {}),
    ("{{ range(5)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}", {}),
    ("{{ range(200000)|length }}", {}),
    ("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set c = (3, 4) %}{{ c }} {% set d = 1, %}{{ d }}", {}),
    ("{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns.c }}|", {}),
    ("{% set ns = namespace({'k': 'v'}) %}{{ ns.k }} {{ ns }}", {}),
    ("{% set x = 1 %}{% set x.attr = 2 %}", {}),
    ("{% set body %}  hi {{ 1 }} {% endset %}[{{ body }}] {% set up | upper | trim %} shout {% endset %}[{{ up }}]", {}),
    ("{% filter upper %}abc {{ 'def' }}{% endfilter %} {% filter replace('a', 'o') | title %}banana{% endfilter %}", {}),
    ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|", {}),
    ("{% macro m(a, b=2, c='x' ~ 'y') %}[{{ a }},{{ b }},{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(b=5) }}{{ m(1, c=none) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(z=2) }}", {}),
    ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("{% macro outer() %}{% set y = 5 %}{{ y }}{% endmacro %}{{ outer() }}{{ y }}|", {}),
    ("{% set g = 'global' %}{% macro show() %}{{ g }}{% endmacro %}{% set g = 'changed' %}{{ show() }}", {}),
    ("{% generation %}inside {{ 1 }}{% endgeneration %}", {}),
    ("{% print 'a', 1 %}", {}),
    ("{{ raise_exception('custom failure: ' ~ 42) }}", {}),
    ("{{ strftime_now('%Y-%m-%d %H %A %B %j') }}", {}),
    ("{% set d = dict(a=1, b='x') %}{{ d }} {{ dict([('k', 'v')]) }}", {}),
    ("{% set j = joiner('|') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", {}),
    ("{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}", {}),
    ("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }} {{ m() }}", {}),
    ("{{ '%s and %r' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%5.2f|%-4d|%04d|%+d' % (3.14159, 7, 42, 5) }} "
     "{{ '%(x)s' % {'x': 1} }} {{ 'no specs' % u }} {{ '%s'|format([1]) }} {{ '%s-%s'|format('a', 'b') }}", {}),
    ("{{ '%s %s' % ('one',) }}", {}),
    ("{{ '%s' % (1, 2) }}", {}),
    ("{{ n|map('upper')|list }} {{ 0|map('string')|list }} {{ n|select|list }}", {"n": None}),
    ("{{ n[1:] }}", {"n": None}),
    ("{{ d[1:] }}", {"d": {"a": 1}}),
    ("{{ t|indent }}", {"t": 5}),
    ("{{ messages[0]['role'] }}", {"messages": []}),
    # syntax errors
    ("{% if x %}never closed", {}),
    ("{% for %}{% endfor %}", {}),
    ("{{ 1 + }}", {}),
    ("{{ (1 }}", {}),
    ("{% endif %}", {}),
    ("{% unknown_tag %}", {}),
    ("{% if true %}{% endfor %}", {}),
    ("{{ 'unterminated }}", {}),
    ("{# never closed", {}),
    ("{% raw %} never closed", {}),
    ("{{ x is string is number }}", {}),
    ("{% macro m(a=1, b) %}{% endmacro %}", {}),
    ("{% set 1 = 2 %}", {}),
    ("{{ f(a=1, 2) }}", {}),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jinja2 on the deliberate '\q' escape
@pytest.mark.parametrize("index", range(len(SNIPPETS)), ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_snippet_matches_jinja2(tool, tmp_path, index):
    source, variables = SNIPPETS[index]
    path = tmp_path / "snippet.jinja"
    path.write_bytes(source.encode("utf-8"))
    assert_same(reference(source, variables), folio(tool, path, variables, raw=True))


def test_syntax_error_has_line_and_column(tool, tmp_path):
    path = tmp_path / "bad.jinja"
    path.write_text("line one\n{% if true %}\n  {{ 1 + }}\n{% endif %}\n", encoding="utf-8")
    run = subprocess.run([str(tool), "--raw", str(path)], input=b"{}", capture_output=True)
    assert run.returncode == 1
    error = json.loads(run.stderr.decode())
    assert (error["kind"], error["line"], error["column"]) == ("syntax", 3, 10)
    assert "chat template line 3, column 10" in error["message"]
