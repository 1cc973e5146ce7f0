#!/usr/bin/env python3
"""Bounded load test and soak for `folio serve`: N streaming clients for M seconds.

Each client sends streaming completions one after another until the time is
up. With --drop, --drop-early and --half-close, that share of streams hangs
up mid-stream, hangs up before the first event, or half-closes its side
after sending the request (a FIN over a raw socket: it must still get the
whole answer). Every stream not dropped on purpose is checked: completed
(finish_reason, then [DONE]), failed (an HTTP error or a broken connection)
or truncated (it ended without both). It reports p50/p99 time to first token
and inter-token latency, the server's RSS over time (--pid), and checks
afterwards through /metrics that the KV pool returns to fully free.

    build/folio serve &            # a CPU server on 127.0.0.1:8080
    build/venv/bin/python bench/serve_load.py --clients 32 --duration 30
    build/venv/bin/python bench/serve_load.py --clients 256 --duration 600 --drop 0.1 --drop-early 0.05 \
        --half-close 0.05 --pid $!   # the soak of bench/RESULTS.md

Exit status 1 when a stream failed or was truncated, or the pool stayed in use.
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import urllib.parse

import httpx


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


class Totals:
    def __init__(self):
        self.completed = self.failed = self.truncated = self.dropped = self.half_closed = 0
        self.tokens = 0
        self.ttft = []  # seconds, one per stream that produced text
        self.itl = []   # seconds between consecutive text events of a stream
        self.errors = {}

    def error(self, key):
        self.failed += 1
        self.errors[key] = self.errors.get(key, 0) + 1


class Events:
    """Reads a stream's data lines: text timings, the finish reason, [DONE]."""

    def __init__(self, totals, start):
        self.totals, self.start = totals, start
        self.last = self.finish = None
        self.done = False
        self.num_text = 0

    def line(self, line):
        if not line.startswith("data: "):
            return
        if line == "data: [DONE]":
            self.done = True
            return
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            self.totals.tokens += chunk["usage"]["completion_tokens"]
        for choice in chunk["choices"]:
            now = time.perf_counter()
            if choice["text"]:
                self.num_text += 1
                if self.last is None:
                    self.totals.ttft.append(now - self.start)
                else:
                    self.totals.itl.append(now - self.last)
                self.last = now
            self.finish = choice["finish_reason"] or self.finish

    def count(self):
        if self.done and self.finish:
            self.totals.completed += 1
        else:
            self.totals.truncated += 1


async def one_stream(client, args, body, totals, drop_after):
    """drop_after: None to read the whole stream, 0 to leave before the first event, else after that many."""
    events = Events(totals, time.perf_counter())
    try:
        async with client.stream("POST", args.url + "/v1/completions", json=body) as r:
            if r.status_code != 200:
                totals.error(f"HTTP {r.status_code}")
                await r.aread()
                return
            if drop_after == 0:
                totals.dropped += 1
                return  # the connection closes with the stream unread
            async for line in r.aiter_lines():
                events.line(line)
                if drop_after is not None and events.num_text >= drop_after:
                    totals.dropped += 1
                    return
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        totals.error(type(e).__name__)
        return
    events.count()


async def half_closed_stream(args, body, totals):
    """The request over a raw socket, then a FIN: the whole answer must still come."""
    url = urllib.parse.urlsplit(args.url)
    data = json.dumps(body).encode()
    events = Events(totals, time.perf_counter())
    try:
        reader, writer = await asyncio.open_connection(url.hostname, url.port or 80)
        auth = f"Authorization: Bearer {args.api_key}\r\n".encode() if args.api_key else b""
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: load\r\nContent-Type: application/json\r\n" + auth +
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        await writer.drain()
        writer.write_eof()
        raw = await asyncio.wait_for(reader.read(-1), args.timeout)
        writer.close()
    except (OSError, asyncio.TimeoutError) as e:
        totals.error(type(e).__name__)
        return
    # The answer alone: an interim 100 nobody asked for is an error too
    # (clients that read the first status line take it for the answer).
    head, _, payload = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        totals.error(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        return
    totals.half_closed += 1
    for line in payload.decode(errors="replace").split("\n"):  # chunk sizes are lines of their own
        events.line(line.rstrip("\r"))
    events.count()


async def client_loop(client, args, cid, deadline, totals):
    rng = random.Random(args.seed * 100003 + cid)
    i = 0
    while time.monotonic() < deadline:
        body = {"prompt": f"{args.prompt} ({cid * 100000 + i})", "max_tokens": args.max_tokens, "stream": True,
                "temperature": args.temperature, "stream_options": {"include_usage": True}}
        if args.ignore_eos:
            body["ignore_eos"] = True
        draw = rng.random()
        if draw < args.half_close:
            await half_closed_stream(args, body, totals)
        elif draw < args.half_close + args.drop_early:
            await one_stream(client, args, body, totals, 0)
        elif draw < args.half_close + args.drop_early + args.drop:
            await one_stream(client, args, body, totals, rng.randint(1, max(1, args.max_tokens - 1)))
        else:
            await one_stream(client, args, body, totals, None)
        i += 1


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def sample_rss(pid, deadline, start, samples, every):
    while time.monotonic() < deadline:
        samples.append((round(time.monotonic() - start), round(rss_mib(pid), 1)))
        await asyncio.sleep(every)


def read_metrics(url, headers):
    out = {}
    for line in httpx.get(url + "/metrics", headers=headers, timeout=10).text.splitlines():
        if line.startswith("folio:") and "{" in line and "_bucket" not in line:
            out[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
    return out


async def run(args, rss):
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=args.clients + 8, max_keepalive_connections=args.clients + 8)
    totals = Totals()
    start = time.monotonic()
    deadline = start + args.duration
    samplers = [sample_rss(args.pid, deadline, start, rss, args.rss_every)] if args.pid else []
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits, headers=headers) as client:
        await asyncio.gather(*samplers, *(client_loop(client, args, c, deadline, totals) for c in range(args.clients)))
    return totals, time.monotonic() - start


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8080", help="server root (default %(default)s)")
    p.add_argument("--clients", type=int, default=32, help="concurrent streaming clients (default %(default)s)")
    p.add_argument("--duration", type=float, default=30, help="seconds of load (default %(default)s)")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens per stream (default %(default)s)")
    p.add_argument("--prompt", default="Write a short note about the sea", help="prompt (a client id is appended)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-tokens tokens")
    p.add_argument("--api-key", default="", help="for a server started with --api-key")
    p.add_argument("--timeout", type=float, default=300, help="per-request timeout in seconds")
    p.add_argument("--settle", type=float, default=10, help="seconds to wait for the KV pool to free")
    p.add_argument("--drop", type=float, default=0, help="share of streams that hang up mid-stream")
    p.add_argument("--drop-early", type=float, default=0, help="share that hang up before the first event")
    p.add_argument("--half-close", type=float, default=0, help="share that half-close after the request")
    p.add_argument("--seed", type=int, default=1, help="seed of who drops when")
    p.add_argument("--pid", type=int, help="the server's process id: its RSS is sampled during the load")
    p.add_argument("--rss-every", type=float, default=15, help="seconds between RSS samples")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = p.parse_args()
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}

    try:
        before = read_metrics(args.url, headers)
    except httpx.HTTPError as e:
        sys.exit(f"serve_load: cannot reach {args.url}/metrics ({e}); start a server with `folio serve`")
    rss = []
    rss_start = rss_mib(args.pid) if args.pid else None
    totals, wall = asyncio.run(run(args, rss))

    # The pool must return to fully free once the load is over.
    settle_start = time.monotonic()
    while True:
        after = read_metrics(args.url, headers)
        if after.get("folio:kv_cache_blocks_used", -1) == 0 or time.monotonic() - settle_start > args.settle:
            break
        time.sleep(0.05)
    pool_free = after.get("folio:kv_cache_blocks_used", -1) == 0
    streams = totals.completed + totals.failed + totals.truncated + totals.dropped
    generated = after.get("folio:generation_tokens_total", 0) - before.get("folio:generation_tokens_total", 0)
    print(f"serve_load: {args.clients} clients for {args.duration:.0f} s against {args.url} (wall {wall:.1f} s)")
    print(f"  streams    {streams}: completed {totals.completed} ({totals.half_closed} of them half-closed), "
          f"dropped on purpose {totals.dropped}, failed {totals.failed}, truncated {totals.truncated}"
          + (f"  errors {totals.errors}" if totals.errors else ""))
    print(f"  tokens     {totals.tokens} streamed, {generated:.0f} generated by the engine, "
          f"{generated / wall:.1f} tokens/s")
    print(f"  TTFT       p50 {percentile(totals.ttft, 50) * 1000:.0f} ms, p99 {percentile(totals.ttft, 99) * 1000:.0f} ms"
          f" (mean {statistics.fmean(totals.ttft) * 1000 if totals.ttft else float('nan'):.0f} ms)")
    print(f"  ITL        p50 {percentile(totals.itl, 50) * 1000:.1f} ms, p99 {percentile(totals.itl, 99) * 1000:.1f} ms")
    print(f"  KV pool    {'free' if pool_free else 'NOT free'} after the load "
          f"({after.get('folio:kv_cache_blocks_used', -1):.0f} of {after.get('folio:kv_cache_blocks_total', 0):.0f}"
          f" blocks used, {time.monotonic() - settle_start:.2f} s after the last stream)")
    warm = [r for t, r in rss if t >= 60] or [r for _, r in rss]
    if rss:
        rss_end = rss_mib(args.pid)
        print(f"  RSS        {rss_start:.1f} MiB before, {min(warm):.1f} to {max(warm):.1f} MiB after the first "
              f"minute, {rss_end:.1f} MiB after the load; samples (s, MiB): {rss}")
    if args.json:
        print(json.dumps({"clients": args.clients, "duration_s": args.duration, "wall_s": round(wall, 1),
                          "streams": streams, "completed": totals.completed, "half_closed": totals.half_closed,
                          "dropped": totals.dropped, "failed": totals.failed, "truncated": totals.truncated,
                          "errors": totals.errors, "ttft_p50_ms": percentile(totals.ttft, 50) * 1000,
                          "ttft_p99_ms": percentile(totals.ttft, 99) * 1000,
                          "itl_p50_ms": percentile(totals.itl, 50) * 1000, "itl_p99_ms": percentile(totals.itl, 99) * 1000,
                          "kv_blocks_used_after": after.get("folio:kv_cache_blocks_used", -1), "rss_mib": rss}))
    ok = totals.failed == 0 and totals.truncated == 0 and pool_free and totals.completed > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
