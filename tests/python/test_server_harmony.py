"""gpt-oss's harmony format through a real `folio serve` and the openai client.

The server runs the tiny random gpt-oss checkpoint (tests/data/tiny/gpt_oss,
MXFP4 experts, gpt-oss's own chat template). A random model writes no
harmony on its own, so a regex constraint makes it write a harmony answer
out of ordinary tokens (the same text a real gpt-oss writes with its control
tokens): the server reads the analysis channel into reasoning, the final
channel into content and a message to=functions.NAME into a tool call,
streamed and not, in chat completions and in Responses; and free random
output, control tokens and all, never shows a harmony marker."""
import json
import re

import openai
import pytest

from conftest import SOURCE_DIR, start_folio_server

TINY = SOURCE_DIR / "tests" / "data" / "tiny" / "gpt_oss"
ASK = [{"role": "user", "content": "Hi"}]
MARKERS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
# A short tool: the tiny model's context is 512 tokens of a 384-token vocabulary.
WEATHER = {"type": "function", "function": {
    "name": "sky", "description": "Sky.",
    "parameters": {"type": "object", "properties": {"c": {"type": "string"}}}}}
ANSWER = (r"<\|channel\|>analysis<\|message\|>[a-z]{1,6}( [a-z]{1,6}){0,3}<\|end\|>"
          r"<\|start\|>assistant<\|channel\|>final<\|message\|>[a-z]{1,6}( [a-z]{1,6}){0,3}")
CALL = (r"<\|channel\|>analysis<\|message\|>[a-z]{1,3}<\|end\|><\|start\|>assistant<\|channel\|>commentary "
        r"to=functions\.sky <\|constrain\|>json<\|message\|>\{\"c\": \"[a-z]{1,4}\"\}")
WORDS = re.compile(r"[a-z]{1,6}( [a-z]{1,6}){0,3}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "harmony", "--max-model-len", "512", "--kv-cache-memory", "64MiB",
                           model=str(TINY))
    yield s
    assert s.stop() == 0, s.log()


def client_of(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def chat(server, **request):
    c = client_of(server)
    request = {"messages": ASK, "temperature": 0, "max_tokens": 200, **request}
    return c.chat.completions.create(model=c.models.list().data[0].id, **request)


def no_markers(text):
    for m in MARKERS:
        assert m not in (text or ""), (m, text)


def test_analysis_is_reasoning_and_final_is_content_streamed_or_not(server):
    r = chat(server, reasoning_effort="high", extra_body={"guided_regex": ANSWER})
    m = r.choices[0].message
    assert WORDS.fullmatch(m.reasoning_content), m
    assert WORDS.fullmatch(m.content), m
    reasoning, content = "", ""
    for chunk in chat(server, stream=True, reasoning_effort="high", extra_body={"guided_regex": ANSWER}):
        for choice in chunk.choices:
            no_markers(choice.delta.content)
            no_markers(getattr(choice.delta, "reasoning_content", None))
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
            content += choice.delta.content or ""
    assert (reasoning, content) == (m.reasoning_content, m.content)


def test_a_message_to_a_function_is_a_tool_call(server):
    r = chat(server, tools=[WEATHER], extra_body={"guided_regex": CALL})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert not choice.message.content, choice
    call = choice.message.tool_calls[0]
    assert call.function.name == "sky"
    assert re.fullmatch(r"[a-z]{1,4}", json.loads(call.function.arguments)["c"])
    # The call and its reasoning go back into the history and render.
    history = ASK + [{"role": "assistant", "content": None, "reasoning_content": choice.message.reasoning_content,
                      "tool_calls": [call.model_dump()]},
                     {"role": "tool", "tool_call_id": call.id, "content": "{\"sky\": \"clear\"}"}]
    again = chat(server, messages=history, tools=[WEATHER],
                 extra_body={"guided_regex": r"<\|channel\|>final<\|message\|>[a-z]{1,3}"})
    assert re.fullmatch(r"[a-z]{1,3}", again.choices[0].message.content), again
    assert again.usage.prompt_tokens > r.usage.prompt_tokens + 20


def test_responses_have_a_reasoning_item(server):
    c = client_of(server)
    r = c.responses.create(model=c.models.list().data[0].id, input="Weather?", reasoning={"effort": "low"},
                           max_output_tokens=200, temperature=0, extra_body={"guided_regex": ANSWER})
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "message"], r.output
    assert WORDS.fullmatch(r.output[1].content[0].text)


def test_random_output_never_shows_a_marker(server):
    for seed in range(8):
        r = chat(server, temperature=1.0, seed=seed, max_tokens=48, tools=[WEATHER])
        m = r.choices[0].message
        no_markers(m.content)
        no_markers(m.reasoning_content)
        for call in m.tool_calls or []:
            no_markers(call.function.name)
            no_markers(call.function.arguments)


SKY = {"type": "function", "function": {
    "name": "sky", "description": "Sky.",
    "parameters": {"type": "object", "properties": {"c": {"type": "string", "maxLength": 4}}, "required": ["c"],
                   "additionalProperties": False}}}
SEA = {"type": "function", "function": {
    "name": "sea", "description": "Sea.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                   "additionalProperties": False}}}


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "sea"}}])
def test_a_forced_call_is_written_in_harmony_with_its_control_tokens(server, choice):
    # No regex here: the grammar forces the call, its markers as the control
    # tokens they are, and the random model's call comes back as a tool call
    # whose arguments fit the schema, streamed or not.
    r = chat(server, tools=[SKY, SEA], tool_choice=choice, max_tokens=300)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert not c.message.content, c
    [call] = c.message.tool_calls
    args = json.loads(call.function.arguments)
    if isinstance(choice, dict):
        assert call.function.name == "sea"
    if call.function.name == "sea":
        assert list(args) == ["n"] and isinstance(args["n"], int), args
    else:
        assert call.function.name == "sky" and list(args) == ["c"] and len(args["c"]) <= 4, args
    name, arguments = None, ""
    for chunk in chat(server, tools=[SKY, SEA], tool_choice=choice, max_tokens=300, stream=True):
        for delta in chunk.choices:
            no_markers(delta.delta.content)
            for tc in delta.delta.tool_calls or []:
                name = tc.function.name or name
                arguments += tc.function.arguments or ""
    assert (name, json.loads(arguments)) == (call.function.name, args)
