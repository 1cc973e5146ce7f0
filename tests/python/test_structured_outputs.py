"""Structured outputs against a real `folio serve`: the official openai
client's chat.completions.parse with Pydantic models, 32 JSON schemas
(nested objects, arrays with bounds, enums, anyOf, string patterns, required
fields) each validated by the jsonschema package, regex and choice through
vLLM's fields and their older guided_* names, llama-server's grammar and
json_schema, streaming, and 400s naming the problem for bad constraints while
the server goes on serving."""
import concurrent.futures as cf
import json
import re
from typing import List, Literal, Optional

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from conftest import start_folio_server

MODEL = "smollm2-135m-instruct-q4_1"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "structured", "--max-model-len", "2048", "--kv-cache-memory", "256MiB")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def post(server, path, body):
    return httpx.post(server.url + path, json=body, timeout=120)


def obj(properties, required=None, **extra):
    s = {"type": "object", "properties": properties, "required": list(properties) if required is None else required}
    s.update(extra)
    return s


NAME = {"type": "string", "minLength": 1, "maxLength": 24}
SHORT = {"type": "string", "maxLength": 16}
INT = {"type": "integer", "minimum": 0, "maximum": 1000}

SCHEMAS = {
    "person": obj({"name": NAME, "age": INT}),
    "person_optional_email": obj({"name": NAME, "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.com$"}},
                                 required=["name"]),
    "point": obj({"x": {"type": "number"}, "y": {"type": "number"}}),
    "flag": obj({"enabled": {"type": "boolean"}}),
    "color_enum": obj({"color": {"enum": ["red", "green", "blue"]}}),
    "status_const": obj({"status": {"const": "ok"}, "code": {"type": "integer", "minimum": 100, "maximum": 599}}),
    "tags_bounded": obj({"tags": {"type": "array", "items": SHORT, "minItems": 2, "maxItems": 4}}),
    "numbers_exact": obj({"values": {"type": "array", "items": {"type": "integer", "minimum": -9, "maximum": 9},
                                     "minItems": 3, "maxItems": 3}}),
    "nested_address": obj({"name": NAME, "address": obj({"street": NAME, "city": NAME, "zip": {
        "type": "string", "pattern": "^[0-9]{5}$"}})}),
    "deep_nesting": obj({"a": obj({"b": obj({"c": obj({"d": {"type": "integer"}})})})}),
    "array_of_objects": obj({"items": {"type": "array", "minItems": 1, "maxItems": 3,
                                       "items": obj({"id": INT, "label": SHORT})}}),
    "any_of_scalar": obj({"value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 10}]}}),
    "any_of_objects": obj({"shape": {"anyOf": [obj({"kind": {"const": "circle"}, "radius": INT}),
                                               obj({"kind": {"const": "square"}, "side": INT})]}}),
    "nullable": obj({"note": {"anyOf": [SHORT, {"type": "null"}]}}),
    "type_list": obj({"v": {"type": ["integer", "boolean"]}}),
    "date_pattern": obj({"date": {"type": "string", "pattern": "^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9])$"}}),
    "phone_pattern": obj({"phone": {"type": "string", "pattern": "^\\+[0-9]{2} [0-9]{3} [0-9]{4}$"}}),
    "integer_range": obj({"percent": {"type": "integer", "minimum": 0, "maximum": 100}}),
    "string_lengths": obj({"code": {"type": "string", "minLength": 3, "maxLength": 5}}),
    "top_level_array": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                        "minItems": 1, "maxItems": 5},
    "top_level_enum": {"enum": ["yes", "no", "maybe"]},
    "defs_ref": {"$defs": {"Item": obj({"name": SHORT, "qty": INT})},
                 **obj({"first": {"$ref": "#/$defs/Item"}, "second": {"$ref": "#/$defs/Item"}})},
    "matrix": obj({"rows": {"type": "array", "minItems": 2, "maxItems": 2, "items": {
        "type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer", "minimum": 0, "maximum": 9}}}}),
    "enum_array": obj({"days": {"type": "array", "minItems": 1, "maxItems": 3, "uniqueItems": False,
                                "items": {"enum": ["mon", "tue", "wed", "thu", "fri"]}}}),
    "mixed_required": obj({"id": INT, "title": NAME, "done": {"type": "boolean"}, "priority": {
        "enum": ["low", "medium", "high"]}}, required=["id", "title"]),
    "no_additional": obj({"k": SHORT}, additionalProperties=False),
    "boolean_matrix": obj({"grid": {"type": "array", "minItems": 1, "maxItems": 2,
                                    "items": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "boolean"}}}}),
    "recipe": obj({"title": NAME, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
                   "ingredients": {"type": "array", "minItems": 1, "maxItems": 3,
                                   "items": obj({"item": SHORT, "grams": INT})}}),
    "event": obj({"name": NAME, "when": obj({"year": {"type": "integer", "minimum": 2000, "maximum": 2100},
                                             "month": {"type": "integer", "minimum": 1, "maximum": 12}}),
                  "attendees": {"type": "array", "items": NAME, "maxItems": 2}}),
    "one_of_like": obj({"result": {"anyOf": [obj({"ok": {"type": "boolean"}}), obj({"error": SHORT})]}}),
    "float_bounds": obj({"ratio": {"type": "number", "minimum": 0, "maximum": 1}}),
    "identifier": obj({"ident": {"type": "string", "pattern": "^[A-Z][a-z]{2,6}_[0-9]{2}$"}}),
}


def schema_prompt(name, schema):
    return [{"role": "system", "content": "You answer with JSON only."},
            {"role": "user", "content": f"Give one example '{name}' as JSON that follows this schema: {json.dumps(schema)}"}]


def test_at_least_thirty_schemas():
    assert len(SCHEMAS) >= 30


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_outputs_validate(client, name):
    schema = SCHEMAS[name]
    r = client.chat.completions.create(
        model=MODEL, messages=schema_prompt(name, schema), max_tokens=400, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}})
    choice = r.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    jsonschema.validate(json.loads(choice.message.content), schema)


@pytest.mark.parametrize("name", ["person", "tags_bounded", "any_of_objects", "defs_ref"])
def test_json_schema_sampled_outputs_validate(client, name):
    """Sampling draws only what the mask allows, too: several seeds, each valid."""
    schema = SCHEMAS[name]
    for seed in range(3):
        r = client.chat.completions.create(
            model=MODEL, messages=schema_prompt(name, schema), max_tokens=400, temperature=0.9, seed=seed,
            response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema}})
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)


class Address(BaseModel):
    city: str = Field(max_length=20)
    country: str = Field(max_length=20)


class Person(BaseModel):
    name: str = Field(max_length=20)
    age: int = Field(ge=0, le=120)
    role: Literal["admin", "user", "guest"]
    address: Address
    nicknames: List[str] = Field(max_length=2)
    manager: Optional[str] = Field(default=None, max_length=20)


def test_openai_parse_with_a_pydantic_model(client):
    r = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Invent a person who lives in Paris."}],
        response_format=Person, max_tokens=400, temperature=0)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "stop", msg.content
    assert isinstance(msg.parsed, Person)
    assert msg.parsed.role in ("admin", "user", "guest")
    # What parse() sent is the strict JSON schema of the model; the output validates against it.
    jsonschema.validate(json.loads(msg.content), openai.lib._pydantic.to_strict_json_schema(Person))


def check_json_object(text, finish_reason):
    """Any JSON object is unbounded (free whitespace, strings of any length), so
    a small model may run to max_tokens: then the text must still start one."""
    if finish_reason == "stop":
        assert isinstance(json.loads(text), dict), text
    else:
        assert finish_reason == "length" and text.lstrip().startswith("{"), text
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)


def test_json_object_on_chat_and_completions(client):
    stops = 0
    for seed in range(4):
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "A cat as a short JSON object."}],
                                           max_tokens=300, temperature=0.7, seed=seed, response_format={"type": "json_object"})
        check_json_object(r.choices[0].message.content, r.choices[0].finish_reason)
        stops += r.choices[0].finish_reason == "stop"
        r = client.completions.create(model=MODEL, prompt="A JSON object describing a dog:", max_tokens=300,
                                      temperature=0.7, seed=seed, extra_body={"response_format": {"type": "json_object"}})
        check_json_object(r.choices[0].text, r.choices[0].finish_reason)
        stops += r.choices[0].finish_reason == "stop"
    assert stops > 0


def test_json_object_is_an_object_never_an_array(server):
    """JSON mode promises an object: prompts that lead a model to an array
    (greedy SmolLM2 wrote [3, 2, 1] and ["c", "d"] under any-JSON) give one."""
    for prompt in ("The JSON array [1, 2, 3] reversed is ", 'x = ["a", "b"]\ny = '):
        r = post(server, "/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 40, "temperature": 0,
                                             "response_format": {"type": "json_object"}})
        assert r.status_code == 200, r.text
        check_json_object(r.json()["choices"][0]["text"], r.json()["choices"][0]["finish_reason"])


def test_json_object_with_a_schema_follows_it(server):
    """llama-server's extension: {"type": "json_object", "schema": {...}} is the schema."""
    schema = {"type": "object", "properties": {"reversed": {"type": "array", "items": {"type": "integer"},
                                                            "maxItems": 5}},
              "required": ["reversed"], "additionalProperties": False}
    for path, base in (("/v1/completions", {"prompt": "The JSON array [1, 2, 3] reversed is "}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Reverse [1, 2, 3]."}]})):
        r = post(server, path, {"model": MODEL, "max_tokens": 60, "temperature": 0, **base,
                                "response_format": {"type": "json_object", "schema": schema}})
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        text = choice["text"] if "text" in choice else choice["message"]["content"]
        assert choice["finish_reason"] == "stop", text
        jsonschema.validate(json.loads(text), schema)


def test_completions_json_schema_and_streaming(server):
    schema = SCHEMAS["recipe"]
    body = {"model": MODEL, "prompt": "A recipe as JSON:", "max_tokens": 400, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "recipe", "schema": schema}}}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    whole = r.json()["choices"][0]["text"]
    jsonschema.validate(json.loads(whole), schema)
    # Streamed, the deltas join to the same text.
    text, finish = "", None
    with httpx.stream("POST", server.url + "/v1/completions", json={**body, "stream": True}, timeout=120) as s:
        for line in s.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                c = json.loads(line[6:])["choices"][0]
                text += c["text"]
                finish = c.get("finish_reason") or finish
    assert text == whole and finish == "stop"


REGEX = r"[A-Z]{2}-[0-9]{3,4}"


@pytest.mark.parametrize("body", [
    {"structured_outputs": {"regex": REGEX}},
    {"guided_regex": REGEX},
])
def test_regex(server, body):
    r = post(server, "/v1/chat/completions", {"model": MODEL, "max_tokens": 30, "temperature": 0,
                                              "messages": [{"role": "user", "content": "A licence plate:"}], **body})
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert re.fullmatch(REGEX, c["message"]["content"]), c
    assert c["finish_reason"] == "stop"


CHOICES = ["positive", "negative", "neutral"]


@pytest.mark.parametrize("body", [
    {"structured_outputs": {"choice": CHOICES}},
    {"guided_choice": CHOICES},
])
def test_choice(server, body):
    for temperature in (0, 1.0):
        r = post(server, "/v1/chat/completions", {
            "model": MODEL, "max_tokens": 10, "temperature": temperature, "seed": 3,
            "messages": [{"role": "user", "content": "Sentiment of 'I love it':"}], **body})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] in CHOICES


GBNF = 'root ::= "(" item (", " item)* ")"\nitem ::= [a-z]+ | [0-9]+'


@pytest.mark.parametrize("body", [
    {"grammar": GBNF},                               # llama-server
    {"structured_outputs": {"grammar": GBNF}},       # vLLM
    {"guided_grammar": GBNF},
])
def test_grammar(server, body):
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "A tuple:", "max_tokens": 40, "temperature": 0,
                                         **body})
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["text"]
    if r.json()["choices"][0]["finish_reason"] == "stop":
        assert re.fullmatch(r"\((?:[a-z]+|[0-9]+)(?:, (?:[a-z]+|[0-9]+))*\)", text), text
    else:  # cut by max_tokens: a prefix of the language
        assert re.fullmatch(r"\((?:[a-z]+|[0-9]+)(?:, (?:[a-z]*|[0-9]*))*[,\s]*", text), text


@pytest.mark.parametrize("body", [
    {"json_schema": SCHEMAS["point"]},                           # llama-server
    {"structured_outputs": {"json": SCHEMAS["point"]}},          # vLLM
    {"guided_json": json.dumps(SCHEMAS["point"])},               # as text
])
def test_json_schema_other_fields(server, body):
    r = post(server, "/v1/chat/completions", {"model": MODEL, "max_tokens": 100, "temperature": 0,
                                              "messages": [{"role": "user", "content": "A point:"}], **body})
    assert r.status_code == 200, r.text
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), SCHEMAS["point"])


@pytest.mark.parametrize("body, param, words", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/Nope"}}}},
     "response_format", ["Nope"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
      "properties": {"a": {"type": "string", "pattern": "(unclosed"}}}}}}, "response_format", ["json_schema", "parenthesis"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format", ["schema"]),
    ({"response_format": {"type": "xml"}}, "response_format", ["xml"]),
    ({"structured_outputs": {"regex": "(ab"}}, "structured_outputs.regex", ["regex"]),
    ({"guided_choice": []}, "guided_choice", ["non-empty"]),
    ({"grammar": "root ::= missing_rule"}, "grammar", ["missing_rule"]),
    ({"guided_json": "{not json"}, "guided_json", ["JSON schema"]),
    ({"guided_regex": "a+", "response_format": {"type": "json_object"}}, "guided_regex", ["only one"]),
])
def test_bad_constraints_are_400_naming_the_problem(server, body, param, words):
    for path, base in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/completions", {"prompt": "hi"})):
        r = post(server, path, {"model": MODEL, "max_tokens": 5, **base, **body})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == param, err
        for w in words:
            assert w in err["message"], err
    # The server keeps serving.
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 3})
    assert r.status_code == 200, r.text


def test_unconstrained_requests_are_unchanged_beside_constrained_ones(server):
    """A plain greedy request gives the same text alone and while a constrained
    one runs beside it (its mask never reaches other rows)."""
    plain = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    alone = post(server, "/v1/completions", plain).json()["choices"][0]["text"]
    with cf.ThreadPoolExecutor(4) as pool:
        constrained = [pool.submit(post, server, "/v1/completions", {
            "model": MODEL, "prompt": "JSON:", "max_tokens": 200, "temperature": 0,
            "response_format": {"type": "json_object"}}) for _ in range(3)]
        beside = pool.submit(post, server, "/v1/completions", plain)
        assert beside.result().json()["choices"][0]["text"] == alone
        for f in constrained:
            assert f.result().status_code == 200
