"""Tool calling against a real `folio serve` with the official openai client:
forced calls (required, a named function) valid for their schemas, streamed
calls (id and name first, then argument fragments) that fold into the
non-streamed answer, parallel_tool_calls, tool_choice none, a whole round
trip (call -> tool result -> answer) through the model's template, tools in
the order written, and bad tools refused with 400 while the server goes on.

SmolLM2's template knows no tools (folio describes them in the system
message); Qwen2.5's prints them itself (Hermes <tool_call> blocks)."""
import json

import httpx
import jsonschema
import openai
import pytest

from conftest import start_folio_server

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "enum": ["eu", "us"]}, "city": {"type": "string", "maxLength": 40}},
        "required": ["zone", "city"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Adds two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "tools-smol", "--max-model-len", "2048", "--kv-cache-memory", "256MiB")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "tools-qwen", "--max-model-len", "2048", "--kv-cache-memory", "256MiB",
                           model="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def qwen15(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "tools-qwen15", "--max-model-len", "2048", "--kv-cache-memory", "256MiB",
                           model="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    yield s
    assert s.stop() == 0, s.log()


def client_of(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=300)


def model_of(server):
    return client_of(server).models.list().data[0].id


def check_calls(calls, names=None):
    assert calls, "no tool calls"
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_"), call
        assert call.function.name in (names or SCHEMAS), call
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    assert len({c.id for c in calls}) == len(calls)


def stream_calls(server, **request):
    """The streamed answer folded as a client folds it: content, calls by index, finish reason."""
    content, calls, finish, first_deltas = "", {}, None, {}
    for chunk in client_of(server).chat.completions.create(model=model_of(server), stream=True, **request):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for d in choice.delta.tool_calls or []:
            if d.index not in calls:
                first_deltas[d.index] = d
                calls[d.index] = {"id": d.id, "name": d.function.name, "arguments": ""}
            calls[d.index]["arguments"] += d.function.arguments or ""
        finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, first_deltas


@pytest.mark.parametrize("which", ["smol", "qwen"])
def test_required_gives_calls_valid_for_their_schemas(which, request):
    server = request.getfixturevalue(which)
    r = client_of(server).chat.completions.create(model=model_of(server), messages=ASK, tools=TOOLS,
                                                   tool_choice="required", temperature=0, max_tokens=120,
                                                   parallel_tool_calls=False)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    check_calls(choice.message.tool_calls)
    assert len(choice.message.tool_calls) == 1  # parallel_tool_calls false: one call


def test_a_named_function_is_the_one_called(smol):
    r = client_of(smol).chat.completions.create(
        model=model_of(smol), tools=TOOLS, temperature=0, max_tokens=120,
        messages=[{"role": "user", "content": "What is 2 plus 3?"}],
        tool_choice={"type": "function", "function": {"name": "add"}})
    calls = r.choices[0].message.tool_calls
    check_calls(calls, names=["add"])
    assert {c.function.name for c in calls} == {"add"}
    assert r.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_calls_fold_into_the_whole_answer(smol, seed):
    request = dict(messages=ASK, tools=TOOLS, tool_choice="required", temperature=0.8, seed=seed, max_tokens=120,
                   parallel_tool_calls=False)
    whole = client_of(smol).chat.completions.create(model=model_of(smol), **request).choices[0]
    content, calls, finish, first = stream_calls(smol, **request)
    assert finish == whole.finish_reason == "tool_calls"
    assert content == ""
    assert [(c["name"], c["arguments"]) for c in calls] == \
        [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    for index, d in first.items():  # the first delta of a call carries its id, type and name
        assert d.id.startswith("call_") and d.type == "function" and d.function.name, d


def test_a_round_trip_renders_the_call_and_its_result(smol, qwen):
    for server in (smol, qwen):
        c = client_of(server)
        first = c.chat.completions.create(model=model_of(server), messages=ASK, tools=TOOLS, tool_choice="required",
                                          temperature=0, max_tokens=120, parallel_tool_calls=False).choices[0]
        call = first.message.tool_calls[0]
        history = ASK + [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "{\"sky\": \"sunny\", \"celsius\": 21}"},
        ]
        answer = c.chat.completions.create(model=model_of(server), messages=history, tools=TOOLS, temperature=0,
                                           max_tokens=40).choices[0]
        assert answer.finish_reason in ("stop", "length", "tool_calls"), answer
        assert answer.message.content or answer.message.tool_calls
        # The prompt holds the call and the result as the template writes them.
        shown = httpx.post(server.url + "/tokenize", timeout=60, json={
            "messages": history, "tools": TOOLS, "return_token_strs": True}).json()
        text = "".join(shown["token_strs"])
        assert "<tool_response>" in text and "sunny" in text, text
        assert "<tool_call>" in text and call.function.name in text, text


def test_tools_reach_the_template_in_the_order_written(qwen):
    shown = httpx.post(qwen.url + "/tokenize", timeout=60, json={
        "messages": ASK, "tools": [WEATHER], "return_token_strs": True}).json()
    text = "".join(shown["token_strs"])
    assert "<tools>" in text, text
    # As written: zone before city, name before parameters (sorted keys would swap both).
    assert text.index('"zone"') < text.index('"city"'), text
    assert text.index('"name"') < text.index('"parameters"'), text


def test_tool_choice_none_reads_no_calls(smol):
    r = client_of(smol).chat.completions.create(model=model_of(smol), messages=ASK, tools=TOOLS, tool_choice="none",
                                                temperature=0, max_tokens=20)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.choices[0].message.content


def test_auto_answers_in_text_or_with_valid_calls(smol, qwen):
    for server in (smol, qwen):
        r = client_of(server).chat.completions.create(model=model_of(server), messages=ASK, tools=TOOLS,
                                                      temperature=0, max_tokens=60).choices[0]
        if r.message.tool_calls:
            check_calls(r.message.tool_calls)
            assert r.finish_reason == "tool_calls"
        else:
            assert r.message.content and "<tool_call>" not in r.message.content, r


def test_schema_properties_come_out_in_the_order_written(smol):
    schema = {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
              "required": ["zeta", "alpha"], "additionalProperties": False}
    r = client_of(smol).chat.completions.create(
        model=model_of(smol), messages=[{"role": "user", "content": "Two numbers, please."}], temperature=0,
        max_tokens=40, response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
    text = r.choices[0].message.content
    assert list(json.loads(text)) == ["zeta", "alpha"], text


BAD = [
    ({"tools": {"a": 1}}, "tools"),
    ({"tools": [{"type": "retrieval"}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools"),
    ({"tools": [ADD, ADD]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}}], "tool_choice": "required"}, "tools"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "maybe"}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    ({"messages": ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{not json"}}]}]}, "messages"),
    ({"messages": ASK + [{"role": "tool", "content": "x", "tool_call_id": 7}]}, "messages"),
    ({"messages": ASK + [{"role": "robot", "content": "x"}]}, "messages"),
]


@pytest.mark.parametrize("fields,param", BAD)
def test_bad_tools_are_400_naming_the_problem_and_the_server_goes_on(smol, fields, param):
    body = {"model": model_of(smol), "messages": ASK, "max_tokens": 4, **fields}
    r = httpx.post(smol.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"], error
    ok = client_of(smol).chat.completions.create(model=model_of(smol), messages=ASK, max_tokens=2)
    assert ok.choices[0].message.content is not None


CITY_WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}


def test_a_fenced_json_call_is_read_as_a_tool_call(qwen15):
    """Issue 38: with tool_choice auto, Qwen2.5-Coder-1.5B writes its call as a
    fenced ```json block, not in its template's <tool_call> tags. The block is
    a call: it names an offered tool and its arguments fit the schema."""
    c = client_of(qwen15)
    request = dict(messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                   tools=[CITY_WEATHER], temperature=0, max_tokens=80)
    # What the model writes (tool_choice none reads no calls; the prompt is the same).
    raw = c.chat.completions.create(model=model_of(qwen15), tool_choice="none", **request).choices[0].message.content
    assert raw.startswith("```json\n{") and "<tool_call>" not in raw, raw

    r = c.chat.completions.create(model=model_of(qwen15), **request).choices[0]
    assert r.finish_reason == "tool_calls", r
    assert r.message.content is None, r
    [call] = r.message.tool_calls
    assert call.function.name == "get_weather" and call.id.startswith("call_"), call
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, CITY_WEATHER["function"]["parameters"])
    assert args["city"] == "Paris", args

    content, calls, finish, _ = stream_calls(qwen15, **request)
    assert (content, finish) == ("", "tool_calls")
    assert [(x["name"], json.loads(x["arguments"])) for x in calls] == [("get_weather", args)]
