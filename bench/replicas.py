#!/usr/bin/env python3
"""Replicas behind nginx (deploy/nginx): prefix-cache hit rate and TTFT of a
multi-turn chat workload with session affinity against round robin, one
replica as the baseline, and what a replica killed mid-run costs.

Each configuration starts fresh replicas (`folio serve`, empty caches) on
loopback ports and, in front of them, an nginx of its own (own prefix, pid,
logs; never the system's) with deploy/nginx's config: folio-balance.conf as
shipped (consistent hashing of X-Session-Id) or empty (round robin).

    build/venv/bin/python bench/replicas.py                # the figures of bench/RESULTS.md
    build/venv/bin/python bench/replicas.py --sessions 6 --turns 3 --skip-kill

Every replica runs with --threads 1 (--threads): three replicas on a small
machine then compete for cores no more than one replica does.

tests/python/test_replicas.py drives the same classes with a smaller load.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

SOURCE_DIR = Path(os.environ.get("FOLIO_SOURCE_DIR", Path(__file__).resolve().parents[1]))
BUILD_DIR = Path(os.environ.get("FOLIO_BUILD_DIR", SOURCE_DIR / "build"))
MODEL = Path(os.environ.get("FOLIO_MODELS", Path.home() / ".cache" / "folio" / "models")) / \
    "smollm2-135m-instruct-q4_1.gguf"

SYSTEM = "You are a helpful assistant. Answer in one or two short sentences."
TOPICS = ["the moon", "bread", "rivers", "chess", "volcanoes", "bees", "glass", "trains", "tea", "owls", "maps",
          "clocks", "salt", "kites", "whales", "copper", "snow", "paper", "bridges", "coral", "lamps", "wool",
          "comets", "ferns"]


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


class Replica:
    def __init__(self, workdir: Path, index: int, extra_args=()):
        self.log_path = workdir / f"replica-{index}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(BUILD_DIR / "folio"), "serve", "-m", str(MODEL), "--port", "0",
                                      "--no-request-log", "--no-web-page", "--served-model-name", "folio", *extra_args],
                                     stdout=subprocess.DEVNULL, stderr=self._log)
        self.port = None

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while self.port is None:
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replica did not start:\n{self.log()}")
            else:
                time.sleep(0.01)
        while True:
            try:
                if httpx.get(self.url + "/ready", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replica never became ready:\n{self.log()}")
            time.sleep(0.05)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def metrics(self):
        out = {}
        for line in httpx.get(self.url + "/metrics", timeout=10).text.splitlines():
            if line.startswith("folio:") and "{" in line and "_bucket" not in line:
                out.setdefault(line.split("{", 1)[0], float(line.rsplit(" ", 1)[1]))
        return out

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log.close()
        return code


class Nginx:
    """nginx with deploy/nginx's files, copied into a folder of its own."""

    def __init__(self, workdir: Path, ports, affinity: bool, listen_port: int):
        self.dir = workdir / ("nginx-affinity" if affinity else "nginx-round-robin")
        self.dir.mkdir()
        for f in (SOURCE_DIR / "deploy" / "nginx").glob("*.conf"):
            shutil.copy(f, self.dir / f.name)
        if not affinity:
            (self.dir / "folio-balance.conf").write_text("# round robin\n")
        (self.dir / "folio-replicas.conf").write_text(
            "".join(f"server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;\n" for p in ports))
        conf = (self.dir / "folio.conf").read_text()
        assert "listen 127.0.0.1:8080;" in conf
        (self.dir / "folio.conf").write_text(conf.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{listen_port};"))
        self.port = listen_port
        self.proc = subprocess.Popen(["nginx", "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"),
                                      "-e", str(self.dir / "startup.log"), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(self.url + "/nginx-health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("nginx did not start: " + self.errors())
            time.sleep(0.05)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def errors(self):
        return "".join(p.read_text(errors="replace") for p in (self.dir / "startup.log", self.dir / "error.log")
                       if p.exists())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """n fresh replicas, and nginx in front when `affinity` is not None."""

    def __init__(self, n, affinity, replica_args=()):
        self.workdir = Path(tempfile.mkdtemp(prefix="folio-replicas-"))
        self.replicas = [Replica(self.workdir, i, replica_args) for i in range(n)]
        for r in self.replicas:
            r.wait_ready()
        self.nginx = None
        if affinity is not None:
            self.nginx = Nginx(self.workdir, [r.port for r in self.replicas], affinity, free_port())
        self.url = self.nginx.url if self.nginx else self.replicas[0].url

    def by_port(self, port):
        return next(r for r in self.replicas if r.port == port)

    def hit_counts(self):
        hits = queries = 0
        for r in self.replicas:
            if r.proc.poll() is None:
                m = r.metrics()
                hits += m["folio:prefix_cache_hits_total"]
                queries += m["folio:prefix_cache_queries_total"]
        return hits, queries

    def close(self):
        if self.nginx:
            self.nginx.stop()
        for r in self.replicas:
            r.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def stream_chat(url, session, messages, max_tokens, timeout=300):
    """One streamed chat turn: (reply text, TTFT seconds, upstream, started,
    error). `started`: a 200 stream had begun (its header had come) before
    anything went wrong; nginx can retry only what had not."""
    body = {"model": "folio", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True}
    start = time.monotonic()
    text, ttft, upstream, started, done = "", None, None, False, False
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=timeout,
                          headers={"X-Session-Id": session}) as r:
            # $upstream_addr lists every replica tried; the last one answered.
            tried = [a.strip() for a in (r.headers.get("x-folio-upstream") or "").split(",") if a.strip()]
            upstream = ",".join(tried[:-1]) + ">" + tried[-1] if len(tried) > 1 else (tried[0] if tried else None)
            started = r.status_code == 200
            if r.status_code != 200:
                return text, ttft, upstream, started, f"status {r.status_code}: {r.read()[:200]!r}"
            for line in r.iter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    delta = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                    if delta and ttft is None:
                        ttft = time.monotonic() - start
                    text += delta
        return text, ttft, upstream, started, None if done else "stream ended without [DONE]"
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        return text, ttft, upstream, started, repr(e)


def first_message(i, notes=0):
    """A session's opening turn; `notes` lines of the user's own notes make
    its prefix long, as a pasted document does."""
    topic = TOPICS[i % len(TOPICS)]
    lines = [f"Note {k + 1} of conversation {i}: on day {3 * k + i} I read page {17 * k + 5 * i} of a book "
             f"about {topic} and wrote down fact number {k * k + i}." for k in range(notes)]
    return (f"Conversation {i}. I am writing a long school report about {topic}. Tell me what {topic} are or is, "
            f"how people have used {topic} through history, what is surprising about {topic}, and what a "
            f"child should know first about {topic}. Keep every answer short." + (" My notes so far: " +
                                                                               " ".join(lines) if lines else ""))


def chat_workload(url, sessions, turns, max_tokens, concurrency, notes=0):
    """Each session a conversation of `turns` turns, run one turn after
    another; sessions run `concurrency` at a time. Returns the TTFTs of the
    turns after the first, and the errors."""
    later_ttft, errors = [], []
    lock = threading.Lock()

    def session(i):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_message(i, notes)}]
        for t in range(turns):
            text, ttft, _, _, error = stream_chat(url, f"session-{i}", messages, max_tokens)
            with lock:
                if error:
                    errors.append(error)
                elif t > 0 and ttft is not None:
                    later_ttft.append(ttft)
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": f"Thank you. Now tell me one more thing (number {t + 2})."}]

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(session, range(sessions)))
    return later_ttft, errors


def measure(label, n, affinity, args):
    cluster = Cluster(n, affinity, args.replica_args)
    try:
        h0, q0 = cluster.hit_counts()
        start = time.monotonic()
        ttft, errors = chat_workload(cluster.url, args.sessions, args.turns, args.max_tokens, args.concurrency,
                                     getattr(args, "notes", 0))
        took = time.monotonic() - start
        h1, q1 = cluster.hit_counts()
        return {"config": label, "hit_rate": (h1 - h0) / max(1.0, q1 - q0), "hit_tokens": h1 - h0,
                "queried_tokens": q1 - q0, "ttft_p50_ms": 1000 * percentile(ttft, 50),
                "ttft_p99_ms": 1000 * percentile(ttft, 99), "errors": len(errors), "seconds": took}
    finally:
        cluster.close()


def kill_run(n=3, sessions=9, max_tokens=160, replica_args=(), settle_s=2.0):
    """Affinity, `sessions` clients each sending streamed turns in a loop; one
    replica that has streams in flight is killed with SIGKILL. Every request
    that had not started must succeed (nginx retries it on another replica);
    only streams already running on the killed one may fail."""
    cluster = Cluster(n, True, replica_args)
    results, lock, stop = [], threading.Lock(), threading.Event()
    in_flight = {}  # session -> upstream of its running stream

    def client(i):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_message(i)}]
        while not stop.is_set():
            sent = time.monotonic()
            text, ttft, upstream, started, error = stream_chat(cluster.url, f"kill-{i}", messages, max_tokens)
            with lock:
                results.append({"session": i, "sent": sent, "upstream": upstream, "started": started,
                                "error": error, "ended": time.monotonic()})

    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(sessions)]
        for t in threads:
            t.start()
        time.sleep(settle_s)
        # The victim: the replica with the most streams running now.
        running = {}
        for r in cluster.replicas:
            m = r.metrics()
            running[r.port] = m["folio:num_requests_running"] + m["folio:num_requests_waiting"]
        victim = cluster.by_port(max(running, key=running.get))
        killed_at = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        # Until every client has finished a request sent after the kill.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                done = {r["session"] for r in results if r["sent"] > killed_at + 0.5}
            if len(done) == sessions:
                break
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(300)
        victim_addr = f"127.0.0.1:{victim.port}"
        # A retried request's upstream reads "TRIED,...>ANSWERED".
        around = [r for r in results if r["ended"] >= killed_at]
        lost = [r for r in around if r["error"] and not r["started"]]
        cut = [r for r in around if r["error"] and r["started"]]
        after = [r for r in results if r["sent"] > killed_at + 0.5]
        return {"requests": len(results), "around_kill": len(around), "lost": len(lost), "cut": len(cut),
                "cut_on_victim": sum(1 for r in cut if r["upstream"] == victim_addr),
                "requests_on_victim_at_kill": int(running[victim.port]),
                "after_kill_ok": sum(1 for r in after if not r["error"]), "after_kill": len(after),
                "after_kill_on_victim": sum(1 for r in after if r["upstream"] == victim_addr and not r["error"]),
                "retried_off_victim_ok": sum(1 for r in around if r["upstream"] and ">" in r["upstream"]
                                             and victim_addr in r["upstream"].split(">")[0] and not r["error"]),
                "errors": [r["error"] for r in lost + cut][:5]}
    finally:
        stop.set()
        cluster.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--sessions", type=int, default=12)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--concurrency", type=int, default=3)
    p.add_argument("--notes", type=int, default=12, help="lines of notes in each first turn (a longer prefix)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of each replica")
    p.add_argument("--kv-cache-memory", default="256MiB")
    p.add_argument("--skip-kill", action="store_true")
    args = p.parse_args()
    args.replica_args = ["--kv-cache-memory", args.kv_cache_memory, "--max-model-len", "2048",
                         "--threads", str(args.threads)]
    rows = [measure("1 replica", 1, None, args),
            measure(f"{args.replicas} replicas, affinity", args.replicas, True, args),
            measure(f"{args.replicas} replicas, round robin", args.replicas, False, args)]
    print("| configuration | prefix-cache hit rate | hit / queried tokens | TTFT p50, later turns | p99 | errors | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['config']} | {100 * r['hit_rate']:.1f}% | {r['hit_tokens']:.0f} / {r['queried_tokens']:.0f} | "
              f"{r['ttft_p50_ms']:.0f} ms | {r['ttft_p99_ms']:.0f} ms | {r['errors']} | {r['seconds']:.0f} |")
    if not args.skip_kill:
        k = kill_run(args.replicas, replica_args=args.replica_args)
        print()
        print(json.dumps(k, indent=1))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
