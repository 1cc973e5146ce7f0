"""Anthropic's Messages API (/v1/messages) against a real `folio serve` with
Anthropic's official client: text answers streamed and not (the stream's
text equals the whole answer), system prompts, stop_sequences, max_tokens,
forced tool use with a tool_result round trip, thinking blocks, structured
outputs (messages.parse), token counting, the x-api-key header, and errors
in Anthropic's shape."""
import json

import anthropic
import httpx
import jsonschema
import pydantic
import pytest

from conftest import start_folio_server

KEY = "sk-messages-test"
WEATHER = {"name": "get_weather", "description": "The current weather in a city",
           "input_schema": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["eu", "us"]},
                                                             "city": {"type": "string", "maxLength": 40}},
                            "required": ["zone", "city"], "additionalProperties": False}}
GREEDY = {"temperature": 0}  # this client has no temperature argument; the API takes it
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "messages", "--max-model-len", "2048", "--kv-cache-memory", "256MiB",
                           "--api-key", KEY, "--reasoning-parser", "think")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(server):
    return httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()["data"][0]["id"]


def test_a_text_answer_streamed_and_not(client, model):
    m = client.messages.create(model=model, max_tokens=24, extra_body=GREEDY, system="You answer briefly.",
                               messages=[{"role": "user", "content": "Name a colour."}])
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"] and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.input_tokens > 0 and 0 < m.usage.output_tokens <= 24
    with client.messages.stream(model=model, max_tokens=24, extra_body=GREEDY, system="You answer briefly.",
                                messages=[{"role": "user", "content": "Name a colour."}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == m.content[0].text
    assert final.stop_reason == m.stop_reason and final.usage.output_tokens == m.usage.output_tokens


def test_max_tokens_and_stop_sequences(client, model):
    m = client.messages.create(model=model, max_tokens=3, messages=ASK)
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 3
    m = client.messages.create(model=model, max_tokens=60, extra_body=GREEDY, messages=ASK, stop_sequences=["e"])
    assert "e" not in m.content[0].text and m.stop_reason == "stop_sequence" and m.stop_sequence == "e"


def test_forced_tool_use_and_a_tool_result_round_trip(client, model):
    m = client.messages.create(model=model, max_tokens=120, extra_body=GREEDY, messages=ASK, tools=[WEATHER],
                               tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert m.stop_reason == "tool_use"
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    jsonschema.validate(uses[0].input, WEATHER["input_schema"])
    # The same call streamed: the input arrives as input_json_delta fragments.
    with client.messages.stream(model=model, max_tokens=120, extra_body=GREEDY, messages=ASK, tools=[WEATHER],
                                tool_choice={"type": "tool", "name": "get_weather",
                                             "disable_parallel_tool_use": True}) as stream:
        final = stream.get_final_message()
    streamed = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and [(b.name, b.input) for b in streamed] == [(u.name, u.input) for u in uses]
    history = ASK + [{"role": "assistant", "content": [u.model_dump() for u in uses]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                   "content": "Sunny, 21 C"}]}]
    answer = client.messages.create(model=model, max_tokens=30, extra_body=GREEDY, messages=history, tools=[WEATHER])
    assert answer.stop_reason in ("end_turn", "max_tokens", "tool_use") and answer.content
    counted = client.messages.count_tokens(model=model, messages=history, tools=[WEATHER])
    assert counted.input_tokens > client.messages.count_tokens(model=model, messages=ASK).input_tokens


def test_thinking_comes_back_as_thinking_blocks(client, model):
    regex = {"structured_outputs": {"regex": r"<think>[a-z ]{3,30}</think>[A-Za-z ]{3,30}"}}
    m = client.messages.create(model=model, max_tokens=60, messages=ASK, extra_body={**regex, **GREEDY})
    assert [b.type for b in m.content] == ["thinking", "text"], m.content
    assert m.content[0].thinking and m.content[1].text
    with client.messages.stream(model=model, max_tokens=60, messages=ASK, extra_body={**regex, **GREEDY}) as s:
        final = s.get_final_message()
    assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in final.content] == \
        [("thinking", m.content[0].thinking), ("text", m.content[1].text)]


class City(pydantic.BaseModel):
    name: str
    country: str


def test_structured_outputs_through_parse(client, model, server):
    # messages.parse sends output_config.format: {"type": "json_schema", "schema": ...}.
    m = client.messages.parse(model=model, max_tokens=100, extra_body=GREEDY, output_format=City,
                              messages=[{"role": "user", "content": "Name a city in France."}])
    assert m.stop_reason == "end_turn", m.content
    assert isinstance(m.parsed_output, City) and m.parsed_output.name, m.content
    # The beta's top-level output_format too; and what cannot be honoured is a 400.
    schema = City.model_json_schema()
    r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": KEY}, json={
        "model": model, "max_tokens": 100, "temperature": 0, "messages": [{"role": "user", "content": "A city."}],
        "output_format": {"type": "json_schema", "schema": schema}})
    assert r.status_code == 200, r.text
    jsonschema.validate(json.loads(r.json()["content"][0]["text"]), schema)
    for bad in ({"output_config": {"format": {"type": "xml"}}},
                {"output_config": {"format": {"type": "json_schema", "schema": {"$ref": "#/$defs/Nope"}}}}):
        r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": KEY},
                       json={"model": model, "max_tokens": 5, "messages": ASK, **bad})
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text


def test_errors_come_in_anthropics_shape(client, model, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=model, max_tokens=5, messages=[{"role": "robot", "content": "x"}])
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"
    r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": KEY},
                   json={"model": model, "messages": ASK})  # no max_tokens
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"], r.text
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model=model, max_tokens=5, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="wrong", max_retries=0).messages.create(
            model=model, max_tokens=5, messages=ASK)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-nonesuch", max_tokens=5, messages=ASK)
    assert client.messages.create(model=model, max_tokens=2, messages=ASK).content  # still serving
