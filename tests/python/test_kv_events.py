"""KV-cache events (--kv-events-endpoint) as a prefix-aware router reads them:
a ZeroMQ SUB socket, as llm-d's indexer binds one, receives vLLM's multipart
messages [topic, sequence number, msgpack EventBatch]; replaying BlockStored,
BlockRemoved and AllBlocksCleared rebuilds this replica's block set, which
must equal what /metrics counts and hold the very hashes the engine computes
(folio_block_hash.py), through eviction (a small KV pool) and preemption."""
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from conftest import start_folio_server
from folio_block_hash import chain

zmq = pytest.importorskip("zmq", reason="pyzmq is missing; run scripts/setup.sh (scripts/requirements-test.txt)")
msgpack = pytest.importorskip("msgpack", reason="msgpack is missing; run scripts/setup.sh")

BLOCK = 16
TOPIC = b"kv@replica-0"


class Subscriber:
    """Replays the events into a block set, checking each one as it comes."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.setsockopt(zmq.RCVTIMEO, 100)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.blocks = {}  # hash -> (parent hash or None, token ids)
        self.seqs, self.errors = [], []
        self.num_stored = self.num_removed = self.num_cleared = 0
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                topic, seq, payload = self.sock.recv_multipart()
            except zmq.Again:
                continue
            with self.lock:
                self.apply(topic, seq, payload)

    def apply(self, topic, seq, payload):
        if topic != TOPIC or len(seq) != 8:
            self.errors.append(f"bad frames {topic!r} {seq!r}")
        self.seqs.append(int.from_bytes(seq, "big"))
        batch = msgpack.unpackb(payload)
        ts, events, rank = batch
        if not isinstance(ts, float) or rank != 0:
            self.errors.append(f"bad batch head {batch[0]!r} {batch[2]!r}")
        for e in events:
            tag = e[0]
            if tag == "BlockStored":
                _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = e
                if block_size != BLOCK or len(tokens) != len(hashes) * BLOCK or medium != "GPU" or lora_id is not None:
                    self.errors.append(f"bad BlockStored {e!r}")
                for i, h in enumerate(hashes):
                    if h in self.blocks:
                        self.errors.append(f"{h:x} stored twice")
                    self.blocks[h] = (parent if i == 0 else hashes[i - 1], tokens[i * BLOCK:(i + 1) * BLOCK])
                self.num_stored += len(hashes)
            elif tag == "BlockRemoved":
                _, hashes, medium = e
                for h in hashes:
                    if self.blocks.pop(h, None) is None:
                        self.errors.append(f"{h:x} removed, never stored")
                self.num_removed += len(hashes)
            elif tag == "AllBlocksCleared":
                self.blocks.clear()
                self.num_cleared += 1
            else:
                self.errors.append(f"unknown event {e!r}")

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close(0)
        self.ctx.term()


def metric(server, name):
    for line in httpx.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


SENT = []  # every request's tokens with KV written: the prompt and all but the last output token


def complete(server, tokens, max_tokens):
    r = httpx.post(server.url + "/v1/completions", timeout=120,
                   json={"prompt": tokens, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                         "return_tokens_as_token_ids": True, "logprobs": 0})
    assert r.status_code == 200, r.text
    out = [int(t.split(":", 1)[1]) for t in r.json()["choices"][0]["logprobs"]["tokens"]]
    assert len(out) == max_tokens
    SENT.append(tokens + out[:-1])
    return r.json()


def engine_hashes():
    """Every block hash the engine can have computed for what was sent."""
    return {h for tokens in SENT for h in chain(tokens, BLOCK)}


def settle(server, sub, timeout=10):
    """Waits until the replayed set has as many hashes as the engine holds."""
    deadline = time.monotonic() + timeout
    while True:
        want = metric(server, "folio:prefix_cache_block_hashes")
        with sub.lock:
            have = len(sub.blocks)
        if have == want or time.monotonic() > deadline:
            return have, want
        time.sleep(0.05)


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    sub = Subscriber()
    # About 20 blocks of 16 tokens: a few requests fill it, so blocks are
    # evicted, and four at once cannot all fit, so some are preempted.
    s = start_folio_server(tmp_path_factory, "kv-events", "--kv-cache-memory", "7MiB", "--max-model-len", "256",
                           "--max-num-seqs", "4", "--kv-events-endpoint", f"tcp://127.0.0.1:{sub.port}",
                           "--kv-events-topic", TOPIC.decode())
    yield s, sub
    code = s.stop()
    sub.close()
    assert code == 0, s.log()


def prompt(seed, n):
    return [(seed * 7919 + i * 104729) % 40000 + 100 for i in range(n)]


def test_events_carry_the_engines_block_hashes(replica):
    server, sub = replica
    assert "publishing KV-cache events" in server.log()
    tokens = prompt(1, 5 * BLOCK + 3)
    complete(server, tokens, 1)
    have, want = settle(server, sub)
    assert have == want and want >= 5, (have, want)
    expected = chain(tokens, BLOCK)
    with sub.lock:
        for i, h in enumerate(expected):
            assert h in sub.blocks, f"block {i} of the prompt ({h:x}) was never announced"
            parent, block_tokens = sub.blocks[h]
            assert parent == (expected[i - 1] if i else None)
            assert block_tokens == tokens[i * BLOCK:(i + 1) * BLOCK]
        assert not sub.errors, sub.errors[:5]
    # The sequence numbers run without a gap.
    assert sub.seqs == list(range(sub.seqs[0], sub.seqs[0] + len(sub.seqs)))


def test_eviction_and_preemption_keep_the_replayed_set_exact(replica):
    server, sub = replica
    preempted_before = metric(server, "folio:num_preemptions_total")
    # One after another: each pushes older blocks out of the small pool.
    for seed in range(10, 16):
        complete(server, prompt(seed, 6 * BLOCK), 8)
    have, want = settle(server, sub)
    assert have == want, (have, want)
    with sub.lock:
        assert sub.num_removed > 0, "no block was evicted; the pool is too large for this test"
    # Four at once that outgrow the pool while they decode: preemption.
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda seed: complete(server, prompt(seed, 3 * BLOCK), 90), range(20, 24)))
    assert metric(server, "folio:num_preemptions_total") > preempted_before
    have, want = settle(server, sub)
    assert have == want, (have, want)
    with sub.lock:
        assert not sub.errors, sub.errors[:5]
        # Every block held is one the engine computed, decoded ones included
        # (the prompts are 3 blocks, the answers add 5 to 6 more).
        held = set(sub.blocks)
    assert held <= engine_hashes(), len(held - engine_hashes())
    decoded = {h for tokens in SENT[-4:] for h in chain(tokens, BLOCK)[3:]}
    assert held & decoded, "no block of generated tokens was announced"
    assert metric(server, "folio:kv_events_dropped_batches_total") == 0
    assert sub.seqs == list(range(sub.seqs[0], sub.seqs[0] + len(sub.seqs)))


def test_vllm_metric_names(replica):
    server, _ = replica
    text = httpx.get(server.url + "/metrics", timeout=10).text
    for name in ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                 "vllm:gpu_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                 "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:e2e_request_latency_seconds_count", "vllm:cache_config_info", "vllm:lora_requests_info"]:
        assert f"\n{name}{{" in text, name
    assert 'block_size="16"' in text
    assert metric(server, "vllm:kv_cache_usage_perc") == metric(server, "folio:kv_cache_usage_perc")
    assert metric(server, "vllm:prefix_cache_hits_total") == metric(server, "folio:prefix_cache_hits_total")
    from prometheus_client.parser import text_string_to_metric_families
    names = [f.name for f in text_string_to_metric_families(text)]
    assert len(names) == len(set(names))  # every family once


def test_all_blocks_cleared_when_the_replica_stops(tmp_path_factory):
    sub = Subscriber()
    s = start_folio_server(tmp_path_factory, "kv-events-stop", "--kv-cache-memory", "7MiB", "--max-model-len", "256",
                           "--kv-events-endpoint", f"tcp://127.0.0.1:{sub.port}", "--kv-events-topic",
                           TOPIC.decode())
    try:
        complete(s, prompt(3, 4 * BLOCK), 1)
        have, want = settle(s, sub)
        assert have == want > 0
        cleared = sub.num_cleared
    finally:
        assert s.stop() == 0, s.log()
    deadline = time.monotonic() + 5
    while sub.num_cleared == cleared and time.monotonic() < deadline:
        time.sleep(0.05)
    sub.close()
    assert sub.num_cleared > cleared and not sub.blocks and not sub.errors


def test_a_taken_endpoint_is_a_clear_error(tmp_path_factory, build_dir):
    import subprocess
    from conftest import model_path
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([str(build_dir / "folio"), "serve", "-m", str(model_path("smollm2-135m-instruct-q4_1.gguf")),
                            "--port", "0", "--kv-events-endpoint", f"tcp://*:{port}"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--kv-events-endpoint" in r.stderr and "bind" in r.stderr, r.stderr
