"""`folio serve` refusing bad requests: every one gets the right status and an
OpenAI-shaped error ({"error": {"message", "type", "param", "code"}}), and the
server goes on serving after each. Also the API key (401), oversized bodies
(413) and a full queue (429)."""
import subprocess
import threading
import time

import httpx
import openai
import pytest

from conftest import BUILD_DIR, model_path, start_folio_server

MODEL = "smollm2-135m-instruct-q4_1"
MAX_MODEL_LEN = 256
MAX_BODY = 100_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "errors", "--max-model-len", str(MAX_MODEL_LEN), "--kv-cache-memory",
                           "64MiB", "--max-body-bytes", str(MAX_BODY))
    yield s
    assert s.stop() == 0, s.log()


def check_error(r, status, param=None, code=None):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert list(body) == ["error"], body
    e = body["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    assert isinstance(e["message"], str) and len(e["message"]) > 10
    assert isinstance(e["type"], str) and e["type"]
    if param is not None:
        assert e["param"] == param, e
    if code is not None:
        assert e["code"] == code, e
    return e


def still_serving(server):
    assert server.health() == 200
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")


C, CHAT = "/v1/completions", "/v1/chat/completions"
USER = [{"role": "user", "content": "hi"}]
CASES = [
    # (id, path, body (dict, or raw bytes), status, param)
    ("not-json", C, b"{not json", 400, None),
    ("json-array", C, b"[1, 2]", 400, None),
    ("empty-body", C, b"", 400, None),
    ("invalid-utf8", C, b'{"prompt": "caf\xc3 \xff\xfe"}', 400, None),
    ("lone-surrogate", C, b'{"prompt": "\\ud800"}', 400, None),
    ("too-deep", C, b'{"prompt": "x", "extra": ' + b"[" * 200 + b"]" * 200 + b"}", 400, None),
    ("temperature-type", C, {"prompt": "hi", "temperature": "hot"}, 400, "temperature"),
    ("max-tokens-type", C, {"prompt": "hi", "max_tokens": "5"}, 400, "max_tokens"),
    ("stream-type", C, {"prompt": "hi", "stream": "yes"}, 400, "stream"),
    ("prompt-type", C, {"prompt": 5}, 400, "prompt"),
    ("prompt-mixed", C, {"prompt": ["a", 1]}, 400, "prompt"),
    ("prompt-missing", C, {"max_tokens": 3}, 400, "prompt"),
    ("empty-prompt", C, {"prompt": ""}, 400, "prompt"),
    ("empty-prompt-list", C, {"prompt": []}, 400, "prompt"),
    ("empty-token-list", C, {"prompt": [[]]}, 400, "prompt"),
    ("n-too-big", C, {"prompt": "hi", "n": 17}, 400, "n"),
    ("n-zero", CHAT, {"messages": USER, "n": 0}, 400, "n"),
    ("max-tokens-zero", C, {"prompt": "hi", "max_tokens": 0}, 400, "max_tokens"),
    ("max-tokens-negative", CHAT, {"messages": USER, "max_tokens": -1}, 400, "max_tokens"),
    ("max-completion-tokens-zero", CHAT, {"messages": USER, "max_completion_tokens": 0}, 400,
     "max_completion_tokens"),
    ("logprobs-21", C, {"prompt": "hi", "logprobs": 21}, 400, "logprobs"),
    ("top-logprobs-21", CHAT, {"messages": USER, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
    ("top-logprobs-without-logprobs", CHAT, {"messages": USER, "top_logprobs": 2}, 400, "top_logprobs"),
    ("token-id-out-of-vocab", C, {"prompt": [1, 10 ** 6]}, 400, "prompt"),
    ("token-id-negative", C, {"prompt": [[1], [-1]]}, 400, "prompt"),
    ("token-id-float", C, {"prompt": [1, 2.5]}, 400, "prompt"),
    ("logit-bias-oov", C, {"prompt": "hi", "logit_bias": {"999999": 1}}, 400, "logit_bias"),
    ("logit-bias-key", C, {"prompt": "hi", "logit_bias": {"abc": 1}}, 400, "logit_bias"),
    ("logit-bias-range", C, {"prompt": "hi", "logit_bias": {"5": 101}}, 400, None),
    ("top-p-zero", C, {"prompt": "hi", "top_p": 0}, 400, None),
    ("temperature-negative", CHAT, {"messages": USER, "temperature": -1}, 400, None),
    ("stop-type", C, {"prompt": "hi", "stop": 5}, 400, "stop"),
    ("messages-missing", CHAT, {"max_tokens": 3}, 400, "messages"),
    ("messages-empty", CHAT, {"messages": []}, 400, "messages"),
    ("messages-role", CHAT, {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages"),
    ("messages-image", CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "http://x/y.png"}}]}]}, 400, "messages"),
    ("unknown-model", C, {"model": "gpt-4o", "prompt": "hi"}, 404, "model"),
    ("unknown-model-chat", CHAT, {"model": "gpt-4o", "messages": USER}, 404, "model"),
]


@pytest.mark.parametrize("name,path,body,status,param", CASES, ids=[c[0] for c in CASES])
def test_bad_request_is_refused_and_server_goes_on(server, name, path, body, status, param):
    if isinstance(body, bytes):
        r = httpx.post(server.url + path, content=body, headers={"content-type": "application/json"}, timeout=30)
    else:
        r = httpx.post(server.url + path, json=body, timeout=30)
    e = check_error(r, status, param)
    if status == 404:
        assert e["code"] == "model_not_found" and "gpt-4o" in e["message"]
    still_serving(server)


def test_prompt_longer_than_context_names_both_numbers(server):
    n = httpx.post(server.url + "/tokenize", json={"prompt": "hello " * 300}).json()["count"]
    assert n > MAX_MODEL_LEN
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "hello " * 300, "max_tokens": 2})
    e = check_error(r, 400, "prompt")
    assert str(n) in e["message"] and str(MAX_MODEL_LEN) in e["message"]
    r = httpx.post(server.url + "/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "hello " * 300}]})
    e = check_error(r, 400, "messages")
    assert str(MAX_MODEL_LEN) in e["message"]
    still_serving(server)


def test_prompt_longer_than_context_is_context_length_exceeded(server):
    """OpenAI's (and vLLM's) code, which clients key their context-window
    fallbacks on; and OpenAI's words, which litellm matches (its
    ContextWindowExceededError looks for "this model's maximum context length
    is" in the message of an OpenAI-compatible server's 400)."""
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    for call in (lambda: client.chat.completions.create(model=MODEL, max_tokens=2,
                                                        messages=[{"role": "user", "content": "hello " * 300}]),
                 lambda: client.completions.create(model=MODEL, prompt="hello " * 300, max_tokens=2),
                 lambda: client.chat.completions.create(model=MODEL, max_tokens=2, stream=True,
                                                        messages=[{"role": "user", "content": "hello " * 300}])):
        with pytest.raises(openai.BadRequestError) as err:
            call()
        assert err.value.code == "context_length_exceeded", err.value.body
        message = err.value.body["message"]
        assert "this model's maximum context length is %d tokens" % MAX_MODEL_LEN in message.lower(), message
        assert "shorten the prompt" in message and "--max-model-len" in message, message
    still_serving(server)


def test_unknown_routes_are_404_known_routes_with_another_method_405(server):
    for method, path in [("GET", "/v1/nothing"), ("POST", "/v1/completions/extra"), ("GET", "/v1/models/gpt-4o")]:
        check_error(httpx.request(method, server.url + path), 404)
    for method, path, allow in [("GET", "/v1/completions", "POST"), ("DELETE", "/v1/models", "GET, HEAD"),
                                ("POST", "/health", "GET, HEAD")]:
        r = httpx.request(method, server.url + path)
        check_error(r, 405)
        assert r.headers["allow"] == allow
    still_serving(server)


def test_body_over_limit_is_413(server):
    r = httpx.post(server.url + "/v1/completions", content=b'{"prompt": "' + b"a" * (MAX_BODY + 10) + b'"}',
                   headers={"content-type": "application/json"})
    e = check_error(r, 413)
    assert str(MAX_BODY) in e["message"]
    still_serving(server)


def test_openai_client_raises_typed_errors(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=MODEL, prompt="hi", n=17)
    assert err.value.body["param"] == "n"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=USER)
    # Streaming requests are validated before the stream starts.
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="hi", max_tokens=0, stream=True)
    assert client.completions.create(model=MODEL, prompt="hi", max_tokens=2).choices


def test_errors_are_counted_in_metrics(server):
    httpx.post(server.url + "/v1/completions", json={"prompt": ""})
    text = httpx.get(server.url + "/metrics").text
    assert any(line.startswith("folio:http_responses_total{") and 'status="400"' in line and
               float(line.rsplit(" ", 1)[1]) >= 1 for line in text.splitlines())


def test_api_key(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "apikey", "--api-key", "sekret-key", "--kv-cache-memory", "32MiB",
                           "--max-model-len", "256")
    try:
        assert s.health() == 200
        assert httpx.get(s.url + "/version").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekret-key"},
                        {"Authorization": "Bearer sekret-ke"}, {"Authorization": "Bearer sekret-keyy"}):
            check_error(httpx.get(s.url + "/v1/models", headers=headers), 401, code="invalid_api_key")
            check_error(httpx.post(s.url + "/v1/completions", json={"prompt": "hi"}, headers=headers), 401)
        check_error(httpx.get(s.url + "/metrics"), 401)
        ok = {"Authorization": "Bearer sekret-key"}
        assert httpx.get(s.url + "/v1/models", headers=ok).status_code == 200
        assert httpx.get(s.url + "/metrics", headers=ok).status_code == 200
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=s.base_url, api_key="wrong", max_retries=0).models.list()
        good = openai.OpenAI(base_url=s.base_url, api_key="sekret-key", max_retries=0)
        assert good.completions.create(model=MODEL, prompt="hi", max_tokens=2).usage.completion_tokens >= 1
    finally:
        assert s.stop() == 0


def test_full_queue_is_429(tmp_path_factory):
    # The engine's queue is the bound here, not the per-client share (half of it by default).
    s = start_folio_server(tmp_path_factory, "busy", "--max-waiting", "2", "--max-num-seqs", "1",
                           "--max-choices-per-client", "8", "--kv-cache-memory", "32MiB", "--max-model-len", "512")
    try:
        started = threading.Barrier(3)
        checked = threading.Event()
        results = []

        def long_stream():
            body = {"prompt": "Count:", "max_tokens": 300, "stream": True, "ignore_eos": True}
            with httpx.stream("POST", s.url + "/v1/completions", json=body, timeout=60) as r:
                started.wait()
                results.append(r.status_code)
                checked.wait(30)
                # Leave early: the client hangs up, the server aborts the request.

        threads = [threading.Thread(target=long_stream) for _ in range(2)]
        for t in threads:
            t.start()
        started.wait()  # both are queued in the engine
        client = openai.OpenAI(base_url=s.base_url, api_key="unused", max_retries=0)
        with pytest.raises(openai.RateLimitError) as err:
            client.completions.create(model=MODEL, prompt="hi", max_tokens=2)
        assert err.value.status_code == 429 and err.value.body["type"] == "rate_limit_error"
        checked.set()
        for t in threads:
            t.join()
        assert results == [200, 200]
        deadline = time.monotonic() + 10
        while True:  # the two hung-up requests are aborted; the queue empties
            r = httpx.post(s.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2})
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.status_code == 200, r.text
    finally:
        assert s.stop() == 0


def test_port_in_use_is_a_clear_error(server):
    r = subprocess.run([str(BUILD_DIR / "folio"), "serve", "-m", str(model_path("smollm2-135m-instruct-q4_1.gguf")),
                        "--port", str(server.port)], capture_output=True, timeout=60)
    assert r.returncode == 1
    assert b"cannot listen on 127.0.0.1:%d" % server.port in r.stderr and b"--port" in r.stderr
    still_serving(server)
