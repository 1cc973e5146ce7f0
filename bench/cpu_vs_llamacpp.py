#!/usr/bin/env python3
"""folio and llama.cpp side by side on the CPU (issue 7): same GGUF file, same
thread count, same prompts, in one run.

For each model it measures
  - prefill tokens/s of one 512-token prompt (one forward pass of 512 tokens),
  - decode tokens/s of one sequence over 128 generated tokens,
  - aggregate decode tokens/s of 8 and of 32 sequences generating together,
each with `folio bench --peer llama.cpp --repetitions N`, which runs folio and
llama.cpp (bench/llama_cpp_peer.py: llama.cpp's batched llama_decode loop) in
turn, folio, llama.cpp, folio, ..., so that a pair shares the machine's noise
of its moment; the table gives medians, and the ratio is the median of the
per-pair ratios. Each folio and llama.cpp figure also gets its fraction of the
memory roofline: bytes a step moves (every weight once, plus the KV cache read
by attention) times steps per second, over the streaming-read bandwidth that
`folio bench --suite bandwidth` measures in the same run (median of a probe
before each model). Prefill is compute-bound, so its roofline fraction is
small by nature; it is there to show how far from memory-bound it is.

With --curve it also measures folio's decode throughput at 1, 2, 4, ... 64
concurrent sequences on SmolLM2 (llama.cpp beside it).

--threads 2,1 runs the comparison at each thread count. One thread per engine
is worth having on a shared machine: with two or more, a step waits at every
barrier for the slowest thread, and a thread that loses its core to another
process stalls the whole step (llama.cpp's barriers spin; folio's pool lets
the other thread take the waiting work), so the one-thread figures show the
kernels' speed with the least scheduling noise.

    build/folio ... (cmake --build build --target folio)
    scripts/setup_reference.sh                       # build/venv-ref with llama-cpp-python
    python3 bench/cpu_vs_llamacpp.py --threads 2,1 --curve --write bench/RESULTS.md
    python3 bench/cpu_vs_llamacpp.py --models smollm2 --repetitions 5 --curve

--write replaces this script's sections of the results file ("## CPU: folio
vs llama.cpp", "## Engine throughput") and leaves the rest as it is. Uses only
the standard library: any python3 runs it.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

MODELS = {  # key: (file in the models cache, name in the table)
    "smollm2": ("smollm2-135m-instruct-q4_1.gguf", "SmolLM2-135M Q4_1"),
    "qwen0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "Qwen2.5-Coder-0.5B Q4_K_M"),
    "qwen1.5b": ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "Qwen2.5-Coder-1.5B Q4_K_M"),
}

# (key, label, folio bench workload flags, figure extractor name)
DECODE_LEN = 128   # tokens generated per sequence in the decode scenarios
DECODE_PROMPT = 16  # prompt tokens per sequence there (32 x 16 = one 512-token step)
SCENARIOS = [
    ("prefill512", "prefill tok/s, 512-token prompt",
     ["--num-prompts", "1", "--input-len", "512", "--output-len", "1"], "prefill"),
    ("decode1", f"decode tok/s, batch 1, {DECODE_LEN} tokens",
     ["--num-prompts", "1", "--input-len", str(DECODE_PROMPT), "--output-len", str(DECODE_LEN)], "decode"),
    ("decode8", f"decode tok/s, 8 sequences, {DECODE_LEN} tokens each",
     ["--num-prompts", "8", "--input-len", str(DECODE_PROMPT), "--output-len", str(DECODE_LEN)], "decode"),
    ("decode32", f"decode tok/s, 32 sequences, {DECODE_LEN} tokens each",
     ["--num-prompts", "32", "--input-len", str(DECODE_PROMPT), "--output-len", str(DECODE_LEN)], "decode"),
]
CURVE = [1, 2, 4, 8, 16, 32, 64]


def log(msg):
    print(f"[cpu_vs_llamacpp {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_json(cmd):
    log(" ".join(shlex.quote(c) for c in cmd))
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def figure(kind, summary, input_len):
    """The scenario's headline figure from one run's summary."""
    if kind == "prefill":
        ttft_s = summary["ttft_ms"]["mean"] / 1000.0
        return input_len / ttft_s if ttft_s > 0 else float("nan")
    return summary["decode_throughput"]


def step_bytes(kind, model, input_len, output_len, batch):
    """Bytes one forward step moves, and the tokens it yields."""
    w = model["weight_bytes_per_step"]
    kv = model["kv_bytes_per_token"]
    if kind == "prefill":
        # One step: every weight once, the prompt's K and V written and read back.
        return w + 2 * input_len * kv, input_len
    # A decode step: every weight once, and each sequence's KV so far (on
    # average the prompt plus half the output) read by attention.
    return w + batch * (input_len + output_len / 2) * kv, batch


def roofline_fraction(kind, model, input_len, output_len, batch, tokens_per_s, bandwidth_gb_s):
    nbytes, tokens = step_bytes(kind, model, input_len, output_len, batch)
    achieved = tokens_per_s / tokens * nbytes
    return achieved / (bandwidth_gb_s * 1e9)


def bandwidth(args, threads):
    j = run_json([args.folio, "bench", "--suite", "bandwidth", "--threads", str(threads), "--json"])
    return j["median_gb_per_s"]


def bench(args, threads, model_path, flags, extra=()):
    cmd = [args.folio, "bench", "-m", model_path, "--threads", str(threads), "--peer", "llama.cpp",
           "--repetitions", str(args.repetitions), "--no-prefix-caching", "--json", *flags, *extra]
    if args.peer_python:
        cmd += ["--peer-python", args.peer_python]
    return run_json(cmd)


def paired(j, kind, input_len):
    """Per repetition (folio, llama.cpp, ratio) of the scenario's figure."""
    f = [figure(kind, s, input_len) for s in j["peer"]["folio_runs"]]
    p = [figure(kind, s, input_len) for s in j["peer"]["peer_runs"]]
    return f, p, [a / b for a, b in zip(f, p) if b > 0]


def flag_value(flags, name):
    return int(flags[flags.index(name) + 1])


def fmt(x, digits=1):
    return f"{x:,.{digits}f}"


def cpu_section(args, results, bandwidths, started, commit, command):
    lines = ["## CPU: folio vs llama.cpp", ""]
    probes = "; ".join(f"{t} thread{'s' if t > 1 else ''}: {fmt(statistics.median(b), 2)} GB/s (probes "
                       f"{', '.join(fmt(x, 2) for x in b)})" for t, b in bandwidths.items())
    lines += [f"Run {started} at commit `{commit}`, {platform.machine()} `{cpu_name()}`, "
              f"{os.cpu_count()} cores, the same thread count for both engines, "
              f"{args.repetitions} interleaved repetitions per figure (medians; the ratio is the median of "
              f"per-pair ratios). Streaming-read bandwidth measured in the same run, {probes}.", ""]
    lines += ["```", command, "```", ""]
    lines += ["| model | threads | figure | folio | llama.cpp | folio / llama.cpp | folio roofline | llama.cpp roofline | load avg |",
              "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        lines.append(f"| {r['model']} | {r['threads']} | {r['label']} | {fmt(r['folio'])} | {fmt(r['peer'])} | "
                     f"{r['ratio']:.2f} | {100 * r['folio_roof']:.0f}% | {100 * r['peer_roof']:.0f}% | "
                     f"{r['load'][0]:.1f} to {r['load'][1]:.1f} |")
    lines += ["", "Roofline: a step's bytes (every weight once, token embeddings excepted unless they are the "
              "output projection, plus the KV cache attention reads: prompt plus half the output per "
              "sequence, f16) times steps per second, over the measured bandwidth. Decode is memory-bound, "
              "so 100% is the ceiling; prefill is compute-bound and sits far below it by nature. "
              "llama.cpp ran with OMP_WAIT_POLICY="
              f"{results[0]['omp'] if results else 'passive'} (see bench/llama_cpp_peer.py) and was stopped "
              "(SIGSTOP) between its turns, so that its idle threads cannot spin through folio's; load avg is the "
              "1-minute load average before and after each figure's runs (the machine is shared).", ""]
    return "\n".join(lines)


def curve_section(args, rows, started, commit, command):
    lines = ["## Engine throughput", ""]
    lines += [f"Decode throughput against concurrent sequences, SmolLM2-135M Q4_1, {args.thread_counts[0]} threads, "
              f"{DECODE_PROMPT}-token prompts, {DECODE_LEN} tokens each, all sent at once; run {started} at "
              f"commit `{commit}`. Decode tokens/s counts tokens produced while every sequence is decoding; "
              f"medians of {args.repetitions} interleaved runs.", ""]
    lines += ["```", command, "```", ""]
    lines += ["| sequences | folio decode tok/s | llama.cpp decode tok/s | folio / llama.cpp | folio TPOT p50 (ms) | load avg |",
              "| ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['batch']} | {fmt(r['folio'])} | {fmt(r['peer'])} | {r['ratio']:.2f} | "
                     f"{fmt(r['tpot'], 2)} | {r['load'][0]:.1f} to {r['load'][1]:.1f} |")
    lines.append("")
    return "\n".join(lines)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def replace_section(text, heading, body):
    """Replaces the section under `heading` (up to the next "## ") or appends it."""
    start = text.find(heading + "\n")
    if start < 0:
        return text.rstrip("\n") + "\n\n" + body.rstrip("\n") + "\n"
    end = text.find("\n## ", start + len(heading))
    end = len(text) if end < 0 else end + 1
    return text[:start] + body.rstrip("\n") + "\n\n" + text[end:].lstrip("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folio", default="build/folio", help="the folio binary (default build/folio)")
    ap.add_argument("--models", default="smollm2,qwen0.5b,qwen1.5b",
                    help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    ap.add_argument("--other-threads-models", metavar="MODELS",
                    help="the models to run at the thread counts after the first (default: --models)")
    ap.add_argument("--models-dir", default=os.environ.get("FOLIO_MODELS", os.path.expanduser("~/.cache/folio/models")))
    ap.add_argument("--threads", default=str(os.cpu_count()),
                    help="threads for both engines; a comma-separated list runs everything at each (default: all cores)")
    ap.add_argument("--repetitions", type=int, default=5, help="interleaved runs per figure (default 5)")
    ap.add_argument("--scenarios", default=",".join(s[0] for s in SCENARIOS),
                    help="comma-separated subset of " + ", ".join(s[0] for s in SCENARIOS))
    ap.add_argument("--curve", action="store_true", help="also the decode throughput curve on SmolLM2")
    ap.add_argument("--no-cpu", action="store_true", help="skip the per-model comparison (with --curve)")
    ap.add_argument("--peer-wait-policy", choices=["active", "passive"], default="passive",
                    help="OMP_WAIT_POLICY for llama.cpp (default passive, the steadier on a shared machine; active "
                         "is llama.cpp's own default and its fastest on a quiet one; folio bench stops the peer "
                         "between its turns, so either way its threads cannot spin through folio's)")
    ap.add_argument("--peer-python", help="Python with llama-cpp-python (default: folio bench's, build/venv-ref)")
    ap.add_argument("--write", metavar="RESULTS.md", help="write the tables into this markdown file")
    ap.add_argument("--json-out", metavar="FILE", help="also save every folio bench result as JSON")
    args = ap.parse_args()
    args.thread_counts = [int(t) for t in args.threads.split(",")]
    os.environ["OMP_WAIT_POLICY"] = args.peer_wait_policy  # inherited by folio bench's peer

    command = "python3 bench/cpu_vs_llamacpp.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], stdout=subprocess.PIPE,
                           text=True, stderr=subprocess.DEVNULL).stdout.strip()
    if dirty:
        commit += " + local changes"
    wanted = set(args.scenarios.split(","))
    raw = []
    results, bandwidths, curve_rows = [], {}, []

    for key in args.models.split(","):
        if key not in MODELS:
            sys.exit(f"unknown model {key}; choose from {', '.join(MODELS)}")
    for threads in [] if args.no_cpu else args.thread_counts:
        bw = bandwidths.setdefault(threads, [])
        models = args.models if threads == args.thread_counts[0] else (args.other_threads_models or args.models)
        for key in models.split(","):
            path = os.path.join(args.models_dir, MODELS[key][0])
            bw.append(bandwidth(args, threads))
            for skey, label, flags, kind in SCENARIOS:
                if skey not in wanted:
                    continue
                batch = flag_value(flags, "--num-prompts")
                input_len = flag_value(flags, "--input-len")
                output_len = flag_value(flags, "--output-len")
                j = bench(args, threads, path, flags)
                raw.append({"model": key, "threads": threads, "scenario": skey, "result": j})
                f, p, ratios = paired(j, kind, input_len)
                fm, pm = statistics.median(f), statistics.median(p)
                results.append({
                    "model": MODELS[key][1], "threads": threads, "label": label, "folio": fm, "peer": pm,
                    "ratio": statistics.median(ratios),
                    "folio_roof": roofline_fraction(kind, j["model"], input_len, output_len, batch, fm, bw[-1]),
                    "peer_roof": roofline_fraction(kind, j["model"], input_len, output_len, batch, pm, bw[-1]),
                    "load": (j["load_average"]["before"][0], j["load_average"]["after"][0]),
                    "omp": j["peer"]["info"].get("omp_wait_policy"),
                })
                log(f"{key} {threads}t {skey}: folio {fm:.1f}, llama.cpp {pm:.1f}, ratio {statistics.median(ratios):.2f} "
                    f"(per run: folio {[round(x, 1) for x in f]}, llama.cpp {[round(x, 1) for x in p]})")
        bw.append(bandwidth(args, threads))

    if args.curve:
        path = os.path.join(args.models_dir, MODELS["smollm2"][0])
        for b in CURVE:
            flags = ["--num-prompts", str(b), "--input-len", str(DECODE_PROMPT), "--output-len", str(DECODE_LEN),
                     "--max-num-seqs", str(max(64, b))]
            j = bench(args, args.thread_counts[0], path, flags)
            raw.append({"model": "smollm2", "threads": args.thread_counts[0], "scenario": f"curve{b}", "result": j})
            f, p, ratios = paired(j, "decode", DECODE_PROMPT)
            curve_rows.append({"batch": b, "folio": statistics.median(f), "peer": statistics.median(p),
                               "ratio": statistics.median(ratios),
                               "tpot": j["folio"]["median"]["tpot_ms"]["p50"],
                               "load": (j["load_average"]["before"][0], j["load_average"]["after"][0])})
            log(f"curve {b}: folio {statistics.median(f):.1f}, llama.cpp {statistics.median(p):.1f}")

    sections = []
    if results:
        sections.append(("## CPU: folio vs llama.cpp", cpu_section(args, results, bandwidths, started, commit, command)))
    if curve_rows:
        sections.append(("## Engine throughput", curve_section(args, curve_rows, started, commit, command)))
    for _, body in sections:
        print(body)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(raw, f)
    if args.write:
        text = open(args.write).read() if os.path.exists(args.write) else ""
        for heading, body in sections:
            text = replace_section(text, heading, body)
        with open(args.write, "w") as f:
            f.write(text)
        log(f"wrote {args.write}")


if __name__ == "__main__":
    main()
