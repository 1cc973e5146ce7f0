"""`folio serve` over time: clients that hang up mid-stream or mid-request
have their requests aborted and their KV blocks freed; 256 streaming clients
at once all complete; SIGTERM drains running requests and exits 0 (/ready
turns 503 while /health stays 200); /health and /ready answer 503 while the
model loads; a quantized KV cache holds more blocks
in the same budget."""
import asyncio
import json
import signal
import socket
import subprocess
import threading
import time

import httpx
import pytest

from conftest import start_folio_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "lifecycle", "--max-model-len", "2048", "--kv-cache-memory", "128MiB")
    yield s
    assert s.stop() == 0, s.log()


def metrics(server, headers=None):
    out = {}
    for line in httpx.get(server.url + "/metrics", headers=headers, timeout=10).text.splitlines():
        if line.startswith("folio:") and "_bucket" not in line:
            name = line.split("{", 1)[0]
            labels = line.split("{", 1)[1].split("}", 1)[0]
            value = float(line.rsplit(" ", 1)[1])
            key = name if "finished_reason" not in labels else name + "{" + labels.split(",", 1)[1] + "}"
            out[key] = value
    return out


def wait_for(predicate, timeout, interval=0.01):
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            return None
        time.sleep(interval)
    return time.monotonic() - start


def idle(server):
    m = metrics(server)
    return m["folio:kv_cache_blocks_used"] == 0 and m["folio:num_requests_running"] == 0 and \
        m["folio:num_requests_waiting"] == 0


LONG = {"prompt": "Count from one to a thousand: one, two,", "max_tokens": 1500, "ignore_eos": True,
        "temperature": 0}


def test_dropped_stream_frees_its_blocks(server):
    assert wait_for(lambda: idle(server), 10) is not None
    aborted_before = metrics(server).get('folio:request_success_total{finished_reason="abort"}', 0)
    with httpx.Client(timeout=30) as c:
        with c.stream("POST", server.url + "/v1/completions", json={**LONG, "stream": True}) as r:
            events = 0
            lines = r.iter_lines()  # held, so that leaving the loop does not close the stream
            for line in lines:
                if line.startswith("data: "):
                    events += 1
                if events == 3:
                    break
            m = metrics(server)
            assert m["folio:kv_cache_blocks_used"] > 0 and m["folio:num_requests_running"] == 1
    # The connection is closed: the request is aborted long before its 1,500 tokens.
    took = wait_for(lambda: idle(server), 5)
    assert took is not None and took < 2.0, took
    m = metrics(server)
    assert m['folio:request_success_total{finished_reason="abort"}'] == aborted_before + 1
    assert wait_for(lambda: "(client hung up)" in server.log(), 2) is not None


def test_dropped_non_streaming_request_frees_its_blocks(server):
    assert wait_for(lambda: idle(server), 10) is not None
    body = json.dumps(LONG).encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert wait_for(lambda: metrics(server)["folio:kv_cache_blocks_used"] > 0, 10) is not None
    generated = metrics(server)["folio:generation_tokens_total"]
    sock.close()
    took = wait_for(lambda: idle(server), 5)
    assert took is not None and took < 2.0, took
    # It stopped early: far fewer than 1,500 tokens were generated.
    assert metrics(server)["folio:generation_tokens_total"] - generated < 500


def test_256_concurrent_streams_complete(server):
    n = 256
    peak = {"connections": 0}

    async def one(client, i, barrier):
        # Short prompts keep this fast on two cores; echo makes the first
        # event come at once, so that the barrier below can hold every stream.
        prompt = f"{i} is"
        body = {"prompt": prompt, "max_tokens": 3, "stream": True, "temperature": 0, "ignore_eos": True,
                "echo": True}
        text, finish, done, opened = "", None, False, False
        async with client.stream("POST", server.url + "/v1/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    continue
                chunk = json.loads(line[6:])
                if not opened:
                    opened = True
                    assert chunk["choices"][0]["text"] == prompt
                    # Every stream is open at once before any reads on.
                    await barrier.wait()
                text += chunk["choices"][0]["text"]
                finish = chunk["choices"][0]["finish_reason"] or finish
        return text.startswith(prompt) and len(text) > len(prompt), finish, done

    async def main():
        barrier = asyncio.Barrier(n)
        limits = httpx.Limits(max_connections=n + 16, max_keepalive_connections=n + 16)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, i, barrier) for i in range(n)))

    start = time.monotonic()
    results = asyncio.run(main())
    took = time.monotonic() - start
    assert len(results) == n
    assert all(done and finish == "length" and grew for grew, finish, done in results), results[:3]
    assert took < 90, took
    assert wait_for(lambda: idle(server), 10) is not None


def read_stream(url, body, out):
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=60) as r:
            out["status"] = r.status_code
            for line in r.iter_lines():
                if line.startswith("data: "):
                    out.setdefault("events", []).append(line[6:])
    except httpx.HTTPError as e:
        out["error"] = repr(e)


def test_sigterm_drains_running_requests_and_exits_0(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "drain", "--max-model-len", "512", "--kv-cache-memory", "32MiB")
    out = {}
    body = {"prompt": "Count: one, two,", "max_tokens": 150, "stream": True, "ignore_eos": True}
    t = threading.Thread(target=read_stream, args=(s.url, body, out))
    t.start()
    assert wait_for(lambda: len(out.get("events", [])) >= 2, 20) is not None
    s.proc.send_signal(signal.SIGTERM)
    # New work is refused while the running request finishes: not ready, but
    # alive, so that a liveness probe does not kill a draining replica.
    assert wait_for(lambda: s.ready() == 503, 5) is not None
    assert s.health() == 200
    r = httpx.post(s.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2})
    assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"
    t.join(60)
    assert out["status"] == 200 and out["events"][-1] == "[DONE]", out
    finishes = [json.loads(e)["choices"][0]["finish_reason"] for e in out["events"][:-1]]
    assert finishes[-1] == "length"
    assert sum(len(json.loads(e)["choices"][0]["text"]) > 0 for e in out["events"][:-1]) > 100
    assert s.proc.wait(30) == 0, s.log()
    assert "stopped" in s.log()


def test_sigterm_aborts_what_outlives_the_shutdown_timeout(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "drain-timeout", "--shutdown-timeout", "1", "--max-model-len", "2048",
                           "--kv-cache-memory", "32MiB")
    out = {}
    body = {"prompt": "Count: one, two,", "max_tokens": 1900, "stream": True, "ignore_eos": True}
    t = threading.Thread(target=read_stream, args=(s.url, body, out))
    t.start()
    assert wait_for(lambda: len(out.get("events", [])) >= 2, 20) is not None
    start = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(30) == 0, s.log()
    assert time.monotonic() - start < 10
    t.join(30)
    events = out["events"]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["choices"][0]["finish_reason"] == "abort"
    assert "aborted" in s.log()


def test_health_is_503_while_the_model_loads(tmp_path_factory):
    # A larger model, so that loading takes long enough to be seen.
    s = start_folio_server(tmp_path_factory, "loading", "--kv-cache-memory", "32MiB", "--max-model-len", "256",
                           model="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", wait_ready=False)
    try:
        statuses, readies = [], []
        early = None
        deadline = time.monotonic() + 60
        while (not statuses or statuses[-1] != 200) and time.monotonic() < deadline:
            statuses.append(s.health())
            readies.append(s.ready())
            if early is None and statuses[-1] == 503:
                early = httpx.post(s.url + "/v1/completions", json={"prompt": "hi"})
        assert statuses[0] == 503 and statuses[-1] == 200, statuses[:3]
        assert readies[0] == 503, readies[:3]
        first_ok = statuses.index(200)
        assert set(statuses[:first_ok]) == {503}
        assert early.status_code == 503 and "loading" in early.json()["error"]["message"]
        assert httpx.post(s.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2}).status_code == 200
        assert s.ready() == 200
        log = s.log()
        assert log.index("listening on") < log.index("serving")
    finally:
        assert s.stop() == 0


def test_quantized_kv_cache_holds_more_blocks_in_the_same_budget(tmp_path_factory, build_dir):
    # q8_0 keeps 34 bytes per 32 numbers, f16 64: the same budget holds 64/34 = 1.88x the blocks.
    blocks, used = {}, {}
    for dtype in ("f16", "q8_0"):
        s = start_folio_server(tmp_path_factory, "kv-" + dtype, "--kv-cache-dtype", dtype, "--kv-cache-memory",
                               "32MiB", "--max-model-len", "512")
        try:
            r = httpx.post(s.url + "/v1/completions", timeout=60,
                           json={"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
            assert r.status_code == 200 and r.json()["choices"][0]["text"], r.text
            m = metrics(s)
            blocks[dtype] = m["folio:kv_cache_blocks_total"]
            used[dtype] = m["folio:kv_cache_bytes"]
            assert dtype in s.log()
        finally:
            assert s.stop() == 0, s.log()
    assert abs(blocks["q8_0"] / blocks["f16"] - 64 / 34) < 0.01, blocks
    assert all(b <= 32 * 2**20 for b in used.values()), used
    # An unknown type is refused before the model loads, with the choices.
    bad = subprocess.run([str(build_dir / "folio"), "serve", "--kv-cache-dtype", "int8"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "q8_0" in bad.stderr, bad.stderr
