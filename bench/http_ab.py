#!/usr/bin/env python3
"""Two `folio serve` builds through their HTTP layers, taking turns: the
same `folio bench --url` workloads (1 stream and 32 streams of 128-token
prompts and 128-token answers, streamed) against the one build's server, then
the other's, run by run, so that a pair shares the machine's noise of its
moment. One server runs at a time; the client is the same binary for both.
Prints, per workload and figure, each build's median and the median of the
per-pair ratios (after / before); one figure is the CPU time the server
process spent on the run (warm-up included), which a busy machine disturbs
far less than the latencies.

    python3 bench/http_ab.py --before /work/old/folio --after build/folio --repetitions 5

Uses only the standard library.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import time
import urllib.request

CASES = [  # (name, folio bench flags)
    ("1 stream", ["--num-prompts", "4", "--max-concurrency", "1"]),
    ("32 streams", ["--num-prompts", "32", "--max-concurrency", "32"]),
]
FIGURES = [  # (key, label, higher is better)
    ("output_throughput", "output tok/s", True),
    ("server_cpu_s", "server CPU s per run", False),
    ("ttft_p50_ms", "TTFT p50 ms", False),
    ("ttft_p99_ms", "TTFT p99 ms", False),
    ("tpot_p50_ms", "TPOT p50 ms", False),
    ("itl_p99_ms", "ITL p99 ms", False),
]


def cpu_seconds(pid):
    """User + system CPU time of a process so far (a figure that the machine's
    other load disturbs far less than wall-clock time)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(binary, model, log):
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "--kv-cache-memory", "512MiB",
                             "--max-model-len", "1024", "--no-request-log"], stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(log.name) as f:
            m = re.search(r"listening on http://[^:]+:(\d+)", f.read())
        if m:
            url = f"http://127.0.0.1:{m.group(1)}"
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return proc, url
            except OSError:
                pass
        if proc.poll() is not None:
            raise SystemExit(f"{binary} serve exited with {proc.returncode}; see {log.name}")
        time.sleep(0.05)
    raise SystemExit(f"{binary} serve did not become ready; see {log.name}")


def run(server_binary, client, model, flags, log_path):
    with open(log_path, "w") as log:
        proc, url = start_server(server_binary, model, log)
        try:
            cpu_start = cpu_seconds(proc.pid)
            out = subprocess.run([client, "bench", "-m", model, "--url", url, "--input-len", "128", "--output-len",
                                  "128", "--json", "--no-progress", *flags], check=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout
            cpu = cpu_seconds(proc.pid) - cpu_start
        finally:
            proc.terminate()
            proc.wait(60)
    s = json.loads(out)["folio"]["median"]
    return {"output_throughput": s["output_throughput"], "server_cpu_s": cpu, "ttft_p50_ms": s["ttft_ms"]["p50"],
            "ttft_p99_ms": s["ttft_ms"]["p99"], "tpot_p50_ms": s["tpot_ms"]["p50"], "itl_p99_ms": s["itl_ms"]["p99"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the folio binary whose server is measured first")
    ap.add_argument("--after", default="build/folio", help="the other (default build/folio)")
    ap.add_argument("--client", default="build/folio", help="the folio binary that runs `bench --url`")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--model", default=os.path.join(os.environ.get("FOLIO_MODELS", os.path.expanduser(
        "~/.cache/folio/models")), "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("--log", default="/tmp/http_ab_serve.log", help="where each server's stderr goes")
    ap.add_argument("--only", help="run only the workloads whose name contains this")
    args = ap.parse_args()
    report = {}
    for name, flags in CASES:
        if args.only and args.only not in name:
            continue
        runs = {"before": [], "after": []}
        for _ in range(args.repetitions):
            for side in ("before", "after"):
                runs[side].append(run(getattr(args, side), args.client, args.model, flags, args.log))
        report[name] = runs
        print(f"## {name} ({args.repetitions} runs each, interleaved)")
        print("| figure | before (median) | after (median) | after / before (median of pairs) |")
        print("| --- | --- | --- | --- |")
        for key, label, _ in FIGURES:
            b = [r[key] for r in runs["before"]]
            a = [r[key] for r in runs["after"]]
            ratio = statistics.median(x / y for x, y in zip(a, b) if y)
            print(f"| {label} | {statistics.median(b):.2f} | {statistics.median(a):.2f} | {ratio:.3f} |")
        print(flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
