"""OpenAI's Responses API (/v1/responses) against a real `folio serve` with
the official openai client: text answers streamed and not (the stream's
deltas equal the whole answer), instructions, max_output_tokens and the
incomplete status, function tools forced and their call -> output round
trip, text.format with a JSON schema (in its written order), reasoning
items, store with previous_response_id and GET/DELETE /v1/responses/{id}
(bounded: an evicted response is a clear 400), and 400s for what is not
served."""
import json

import jsonschema
import openai
import pytest

from conftest import start_folio_server

WEATHER = {"type": "function", "name": "get_weather", "description": "The current weather in a city",
           "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["eu", "us"]},
                                                           "city": {"type": "string", "maxLength": 40}},
                          "required": ["zone", "city"], "additionalProperties": False}}
ASK = "What is the weather in Paris?"
STORED = 4  # --max-stored-responses


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "responses", "--max-model-len", "2048", "--kv-cache-memory", "256MiB",
                           "--reasoning-parser", "think", "--max-stored-responses", str(STORED))
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def events_of(client, **request):
    return list(client.responses.create(stream=True, **request))


def test_a_text_answer_streamed_and_not(client, model):
    r = client.responses.create(model=model, input="Name a colour.", instructions="Answer briefly.",
                                temperature=0, max_output_tokens=24)
    assert r.object == "response" and r.id.startswith("resp_") and r.status in ("completed", "incomplete")
    assert r.output[0].id.startswith("msg_")  # the prefixes OpenAI spells, which clients match
    assert [item.type for item in r.output] == ["message"]
    assert r.output_text and r.output[0].content[0].type == "output_text"
    assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 24
    events = events_of(client, model=model, input="Name a colour.", instructions="Answer briefly.", temperature=0,
                       max_output_tokens=24)
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] in ("response.completed",
                                                                                          "response.incomplete")
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == r.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == r.output_text


def test_max_output_tokens_makes_it_incomplete(client, model):
    r = client.responses.create(model=model, input=ASK, max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3


def test_function_calls_and_their_outputs(client, model):
    r = client.responses.create(model=model, input=ASK, tools=[WEATHER], tool_choice="required", temperature=0,
                                max_output_tokens=120, parallel_tool_calls=False)
    calls = [item for item in r.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["parameters"])
    events = events_of(client, model=model, input=ASK, tools=[WEATHER], temperature=0, max_output_tokens=120,
                       tool_choice={"type": "function", "name": "get_weather"}, parallel_tool_calls=False)
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.output_item.done"]
    assert args == calls[0].arguments and done[-1].item.type == "function_call"
    follow = client.responses.create(model=model, tools=[WEATHER], temperature=0, max_output_tokens=30, input=[
        {"role": "user", "content": ASK},
        {"type": "function_call", "call_id": calls[0].call_id, "name": calls[0].name, "arguments": calls[0].arguments},
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 21 C"},
    ])
    assert follow.output and follow.status in ("completed", "incomplete")


def test_a_json_schema_format_keeps_its_order(client, model):
    schema = {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
              "required": ["zeta", "alpha"], "additionalProperties": False}
    r = client.responses.create(model=model, input="Two numbers.", temperature=0, max_output_tokens=40,
                                text={"format": {"type": "json_schema", "name": "pair", "schema": schema}})
    assert list(json.loads(r.output_text)) == ["zeta", "alpha"], r.output_text


def test_reasoning_comes_as_a_reasoning_item(client, model):
    regex = {"structured_outputs": {"regex": r"<think>[a-z ]{3,30}</think>[A-Za-z ]{3,30}"}}
    r = client.responses.create(model=model, input=ASK, temperature=0, max_output_tokens=60, extra_body=regex)
    assert [item.type for item in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].text and r.output_text


def test_what_is_not_served_is_400(client, model):
    for request in [dict(previous_response_id="resp_123"), dict(input=[{"type": "image_generation_call"}]),
                    dict(tools=[{"type": "web_search"}]), dict(input=[])]:
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=model, **{"input": ASK, "max_output_tokens": 4, **request})
    assert client.responses.create(model=model, input=ASK, max_output_tokens=2).output  # still serving


def test_a_stored_response_is_read_back_and_continued(client, model, server):
    first = client.responses.create(model=model, input="My name is Ada. Say hello.", temperature=0,
                                    max_output_tokens=12, instructions="Answer briefly.")
    assert first.store is True and first.system_fingerprint.startswith("fp_")  # OpenAI's default: stored
    got = client.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text and got.status == first.status
    # The follow-up continues the stored conversation: its prompt holds the first input and answer.
    follow = client.responses.create(model=model, previous_response_id=first.id, input="What is my name?",
                                     temperature=0, max_output_tokens=12)
    assert follow.previous_response_id == first.id and follow.output_text
    whole = client.responses.create(model=model, temperature=0, max_output_tokens=12, store=False, input=[
        {"role": "user", "content": "My name is Ada. Say hello."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "What is my name?"}])
    assert whole.store is False and follow.output_text == whole.output_text
    assert follow.usage.input_tokens == whole.usage.input_tokens  # the instructions did not carry over
    # Streamed answers are stored too, once complete.
    streamed = [e for e in client.responses.create(model=model, input="Hi", max_output_tokens=4, stream=True)]
    done = streamed[-1].response
    assert client.responses.retrieve(done.id).output_text == done.output_text
    # store: false is not kept, and says so.
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.retrieve(whole.id)
    assert "not found" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=model, previous_response_id=whole.id, input="Hi", max_output_tokens=2)
    assert e.value.body["code"] == "previous_response_not_found" and e.value.body["param"] == "previous_response_id"
    # DELETE, as OpenAI's: then it is gone.
    assert client.responses.delete(done.id) is None
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(done.id)


def test_the_store_is_bounded_and_says_what_was_evicted(client, model):
    ids = [client.responses.create(model=model, input=f"Count to {i}.", max_output_tokens=2).id
           for i in range(STORED + 2)]
    for kept in ids[-STORED:]:
        assert client.responses.retrieve(kept).id == kept
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.retrieve(ids[0])
    assert "evicted" in str(e.value) and "--max-stored-responses" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=model, previous_response_id=ids[0], input="Go on.", max_output_tokens=2)
    assert "evicted" in str(e.value) and e.value.body["code"] == "previous_response_not_found"


def test_a_function_call_is_answered_through_previous_response_id(client, model):
    """The agent loop without resending: the stored call, then only its output."""
    r = client.responses.create(model=model, input=ASK, tools=[WEATHER], tool_choice="required", temperature=0,
                                max_output_tokens=120, parallel_tool_calls=False)
    call = [item for item in r.output if item.type == "function_call"][0]
    follow = client.responses.create(model=model, previous_response_id=r.id, tools=[WEATHER], temperature=0,
                                     max_output_tokens=30, input=[
                                         {"type": "function_call_output", "call_id": call.call_id,
                                          "output": "Sunny, 21 C"}])
    whole = client.responses.create(model=model, tools=[WEATHER], temperature=0, max_output_tokens=30, store=False,
                                    input=[{"role": "user", "content": ASK},
                                           {"type": "function_call", "call_id": call.call_id, "name": call.name,
                                            "arguments": call.arguments},
                                           {"type": "function_call_output", "call_id": call.call_id,
                                            "output": "Sunny, 21 C"}])
    assert follow.usage.input_tokens == whole.usage.input_tokens
    assert [i.type for i in follow.output] == [i.type for i in whole.output]
    assert follow.output_text == whole.output_text
