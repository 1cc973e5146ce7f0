#!/usr/bin/env python3
"""Bounded load test for `folio serve`: N streaming clients for M seconds.

Each client sends streaming completions one after another until the time is
up, and every stream is checked: completed (finish_reason, then [DONE]),
failed (an HTTP error or a broken connection) or truncated (it ended without
both). It reports p50/p99 time to first token and inter-token latency, and
checks afterwards through /metrics that the KV pool returns to fully free.

    build/folio serve &            # a CPU server on 127.0.0.1:8080
    build/venv/bin/python bench/serve_load.py --clients 32 --duration 30

Exit status 1 when a stream failed or was truncated, or the pool stayed in use.
"""
import argparse
import asyncio
import json
import statistics
import sys
import time

import httpx


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


class Totals:
    def __init__(self):
        self.completed = self.failed = self.truncated = 0
        self.tokens = 0
        self.ttft = []  # seconds, one per stream that produced text
        self.itl = []   # seconds between consecutive text events of a stream
        self.errors = {}


async def one_stream(client, args, i, totals):
    body = {"prompt": f"{args.prompt} ({i})", "max_tokens": args.max_tokens, "stream": True,
            "temperature": args.temperature, "stream_options": {"include_usage": True}}
    if args.ignore_eos:
        body["ignore_eos"] = True
    start = time.perf_counter()
    last = None
    finish = None
    done = False
    try:
        async with client.stream("POST", args.url + "/v1/completions", json=body) as r:
            if r.status_code != 200:
                totals.failed += 1
                key = f"HTTP {r.status_code}"
                totals.errors[key] = totals.errors.get(key, 0) + 1
                await r.aread()
                return
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    totals.tokens += chunk["usage"]["completion_tokens"]
                for choice in chunk["choices"]:
                    now = time.perf_counter()
                    if choice["text"]:
                        if last is None:
                            totals.ttft.append(now - start)
                        else:
                            totals.itl.append(now - last)
                        last = now
                    finish = choice["finish_reason"] or finish
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        totals.failed += 1
        key = type(e).__name__
        totals.errors[key] = totals.errors.get(key, 0) + 1
        return
    if done and finish:
        totals.completed += 1
    else:
        totals.truncated += 1


async def client_loop(client, args, cid, deadline, totals):
    i = 0
    while time.monotonic() < deadline:
        await one_stream(client, args, cid * 100000 + i, totals)
        i += 1


def read_metrics(url, headers):
    out = {}
    for line in httpx.get(url + "/metrics", headers=headers, timeout=10).text.splitlines():
        if line.startswith("folio:") and "{" in line and "_bucket" not in line:
            out[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
    return out


async def run(args):
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=args.clients + 8, max_keepalive_connections=args.clients + 8)
    totals = Totals()
    deadline = time.monotonic() + args.duration
    start = time.monotonic()
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits, headers=headers) as client:
        await asyncio.gather(*(client_loop(client, args, c, deadline, totals) for c in range(args.clients)))
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
    args = p.parse_args()
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}

    try:
        before = read_metrics(args.url, headers)
    except httpx.HTTPError as e:
        sys.exit(f"serve_load: cannot reach {args.url}/metrics ({e}); start a server with `folio serve`")
    totals, wall = asyncio.run(run(args))

    # The pool must return to fully free once the load is over.
    settle_start = time.monotonic()
    while True:
        after = read_metrics(args.url, headers)
        if after.get("folio:kv_cache_blocks_used", -1) == 0 or time.monotonic() - settle_start > args.settle:
            break
        time.sleep(0.05)
    pool_free = after.get("folio:kv_cache_blocks_used", -1) == 0
    streams = totals.completed + totals.failed + totals.truncated
    generated = after.get("folio:generation_tokens_total", 0) - before.get("folio:generation_tokens_total", 0)
    print(f"serve_load: {args.clients} clients for {args.duration:.0f} s against {args.url} (wall {wall:.1f} s)")
    print(f"  streams    {streams}: completed {totals.completed}, failed {totals.failed}, "
          f"truncated {totals.truncated}" + (f"  errors {totals.errors}" if totals.errors else ""))
    print(f"  tokens     {totals.tokens} streamed, {generated:.0f} generated by the engine, "
          f"{generated / wall:.1f} tokens/s")
    print(f"  TTFT       p50 {percentile(totals.ttft, 50) * 1000:.0f} ms, p99 {percentile(totals.ttft, 99) * 1000:.0f} ms"
          f" (mean {statistics.fmean(totals.ttft) * 1000 if totals.ttft else float('nan'):.0f} ms)")
    print(f"  ITL        p50 {percentile(totals.itl, 50) * 1000:.1f} ms, p99 {percentile(totals.itl, 99) * 1000:.1f} ms")
    print(f"  KV pool    {'free' if pool_free else 'NOT free'} after the load "
          f"({after.get('folio:kv_cache_blocks_used', -1):.0f} of {after.get('folio:kv_cache_blocks_total', 0):.0f}"
          f" blocks used, {time.monotonic() - settle_start:.2f} s after the last stream)")
    ok = totals.failed == 0 and totals.truncated == 0 and pool_free and totals.completed > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
