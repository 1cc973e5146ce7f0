#!/usr/bin/env python3
"""Two folio builds side by side (before and after a change): the same
workloads, taking turns run by run (before, after, before, ...), so that a
pair shares the machine's noise of its moment. Prints, per workload, the
median figure of each build and the median of the per-pair ratios
(after / before) with every ratio.

    git worktree add /tmp/before <commit> && cmake -S /tmp/before -B /tmp/before/build -G Ninja \\
        -DFOLIO_BUILD_TESTS=OFF && cmake --build /tmp/before/build --target folio
    python3 bench/folio_ab.py --before /tmp/before/build/folio --after build/folio --repetitions 5

Figures: prefill tokens/s of one 512-token prompt (from the time to first
token), and decode tokens/s of 1 and 32 sequences (16-token prompts, 128 or
256 tokens each; 64 on the 1.5B), on SmolLM2-135M, Qwen2.5-Coder-0.5B and
Qwen2.5-Coder-1.5B (--only picks some). Uses only the
standard library.
"""
import argparse
import json
import os
import statistics
import subprocess

CASES = [  # (name, model file, folio bench flags, figure)
    ("smollm2 prefill 512", "smollm2-135m-instruct-q4_1.gguf", ["--num-prompts", "1", "--input-len", "512", "--output-len", "1"], "prefill"),
    ("smollm2 decode, 1 sequence", "smollm2-135m-instruct-q4_1.gguf", ["--num-prompts", "1", "--input-len", "16", "--output-len", "256"], "decode"),
    ("smollm2 decode, 32 sequences", "smollm2-135m-instruct-q4_1.gguf", ["--num-prompts", "32", "--input-len", "16", "--output-len", "128"], "decode"),
    ("qwen0.5b prefill 512", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", ["--num-prompts", "1", "--input-len", "512", "--output-len", "1"], "prefill"),
    ("qwen0.5b decode, 1 sequence", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", ["--num-prompts", "1", "--input-len", "16", "--output-len", "128"], "decode"),
    ("qwen0.5b decode, 32 sequences", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", ["--num-prompts", "32", "--input-len", "16", "--output-len", "128"], "decode"),
    ("qwen1.5b prefill 512", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", ["--num-prompts", "1", "--input-len", "512", "--output-len", "1"], "prefill"),
    ("qwen1.5b decode, 1 sequence", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", ["--num-prompts", "1", "--input-len", "16", "--output-len", "64"], "decode"),
    ("qwen1.5b decode, 32 sequences", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", ["--num-prompts", "32", "--input-len", "16", "--output-len", "64"], "decode"),
]


def figure(binary, model, flags, kind, threads):
    out = subprocess.run([binary, "bench", "-m", model, "--threads", str(threads), "--no-prefix-caching", "--json",
                          "--no-progress", *flags], check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    s = json.loads(out)["folio"]["median"]
    if kind == "prefill":
        return int(flags[flags.index("--input-len") + 1]) / (s["ttft_ms"]["mean"] / 1000.0)
    return s["decode_throughput"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the folio binary before the change")
    ap.add_argument("--after", default="build/folio", help="the folio binary after it (default build/folio)")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--only", help="run only the workloads whose name contains this")
    ap.add_argument("--models-dir", default=os.environ.get("FOLIO_MODELS", os.path.expanduser("~/.cache/folio/models")))
    args = ap.parse_args()
    for name, model, flags, kind in CASES:
        if args.only and args.only not in name:
            continue
        path = os.path.join(args.models_dir, model)
        before, after = [], []
        for _ in range(args.repetitions):
            before.append(figure(args.before, path, flags, kind, args.threads))
            after.append(figure(args.after, path, flags, kind, args.threads))
        ratios = [a / b for a, b in zip(after, before)]
        print(f"{name}: before {statistics.median(before):.1f}, after {statistics.median(after):.1f} tok/s, "
              f"after / before {statistics.median(ratios):.3f} (pairs: {', '.join(f'{r:.2f}' for r in ratios)})",
              flush=True)


if __name__ == "__main__":
    main()
