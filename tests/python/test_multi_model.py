"""Several models behind one `folio serve` (issue 46): requests are routed by
their `model` through the official openai client; models load on first use
and unload least recently used past --max-loaded-models or --models-memory,
and after --model-keep-alive; /v1/models says each one's state; POST
/models/load and /models/unload; /metrics has every model under its
model_name. Three packaged models: SmolLM2-135M (the default), Qwen2.5-Coder
0.5B and Gemma 3 270M."""
import concurrent.futures
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import model_path, start_folio_server

SMALL_KV = ["--kv-cache-memory", "64MiB", "--max-model-len", "512", "--no-request-log"]


def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def states(server):
    models = httpx.get(server.url + "/v1/models", timeout=30).json()["data"]
    return {m["id"]: m["status"]["value"] for m in models}


def ask(server, model, text="Name a colour.", max_tokens=8):
    r = client(server).chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                               max_tokens=max_tokens, temperature=0)
    assert r.model == model
    return r.choices[0].message.content


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    qwen = model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    gemma = model_path("gemma-3-270m-q4_k_m.gguf")
    server = start_folio_server(tmp_path_factory, "three", "-m", str(qwen), "-m", f"gemma={gemma}",
                                "--max-loaded-models", "2", "--model-keep-alive", "0", *SMALL_KV)
    yield server
    assert server.stop() == 0


def test_requests_are_routed_by_model_and_load_on_first_use(three, tmp_path_factory):
    smol = "smollm2-135m-instruct-q4_1"
    qwen = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert states(three) == {smol: "loaded", qwen: "unloaded", "gemma": "unloaded"}
    assert "serving 3 models" in three.log()
    answer = ask(three, qwen)
    assert states(three)[qwen] == "loaded"
    # The same bits as a server of that model alone: the request reached it, and nothing else.
    alone = start_folio_server(tmp_path_factory, "alone", *SMALL_KV, model="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    try:
        assert ask(alone, qwen) == answer
    finally:
        alone.stop()
    # No model named: the default (the first -m).
    r = client(three).completions.create(model=smol, prompt="The sky is", max_tokens=4, temperature=0)
    raw = httpx.post(three.url + "/v1/completions", json={"prompt": "The sky is", "max_tokens": 4, "temperature": 0},
                     timeout=60).json()
    assert raw["model"] == smol and raw["choices"][0]["text"] == r.choices[0].text
    with pytest.raises(openai.NotFoundError) as e:
        ask(three, "no-such-model")
    assert e.value.body["code"] == "model_not_found" and "gemma" in e.value.body["message"]


def test_the_least_recently_used_unloads_past_the_count(three):
    smol = "smollm2-135m-instruct-q4_1"
    qwen = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    ask(three, qwen)
    ask(three, smol)  # qwen is now the least recently used
    ask(three, "gemma")
    assert states(three) == {smol: "loaded", qwen: "unloaded", "gemma": "loaded"}
    ask(three, qwen)  # smol goes
    assert states(three) == {smol: "unloaded", qwen: "loaded", "gemma": "loaded"}


def test_requests_for_a_loading_model_wait_for_it(three):
    httpx.post(three.url + "/models/unload", json={"model": "gemma"}, timeout=60).raise_for_status()
    assert states(three)["gemma"] == "unloaded"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: ask(three, "gemma"), range(4)))
    assert len(set(answers)) == 1 and answers[0]  # one load, four equal greedy answers
    assert states(three)["gemma"] == "loaded"


def test_load_and_unload_routes(three):
    qwen = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    r = httpx.post(three.url + "/models/load", json={"model": qwen}, timeout=120)
    assert r.status_code == 200 and r.json()["status"] == "loaded"
    assert states(three)[qwen] == "loaded"
    r = httpx.post(three.url + "/models/unload", json={"model": qwen}, timeout=60)
    assert r.status_code == 200 and states(three)[qwen] == "unloaded"
    r = httpx.post(three.url + "/models/unload", json={"model": "nope"}, timeout=60)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = httpx.post(three.url + "/models/load", json={}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"
    one = httpx.get(three.url + "/v1/models/gemma", timeout=30).json()
    assert one["id"] == "gemma" and one["status"]["value"] in ("loaded", "unloaded")


def test_metrics_name_each_model_once_per_family(three):
    ask(three, "qwen2.5-coder-0.5b-instruct-q4_k_m")
    ask(three, "gemma")  # two loaded: the count
    page = httpx.get(three.url + "/metrics", timeout=30).text
    families = {f.name: f for f in text_string_to_metric_families(page)}
    running = families["vllm:num_requests_running"]
    names = {s.labels["model_name"] for s in running.samples}
    assert names == {"gemma", "qwen2.5-coder-0.5b-instruct-q4_k_m"}, names
    assert page.count("# TYPE vllm:num_requests_running gauge") == 1
    finished = {s.labels["model_name"]: s.value for s in families["folio:request_success"].samples
                if s.labels.get("finished_reason") == "length"}
    assert finished["gemma"] >= 1


def test_a_budget_unloads_what_the_newcomer_needs_and_refuses_what_never_fits(tmp_path_factory):
    qwen = model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    gemma = model_path("gemma-3-270m-q4_k_m.gguf")
    smol = "smollm2-135m-instruct-q4_1"
    # SmolLM2 ~160 MB and Gemma ~320 MB (weights + 64 MiB of KV) fit 600 MiB together; Qwen 0.5B (~555 MB) only alone.
    server = start_folio_server(tmp_path_factory, "budget", "-m", f"qwen={qwen}", "-m", f"gemma={gemma}",
                                "--models-memory", "600MiB", *SMALL_KV)
    try:
        ask(server, "gemma")
        assert states(server) == {smol: "loaded", "qwen": "unloaded", "gemma": "loaded"}
        ask(server, "qwen")
        assert states(server) == {smol: "unloaded", "qwen": "loaded", "gemma": "unloaded"}
        ask(server, smol)
        assert states(server)[smol] == "loaded"
    finally:
        assert server.stop() == 0
    small = start_folio_server(tmp_path_factory, "small", "-m", f"qwen={qwen}", "--models-memory", "300MiB", *SMALL_KV)
    try:
        with pytest.raises(openai.InternalServerError) as e:
            ask(small, "qwen")
        assert e.value.status_code == 503 and "more than the whole budget" in str(e.value)
    finally:
        assert small.stop() == 0


def test_an_idle_model_unloads_after_the_keep_alive(tmp_path_factory):
    gemma = model_path("gemma-3-270m-q4_k_m.gguf")
    smol = "smollm2-135m-instruct-q4_1"
    server = start_folio_server(tmp_path_factory, "idle", "-m", f"gemma={gemma}", "--model-keep-alive", "1",
                                *SMALL_KV)
    try:
        first = ask(server, "gemma")
        deadline = time.monotonic() + 30
        while states(server) != {smol: "unloaded", "gemma": "unloaded"}:
            assert time.monotonic() < deadline, states(server)
            time.sleep(0.2)
        assert server.ready() == 200  # an unloaded model loads again on the next request
        assert ask(server, "gemma") == first
    finally:
        assert server.stop() == 0
