"""`folio serve` through the official openai client and raw HTTP: completions
and chat, streamed and not, usage, n and prompt lists, stop strings, logprobs,
seeds, UTF-8 safety of the stream, echo, /tokenize and /metrics.

One server (SmolLM2) serves the whole file; the tests run one at a time, so
the metrics deltas they read are their own."""
import json

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import start_folio_server

MODEL = "smollm2-135m-instruct-q4_1"
PROMPT = "The capital of France is"
STORY = "Once upon a time, in a small village by the sea,"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "serve", "--max-model-len", "1024", "--kv-cache-memory", "128MiB")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def post(server, path, body):
    return httpx.post(server.url + path, json=body, timeout=60)


def tokenize(server, **body):
    r = post(server, "/tokenize", body)
    assert r.status_code == 200, r.text
    return r.json()


def sse_events(server, path, body):
    """The data of every server-sent event, each decoded strictly as UTF-8."""
    events = []
    with httpx.stream("POST", server.url + path, json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read()
    for block in raw.split(b"\n\n"):
        if not block:
            continue
        assert block.startswith(b"data: "), block
        events.append(block[len(b"data: "):].decode("utf-8", errors="strict"))
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def metric_samples(server):
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_health_version_models(server, client):
    assert httpx.get(server.url + "/health").status_code == 200
    v = httpx.get(server.url + "/version").json()
    assert v["version"] and "commit" in v
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert models[0].object == "model"
    assert client.models.retrieve(MODEL).id == MODEL


def test_completion_usage_matches_tokenize(server, client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=7, temperature=0, extra_body={"ignore_eos": True})
    assert r.object == "text_completion" and r.id.startswith("cmpl-") and r.model == MODEL
    assert len(r.choices) == 1 and r.choices[0].index == 0
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].text.strip()
    assert r.usage.prompt_tokens == tokenize(server, prompt=PROMPT)["count"]
    assert r.usage.completion_tokens == 7
    assert r.usage.total_tokens == r.usage.prompt_tokens + 7
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    # Without max_tokens a completion stops at OpenAI's default of 16.
    r = client.completions.create(model=MODEL, prompt=PROMPT, temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 16


def test_cached_tokens_reported_for_a_repeated_prompt(server, client):
    prompt = STORY + " there lived an old fisherman who had a small boat, a large and loyal dog, and a garden full of roses."
    n = tokenize(server, prompt=prompt)["count"]
    assert n > 32
    client.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0)
    again = client.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert 16 <= cached < n and cached % 16 == 0  # whole 16-token blocks from the prefix cache
    assert again.usage.prompt_tokens == n


def test_chat_completion_and_usage(server, client):
    messages = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Say hello."}]
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    msg = r.choices[0].message
    assert msg.role == "assistant" and msg.content
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == tokenize(server, messages=messages)["count"]
    assert 0 < r.usage.completion_tokens <= 12
    # Text parts are joined before the template renders them: same prompt.
    parts = [messages[0], {"role": "user", "content": [{"type": "text", "text": "Say hello."}]}]
    r2 = client.chat.completions.create(model=MODEL, messages=parts, max_tokens=12, temperature=0)
    assert r2.choices[0].message.content == msg.content
    assert r2.usage.prompt_tokens == r.usage.prompt_tokens
    # max_completion_tokens is the newer name for the same limit.
    r3 = client.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=3, temperature=0,
                                        extra_body={"ignore_eos": True})
    assert r3.usage.completion_tokens == 3 and r3.choices[0].finish_reason == "length"


def test_chat_finishes_with_stop_at_end_of_turn(client):
    # Without max_tokens a chat completion runs until the model ends its turn.
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say hi"}], temperature=0)
    assert r.choices[0].finish_reason == "stop"
    assert 0 < r.usage.completion_tokens < 200


def test_completion_stream_equals_non_stream(server, client):
    body = dict(model=MODEL, prompt=STORY, max_tokens=24, temperature=0)
    full = client.completions.create(**body)
    chunks = list(client.completions.create(**body, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full.choices[0].text
    ids = {c.id for c in chunks}
    assert len(ids) == 1 and ids.pop().startswith("cmpl-")
    assert all(c.object == "text_completion" and c.model == MODEL and c.created > 0 for c in chunks)
    with_choices = [c for c in chunks if c.choices]
    assert all(c.choices[0].finish_reason is None for c in with_choices[:-1])
    assert with_choices[-1].choices[0].finish_reason == full.choices[0].finish_reason == "length"
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.model_dump() == full.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])
    # Without include_usage there is no usage chunk.
    plain = list(client.completions.create(**body, stream=True))
    assert all(c.choices and c.usage is None for c in plain)
    assert "".join(c.choices[0].text for c in plain) == text


def test_chat_stream_equals_non_stream(server, client):
    body = dict(model=MODEL, messages=[{"role": "user", "content": "Write a haiku about rain."}], max_tokens=24,
                temperature=0)
    full = client.chat.completions.create(**body)
    chunks = list(client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == full.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_stop_string_straddling_tokens_is_never_emitted(server, client):
    base = client.completions.create(model=MODEL, prompt=STORY, max_tokens=40, temperature=0, logprobs=0)
    tokens, text = base.choices[0].logprobs.tokens, base.choices[0].text
    assert "".join(tokens) == text
    # A stop string made of the end of one token and the start of the next.
    stop = None
    for k in range(2, len(tokens) - 1):
        a, b = tokens[k], tokens[k + 1]
        if len(a) >= 2 and len(b) >= 2 and a.isascii() and b.isascii() and (a[-2:] + b[:2]).strip():
            stop = a[-2:] + b[:2]
            break
    assert stop is not None, tokens
    expected = text[:text.find(stop)]
    r = client.completions.create(model=MODEL, prompt=STORY, max_tokens=40, temperature=0, stop=[stop, "zzzqqq"])
    assert r.choices[0].text == expected and r.choices[0].finish_reason == "stop"
    chunks = list(client.completions.create(model=MODEL, prompt=STORY, max_tokens=40, temperature=0, stop=stop,
                                            stream=True))
    streamed = [c.choices[0].text for c in chunks]
    assert "".join(streamed) == expected
    assert chunks[-1].choices[0].finish_reason == "stop"
    # The same for chat.
    msgs = [{"role": "user", "content": "Tell me a story about a dragon."}]
    full = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=30, temperature=0).choices[0]
    words = full.message.content.split(" ")
    assert len(words) > 4
    stop = words[2][-2:] + " " + words[3][:2]
    cut = full.message.content[:full.message.content.find(stop)]
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=30, temperature=0, stop=stop)
    assert r.choices[0].message.content == cut and r.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=30, temperature=0, stop=stop,
                                                 stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == cut


def test_n_and_prompt_lists_index_prompt_major(server, client):
    prompts = [PROMPT, "My favourite colour is"]
    single = [client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0).choices[0].text
              for p in prompts]
    r = client.completions.create(model=MODEL, prompt=prompts, n=2, max_tokens=6, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert [c.text for c in r.choices] == [single[0], single[0], single[1], single[1]]
    counts = [tokenize(server, prompt=p)["count"] for p in prompts]
    assert r.usage.prompt_tokens == sum(counts)
    assert r.usage.completion_tokens == 4 * 6 or r.usage.completion_tokens <= 24
    # Streamed: chunks of the four choices interleave; grouped by index they match.
    texts = {}
    finish = {}
    for c in client.completions.create(model=MODEL, prompt=prompts, n=2, max_tokens=6, temperature=0, stream=True):
        ch = c.choices[0]
        texts[ch.index] = texts.get(ch.index, "") + ch.text
        if ch.finish_reason:
            finish[ch.index] = ch.finish_reason
    assert [texts[i] for i in range(4)] == [c.text for c in r.choices]
    assert sorted(finish) == [0, 1, 2, 3]
    # Sampled n: n distinct choices, each finished, usage counts them all.
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Name a fruit."}], n=3,
                                       max_tokens=8, temperature=1.0, seed=7)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert all(c.finish_reason in ("stop", "length") for c in r.choices)
    assert r.usage.completion_tokens >= 3


def test_token_id_prompts(server, client):
    ids = tokenize(server, prompt=PROMPT)["tokens"]
    by_text = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=6, temperature=0)
    by_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=6, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == len(ids)
    two = client.completions.create(model=MODEL, prompt=[ids, ids[:3]], max_tokens=6, temperature=0)
    assert len(two.choices) == 2 and two.choices[0].text == by_text.choices[0].text
    assert two.usage.prompt_tokens == len(ids) + 3


def test_completion_logprobs_shape_and_values(server, client):
    r = client.completions.create(model=MODEL, prompt=STORY, max_tokens=8, temperature=0, logprobs=3,
                                  extra_body={"ignore_eos": True})
    c = r.choices[0]
    lp = c.logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n == 8
    assert "".join(lp.tokens) == c.text
    offset = 0
    for tok, tok_lp, top, off in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset):
        assert off == offset
        offset += len(tok)
        assert tok_lp <= 0
        assert 3 <= len(top) <= 4 and tok in top
        assert top[tok] == tok_lp
        assert tok_lp == max(top.values())  # greedy picks the most likely token
    # Streamed logprobs add up to the same lists.
    chunks = list(client.completions.create(model=MODEL, prompt=STORY, max_tokens=8, temperature=0, logprobs=3,
                                            stream=True, extra_body={"ignore_eos": True}))
    assert sum((ch.choices[0].logprobs.tokens for ch in chunks if ch.choices[0].logprobs), []) == lp.tokens
    assert sum((ch.choices[0].logprobs.token_logprobs for ch in chunks if ch.choices[0].logprobs), []) == \
        lp.token_logprobs
    assert sum((ch.choices[0].logprobs.text_offset for ch in chunks if ch.choices[0].logprobs), []) == lp.text_offset
    # logprobs=0: only the chosen token's logprob.
    r0 = client.completions.create(model=MODEL, prompt=STORY, max_tokens=4, temperature=0, logprobs=0)
    assert all(len(top) == 1 for top in r0.choices[0].logprobs.top_logprobs)
    assert r0.choices[0].logprobs.token_logprobs == lp.token_logprobs[:len(r0.choices[0].logprobs.token_logprobs)]


def test_chat_logprobs_shape_and_values(server, client):
    msgs = [{"role": "user", "content": "Count to five."}]
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0, logprobs=True,
                                       top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    text = ""
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 2
        assert e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob
        assert e.top_logprobs[1].logprob <= e.top_logprobs[0].logprob
        assert bytes(e.bytes).decode("utf-8", errors="replace") == e.token or e.token.startswith("bytes:")
        text += bytes(e.bytes).decode("utf-8", errors="ignore")
    if r.choices[0].finish_reason == "length":
        assert text == r.choices[0].message.content
    # logprobs without top_logprobs: the chosen token only.
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4, temperature=0, logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)
    # Not asked for: null.
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4, temperature=0)
    assert r.choices[0].logprobs is None
    # Streamed chat logprobs: one entry per generated token.
    chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0,
                                                 logprobs=True, top_logprobs=2, stream=True,
                                                 stream_options={"include_usage": True}))
    entries = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [e.token for e in entries] == [e.token for e in content]
    assert chunks[-1].usage.completion_tokens == len(entries)


def test_sampling_parameters_take_effect(server, client):
    banana = tokenize(server, prompt=" banana")["tokens"]
    assert len(banana) == 1
    # logit_bias +100 forces the token; -100 bans it.
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, temperature=0,
                                  logit_bias={str(banana[0]): 100})
    assert r.choices[0].text == " banana" * 3
    greedy = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0,
                                       extra_body={"ignore_eos": True}, logprobs=0)
    first = tokenize(server, prompt=greedy.choices[0].logprobs.tokens[0])["tokens"][0]
    banned = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1, temperature=0,
                                       logit_bias={str(first): -100})
    assert banned.choices[0].text != greedy.choices[0].logprobs.tokens[0]
    # top_k=1 samples the argmax whatever the temperature and seed.
    top1 = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=1.5, seed=3,
                                     extra_body={"top_k": 1, "ignore_eos": True})
    assert top1.choices[0].text == greedy.choices[0].text
    # A strong frequency penalty keeps greedy decoding from repeating itself.
    loop = client.completions.create(model=MODEL, prompt="one one one one one", max_tokens=8, temperature=0)
    penalised = client.completions.create(model=MODEL, prompt="one one one one one", max_tokens=8, temperature=0,
                                          frequency_penalty=2.0, presence_penalty=2.0)
    assert penalised.choices[0].text != loop.choices[0].text
    # stop_token_ids (vLLM's extension) ends the completion at that token, with finish_reason stop.
    second = tokenize(server, prompt=greedy.choices[0].logprobs.tokens[1])["tokens"][0]
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0,
                                  extra_body={"stop_token_ids": [second]})
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == 2


def test_seed_reproducible(server, client):
    body = dict(model=MODEL, prompt=STORY, max_tokens=16, temperature=1.0, top_p=0.95)
    a = client.completions.create(**body, seed=1234).choices[0].text
    b = client.completions.create(**body, seed=1234).choices[0].text
    assert a == b
    streamed = "".join(c.choices[0].text for c in client.completions.create(**body, seed=1234, stream=True))
    assert streamed == a
    others = {client.completions.create(**body, seed=s).choices[0].text for s in (1, 2, 3, 4)}
    assert len(others | {a}) >= 2


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "日本の首都は", "max_tokens": 24, "temperature": 0}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Reply with three emoji that show happiness."}],
                              "max_tokens": 30, "temperature": 0}),
])
def test_multibyte_characters_never_split_across_events(server, path, body):
    chat = path.endswith("chat/completions")
    full = post(server, path, body).json()
    full_text = full["choices"][0]["message"]["content"] if chat else full["choices"][0]["text"]
    assert any(ord(ch) > 0x2000 for ch in full_text), full_text
    events = sse_events(server, path, {**body, "stream": True})
    pieces = []
    for e in events:
        ch = e["choices"][0]
        piece = (ch["delta"].get("content") or "") if chat else ch["text"]
        # U+FFFD only where the completion was cut mid-character by max_tokens.
        assert "\ufffd" not in piece or (ch["finish_reason"] == "length" and piece.endswith("\ufffd")), piece
        pieces.append(piece)
    assert "".join(pieces) == full_text
    # The model did split characters across tokens here.
    lp = post(server, "/v1/completions", {"prompt": "日本の首都は", "max_tokens": 24, "temperature": 0,
                                          "logprobs": 0}).json()
    assert any(t.startswith("bytes:") for t in lp["choices"][0]["logprobs"]["tokens"])


def test_echo(server, client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0, echo=True)
    plain = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0)
    assert r.choices[0].text == PROMPT + plain.choices[0].text
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0, echo=True,
                                            stream=True))
    assert chunks[0].choices[0].text == PROMPT
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text


def test_tokenize_detokenize(server):
    t = tokenize(server, prompt=PROMPT, return_token_strs=True)
    assert t["count"] == len(t["tokens"]) > 0 and t["max_model_len"] == 1024
    assert "".join(t["token_strs"]) == PROMPT
    assert post(server, "/detokenize", {"tokens": t["tokens"]}).json() == {"prompt": PROMPT}
    chat = tokenize(server, messages=[{"role": "user", "content": "hi"}])
    no_gen = tokenize(server, messages=[{"role": "user", "content": "hi"}], add_generation_prompt=False)
    assert chat["count"] > no_gen["count"] > 0
    assert tokenize(server, prompt="")["count"] == 0


def test_metrics_exposition_and_deltas(server, client):
    text = httpx.get(server.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, kind in [("folio:num_requests_running", "gauge"), ("folio:num_requests_waiting", "gauge"),
                       ("folio:kv_cache_usage_perc", "gauge"), ("folio:kv_cache_blocks_used", "gauge"),
                       ("folio:kv_cache_blocks_total", "gauge"), ("folio:prefix_cache_queries", "counter"),
                       ("folio:prefix_cache_hits", "counter"), ("folio:num_preemptions", "counter"),
                       ("folio:prompt_tokens", "counter"), ("folio:generation_tokens", "counter"),
                       ("folio:time_to_first_token_seconds", "histogram"),
                       ("folio:inter_token_latency_seconds", "histogram"),
                       ("folio:e2e_request_latency_seconds", "histogram"),
                       ("folio:request_queue_time_seconds", "histogram"), ("folio:request_success", "counter"),
                       ("folio:http_responses", "counter")]:
        assert name in families and families[name].type == kind, name
    for line in text.splitlines():
        if line.startswith("folio:"):
            assert 'model_name="' + MODEL + '"' in line, line
    ttft = families["folio:time_to_first_token_seconds"]
    buckets = [s.value for s in ttft.samples if s.name.endswith("_bucket")]
    count = [s.value for s in ttft.samples if s.name.endswith("_count")][0]
    assert buckets == sorted(buckets) and buckets[-1] == count > 0
    assert ttft.samples[len(buckets) - 1].labels["le"] == "+Inf"

    before = metric_samples(server)
    prompt_tokens = tokenize(server, prompt=STORY)["count"]
    client.completions.create(model=MODEL, prompt=STORY, max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
    after = metric_samples(server)

    def delta(name, labels=()):
        return after[(name, labels)] - before.get((name, labels), 0)

    assert delta("folio:prompt_tokens_total") == prompt_tokens
    assert delta("folio:generation_tokens_total") == 5
    assert delta("folio:request_success_total", (("finished_reason", "length"),)) == 1
    assert delta("folio:e2e_request_latency_seconds_count") == 1
    assert delta("folio:prefix_cache_queries_total") == prompt_tokens
    assert after[("folio:kv_cache_blocks_used", ())] == 0
    assert after[("folio:kv_cache_blocks_total", ())] > 0
    assert delta("folio:http_responses_total", (("status", "200"),)) >= 2


def test_system_fingerprint_on_every_response_and_chunk(server, client):
    """OpenAI's system_fingerprint: the build and everything that decides the
    bits, the same on every answer of one server (and on GET /version)."""
    fp = httpx.get(server.url + "/version", timeout=10).json()["system_fingerprint"]
    assert fp.startswith("fp_") and len(fp) == 19, fp
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert chat.system_fingerprint == fp
    assert client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3).system_fingerprint == fp
    for path, body in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
                       ("/v1/completions", {"prompt": PROMPT})]:
        chunks = sse_events(server, path, {**body, "max_tokens": 3, "stream": True,
                                           "stream_options": {"include_usage": True}})
        assert len(chunks) >= 3 and all(c["system_fingerprint"] == fp for c in chunks), chunks
    assert fp in server.log()  # the start-up line says what it hashed
