"""Reasoning and the other chat fields against a real `folio serve`.

Reasoning: no packaged model thinks on its own, so SmolLM2 is made to by a
regex constraint (real tokens from a real model), and the server splits its
<think> text into reasoning_content, streamed and not; under DeepSeek-R1's
template (--chat-template) the prompt opens <think> and the output starts
inside it. Qwen3's template takes enable_thinking from --chat-template-kwargs,
which a request overrides. Then priority (--scheduling-policy), cache_salt
and return_tokens_as_token_ids."""
import httpx
import openai
import pytest

from conftest import SOURCE_DIR, start_folio_server

TEMPLATES = SOURCE_DIR / "tests" / "data" / "chat_templates"
ASK = [{"role": "user", "content": "What is two plus two?"}]


@pytest.fixture(scope="module")
def thinking(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "fields-think", "--max-model-len", "2048", "--kv-cache-memory", "256MiB",
                           "--reasoning-parser", "think", "--scheduling-policy", "priority",
                           "--allowed-origins", "http://page.example,http://other.example")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "fields-deepseek", "--max-model-len", "2048", "--kv-cache-memory",
                           "256MiB", "--chat-template", str(TEMPLATES / "deepseek-r1-distill-qwen.jinja"))
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "fields-qwen3", "--max-model-len", "2048", "--kv-cache-memory", "256MiB",
                           "--chat-template", str(TEMPLATES / "qwen3-0.6b.jinja"),
                           "--chat-template-kwargs", '{"enable_thinking": false}')
    yield s
    assert s.stop() == 0, s.log()


def client_of(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def chat(server, **request):
    request = {"messages": ASK, "temperature": 0, "max_tokens": 60, **request}
    return client_of(server).chat.completions.create(model=client_of(server).models.list().data[0].id, **request)


def streamed(server, **request):
    reasoning, content, finish = "", "", None
    for chunk in chat(server, stream=True, **request):
        if chunk.choices:
            d = chunk.choices[0].delta
            reasoning += getattr(d, "reasoning_content", None) or ""
            content += d.content or ""
            finish = chunk.choices[0].finish_reason or finish
    return reasoning, content, finish


def think_regex(opening=True):
    return {"structured_outputs": {"regex": ("<think>" if opening else "") + r"[a-z ]{3,30}</think>[A-Za-z ]{3,30}"}}


def test_thinking_goes_to_reasoning_content_and_the_answer_to_content(thinking):
    body = think_regex()
    r = chat(thinking, extra_body=body).choices[0]
    reasoning, content = r.message.reasoning_content, r.message.content
    assert reasoning and content, r
    assert "<think>" not in reasoning + content and "</think>" not in reasoning + content, r
    s_reasoning, s_content, finish = streamed(thinking, extra_body=body)
    assert (s_reasoning, s_content) == (reasoning, content)
    assert finish == r.finish_reason


def test_a_template_that_opens_thinking_starts_the_output_inside_it(deepseek):
    shown = httpx.post(deepseek.url + "/tokenize", timeout=60, json={"messages": ASK, "return_token_strs": True}).json()
    assert "".join(shown["token_strs"]).endswith("<think>\n"), shown["token_strs"][-6:]
    r = chat(deepseek, extra_body=think_regex(opening=False)).choices[0]
    assert r.message.reasoning_content and r.message.content, r
    assert "</think>" not in r.message.reasoning_content + r.message.content
    assert streamed(deepseek, extra_body=think_regex(opening=False))[:2] == (r.message.reasoning_content,
                                                                            r.message.content)


def test_template_kwargs_default_from_the_flag_and_a_request_overrides_them(qwen3):
    def prompt_end(**fields):
        shown = httpx.post(qwen3.url + "/tokenize", timeout=60,
                           json={"messages": ASK, "return_token_strs": True, **fields}).json()
        return "".join(shown["token_strs"])[-40:]
    assert prompt_end().endswith("assistant\n<think>\n\n</think>\n\n")  # enable_thinking false, from the flag
    assert prompt_end(chat_template_kwargs={"enable_thinking": True}).endswith("assistant\n")
    # Qwen3's template thinks in <think>: the parser is on by default there.
    r = chat(qwen3, extra_body={**think_regex(), "chat_template_kwargs": {"enable_thinking": True}}).choices[0]
    assert r.message.reasoning_content and r.message.content, r


def test_priority_needs_the_priority_policy(thinking, qwen3):
    assert chat(thinking, max_tokens=2, extra_body={"priority": -5}).choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError) as e:
        chat(qwen3, max_tokens=2, extra_body={"priority": 3})
    assert "--scheduling-policy priority" in str(e.value)
    assert chat(qwen3, max_tokens=2, extra_body={"priority": 0}).choices[0].finish_reason == "length"


def test_cache_salt_keeps_prefixes_apart(thinking):
    long_ask = [{"role": "user", "content": "Tell me about the sea. " * 40}]
    def cached(salt):
        body = {"cache_salt": salt}
        r = client_of(thinking).chat.completions.create(model="smollm2-135m-instruct-q4_1", messages=long_ask,
                                                        max_tokens=1, extra_body=body)
        return r.usage.prompt_tokens_details.cached_tokens
    cached("tenant-a")
    assert cached("tenant-a") > 0       # the same salt shares the prefix
    assert cached("tenant-b") == 0      # another salt does not
    with pytest.raises(openai.BadRequestError):
        cached("")


def test_tokens_can_be_named_by_their_ids(thinking):
    r = chat(thinking, max_tokens=3, logprobs=True, top_logprobs=2,
             extra_body={"return_tokens_as_token_ids": True}).choices[0]
    for t in r.logprobs.content:
        assert t.token.startswith("token_id:") and int(t.token.split(":")[1]) >= 0, t
        assert all(alt.token.startswith("token_id:") for alt in t.top_logprobs)


def test_stop_reason_names_what_stopped_and_the_stop_string_can_stay(thinking):
    c = client_of(thinking)
    model = c.models.list().data[0].id
    plain = c.completions.create(model=model, prompt="The capital of France is", max_tokens=30, temperature=0)
    assert plain.choices[0].model_extra["stop_reason"] is None  # its length or its end token
    text = plain.choices[0].text
    stop = text.strip()[1:3]  # a string the greedy answer holds
    cut = c.completions.create(model=model, prompt="The capital of France is", max_tokens=30, temperature=0,
                               stop=[stop])
    assert cut.choices[0].model_extra["stop_reason"] == stop and stop not in cut.choices[0].text
    kept = c.completions.create(model=model, prompt="The capital of France is", max_tokens=30, temperature=0,
                                stop=[stop], extra_body={"include_stop_str_in_output": True})
    assert kept.choices[0].text == cut.choices[0].text + stop
    ids = httpx.post(thinking.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    by_token = c.completions.create(model=model, prompt="The capital of France is", max_tokens=30, temperature=0,
                                    extra_body={"stop_token_ids": [ids[2]]})
    assert by_token.choices[0].model_extra["stop_reason"] == ids[2]


def test_special_tokens_can_be_kept_in_the_text(thinking):
    im_end = httpx.post(thinking.url + "/tokenize", json={"prompt": "<|im_end|>", "add_special_tokens": False}).json()
    assert len(im_end["tokens"]) == 1
    def answer(**extra):  # the end token, made likely and not an end
        body = {"ignore_eos": True, "logit_bias": {str(im_end["tokens"][0]): 100}, **extra}
        return chat(thinking, max_tokens=3, extra_body=body).choices[0].message.content
    assert answer() == ""
    assert answer(skip_special_tokens=False) == "<|im_end|>" * 3


def test_continue_final_message_goes_on_with_the_assistants_text(thinking):
    history = [{"role": "user", "content": "Name a colour."},
               {"role": "assistant", "content": "My favourite colour is"}]
    shown = httpx.post(thinking.url + "/tokenize", timeout=60, json={
        "messages": history, "continue_final_message": True, "add_generation_prompt": False,
        "return_token_strs": True}).json()
    assert "".join(shown["token_strs"]).endswith("<|im_start|>assistant\nMy favourite colour is"), shown
    r = chat(thinking, messages=history, max_tokens=8,
             extra_body={"continue_final_message": True, "add_generation_prompt": False}).choices[0]
    assert r.message.content and r.finish_reason in ("stop", "length")
    for fields in [{"continue_final_message": True},  # with a generation prompt
                   {"continue_final_message": True, "add_generation_prompt": False,
                    "messages": [{"role": "user", "content": "hi"}]}]:
        with pytest.raises(openai.BadRequestError):
            chat(thinking, max_tokens=2, extra_body=fields, **({"messages": history} if "messages" not in fields
                                                               else {}))


def test_cors_lets_the_allowed_origins_in(thinking, qwen3):
    url = thinking.url + "/v1/chat/completions"
    pre = httpx.options(url, headers={"Origin": "http://page.example", "Access-Control-Request-Method": "POST",
                                      "Access-Control-Request-Headers": "authorization, content-type"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == "http://page.example"
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert pre.headers["access-control-allow-headers"] == "authorization, content-type"
    body = {"messages": ASK, "max_tokens": 2}
    for stream in (False, True):
        r = httpx.post(url, json={**body, "stream": stream}, headers={"Origin": "http://other.example"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "http://other.example"
    refused = httpx.post(url, json={**body, "n": 0}, headers={"Origin": "http://page.example"})
    assert refused.status_code == 400 and refused.headers["access-control-allow-origin"] == "http://page.example"
    assert "access-control-allow-origin" not in httpx.post(url, json=body, headers={"Origin": "http://evil.example"}).headers
    # Off unless asked for.
    assert "access-control-allow-origin" not in httpx.post(qwen3.url + "/v1/chat/completions", json=body,
                                                           headers={"Origin": "http://page.example"}).headers


def test_min_tokens_holds_the_end_token_back(thinking):
    im_end = httpx.post(thinking.url + "/tokenize", json={"prompt": "<|im_end|>", "add_special_tokens": False}).json()
    body = {"logit_bias": {str(im_end["tokens"][0]): 100}}  # the end token, made all but certain
    assert chat(thinking, extra_body=body).usage.completion_tokens == 1
    for stream in (False, True):
        r = chat(thinking, max_tokens=20, extra_body={**body, "min_tokens": 5}, stream=stream,
                 **({"stream_options": {"include_usage": True}} if stream else {}))
        if stream:
            chunks = list(r)
            usage, finish = chunks[-1].usage, [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        else:
            usage, finish = r.usage, r.choices[0].finish_reason
        assert usage.completion_tokens == 6 and finish == "stop", (usage, finish)
    for bad in ({"min_tokens": -1}, {"min_tokens": 30}, {"min_tokens": "5"}):  # 30 > max_tokens
        with pytest.raises(openai.BadRequestError) as e:
            chat(thinking, max_tokens=20, extra_body=bad)
        assert "min_tokens" in str(e.value)


def test_prompt_logprobs_score_the_prompt(thinking):
    c = client_of(thinking)
    model = c.models.list().data[0].id
    prompt = "The capital of France is Paris. The capital of Italy is"
    ids = httpx.post(thinking.url + "/tokenize", json={"prompt": prompt}).json()["tokens"]
    r = c.completions.create(model=model, prompt=prompt, max_tokens=2, temperature=0,
                             extra_body={"prompt_logprobs": 2})
    scored = r.choices[0].model_extra["prompt_logprobs"]
    assert len(scored) == len(ids) and scored[0] is None
    for token, entry in zip(ids[1:], scored[1:]):
        own = entry[str(token)]
        assert own["logprob"] <= 0 and own["rank"] >= 1 and isinstance(own["decoded_token"], str)
        assert len(entry) in (2, 3) and {1, 2} <= {v["rank"] for v in entry.values()}, entry  # with the top 2
    # " Paris" after "The capital of France is" is the model's own choice.
    paris = ids.index(httpx.post(thinking.url + "/tokenize", json={"prompt": " Paris", "add_special_tokens": False})
                      .json()["tokens"][0])
    assert scored[paris][str(ids[paris])]["rank"] == 1
    # Echo with logprobs: the prompt's tokens lead the legacy logprobs, the first without one.
    e = c.completions.create(model=model, prompt=prompt, max_tokens=2, temperature=0, echo=True, logprobs=1)
    lp = e.choices[0].logprobs
    assert e.choices[0].text.startswith(prompt)
    assert len(lp.tokens) == len(ids) + 2 and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    for i in range(1, len(ids)):
        assert abs(lp.token_logprobs[i] - scored[i][str(ids[i])]["logprob"]) < 1e-6
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    assert "".join(lp.tokens[:len(ids)]).endswith(prompt)
    # Chat: for the response, as vLLM returns it.
    chat_r = chat(thinking, max_tokens=2, extra_body={"prompt_logprobs": 0})
    chat_scored = chat_r.model_extra["prompt_logprobs"]
    assert chat_scored[0] is None and all(len(e) == 1 for e in chat_scored[1:])
    assert len(chat_scored) == chat_r.usage.prompt_tokens
    for bad in ({"prompt_logprobs": -1}, {"prompt_logprobs": 21}):
        with pytest.raises(openai.BadRequestError) as err:
            chat(thinking, max_tokens=2, extra_body=bad)
        assert "prompt_logprobs" in str(err.value)
    with pytest.raises(openai.BadRequestError) as err:
        chat(thinking, max_tokens=2, stream=True, extra_body={"prompt_logprobs": 1})
    assert "without stream" in str(err.value)


def test_a_reasoning_budget_forces_the_end_of_thinking(deepseek):
    """max_reasoning_tokens (and Anthropic's thinking.budget_tokens): after
    that many thinking tokens the tokens of </think> are forced, and the
    answer follows. DeepSeek-R1's template opens <think> in the prompt, so
    the output starts inside it."""
    close = httpx.post(deepseek.url + "/tokenize", json={"prompt": "</think>", "add_special_tokens": False}).json()
    close = [int(t) for t in close["tokens"]]
    def answer(budget, **extra):
        body = {"logprobs": True, "extra_body": {"return_tokens_as_token_ids": True, "max_reasoning_tokens": budget},
                **extra}
        r = chat(deepseek, max_tokens=40, **body).choices[0]
        ids = [int(t.token.split(":")[1]) for t in r.logprobs.content]
        return r, ids
    free = chat(deepseek, max_tokens=40).choices[0]
    assert free.message.reasoning_content and not free.message.content  # left alone, it thinks past 40 tokens
    for budget in (5, 0):
        r, ids = answer(budget)
        assert ids[budget:budget + len(close)] == close, (budget, ids)
        assert all(t.logprob == 0.0 for t in r.logprobs.content[budget:budget + len(close)])  # forced: certain
        assert r.message.content, r  # the answer follows
        assert (r.message.reasoning_content or "") == (free.message.reasoning_content[:len(r.message.reasoning_content
                                                                                        or "")])
        s_reasoning, s_content, _ = streamed(deepseek, max_tokens=40, extra_body={"max_reasoning_tokens": budget})
        assert (s_reasoning, s_content) == (r.message.reasoning_content or "", r.message.content)
    # Anthropic's thinking.budget_tokens is the same bound.
    m = httpx.post(deepseek.url + "/v1/messages", timeout=120, json={
        "messages": ASK, "max_tokens": 40, "temperature": 0,
        "thinking": {"type": "enabled", "budget_tokens": 5}}).json()
    r, _ = answer(5)
    assert [b["type"] for b in m["content"]][:2] == ["thinking", "text"], m
    assert (m["content"][0]["thinking"], m["content"][1]["text"]) == (r.message.reasoning_content, r.message.content)
    # What cannot be honoured is a 400 that names the field.
    for request in [{"extra_body": {"max_reasoning_tokens": -1}},
                    {"extra_body": {"max_reasoning_tokens": 5, "structured_outputs": {"regex": "[a-z]+"}}},
                    {"reasoning_effort": "low"}]:  # this template takes no effort
        with pytest.raises(openai.BadRequestError) as e:
            chat(deepseek, max_tokens=4, **request)
        assert "reasoning" in str(e.value), e.value
    c = client_of(deepseek)
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model=c.models.list().data[0].id, prompt="Hi", max_tokens=2,
                             extra_body={"max_reasoning_tokens": 3})


# Hermes-style tool calls (it names <tool_call>), content used as a string.
STRICT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if '</think>' in m.content %}{% endif %}"
                   "{{ m.content }}{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }}</tool_call>"
                   "{% endfor %}<|im_end|>\n{% endfor %}<|im_start|>assistant\n")


def test_a_tool_call_only_turn_reaches_a_strict_template_as_empty_text(tmp_path_factory):
    """The agent loop's second request: an assistant turn of tool calls only
    (content null) and the tool's result, under a template that uses content
    as a string (`in`, as Qwen3's as llama.cpp ships it does): 200, and the
    turn is rendered with empty text, through the openai client and raw HTTP."""
    path = tmp_path_factory.mktemp("strict") / "strict.jinja"
    path.write_text(STRICT_TEMPLATE)
    s = start_folio_server(tmp_path_factory, "fields-strict", "--max-model-len", "1024", "--kv-cache-memory", "64MiB",
                           "--chat-template", str(path))
    try:
        tools = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]
        history = [{"role": "user", "content": "Weather?"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
        r = chat(s, messages=history, tools=tools, max_tokens=4)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
        shown = httpx.post(s.url + "/tokenize", timeout=60, json={
            "messages": [{k: v for k, v in m.items() if not (k == "content" and v is None)} for m in history],
            "tools": tools, "return_token_strs": True}).json()
        assert ("<|im_start|>assistant\n<tool_call>get</tool_call><|im_end|>\n<|im_start|>tool\nsunny<|im_end|>"
                in "".join(shown["token_strs"])), shown["token_strs"]
    finally:
        assert s.stop() == 0, s.log()
