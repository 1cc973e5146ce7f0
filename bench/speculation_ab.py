#!/usr/bin/env python3
"""Speculation on against off, over the workloads of `folio bench`.

For each workload (grounded, chat and random prompts, at 1 and at 32 requests
in flight) it runs `folio bench` without speculation and with it, taking
turns, --repetitions times, and reports the median output tokens/s of each
and their ratio (the goal: never below 1 beyond noise). Output tokens/s is
the whole run's: prefill, decode and every step between. Each run is its own
process, so the adaptive policy starts from nothing every time.

  python3 bench/speculation_ab.py --speculative ngram
  python3 bench/speculation_ab.py -m qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
      --speculative draft:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --policies adaptive fixed
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

WORKLOADS = {
    # name: folio bench flags
    "grounded": ["--dataset", "grounded"],
    "chat": ["--dataset", "chat"],
    "random": ["--dataset", "random", "--input-len", "64"],
}


def models_dir():
    return os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models"))


def in_models(path):
    """A bare file name is looked up in the models cache."""
    if not path or os.sep in path:
        return path
    return os.path.join(models_dir(), path)


def run_bench(folio, args, workload, concurrency, speculative, policy):
    cmd = [folio, "bench", "--json", "--no-progress", "--no-prefix-caching", "--repetitions", "1",
           "--max-concurrency", str(concurrency), "--threads", str(args.threads),
           "--num-prompts", str(args.prompts_alone if concurrency == 1 else concurrency),
           "--output-len", str(args.output_len), *WORKLOADS[workload]]
    if args.model:
        cmd += ["-m", in_models(args.model)]
    if speculative:
        method = args.speculative
        if method.startswith("draft:"):
            method = "draft:" + in_models(method[len("draft:"):])
        cmd += ["--speculative", method, "--speculative-policy", policy,
                "--num-speculative-tokens", str(args.num_speculative_tokens)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    m = r["folio"]["median"]
    fig = r.get("speculation") or {}
    return {"output_tok_s": m["output_throughput"], "tpot_p50_ms": m["tpot_ms"]["p50"],
            "proposed": fig.get("proposed_tokens", 0), "accepted": fig.get("accepted_tokens", 0),
            "load": r.get("load_average")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folio", default="build/folio")
    p.add_argument("-m", "--model", default="", help="target GGUF (default: folio's default model)")
    p.add_argument("--speculative", default="ngram", help="ngram or draft:PATH")
    p.add_argument("--policies", nargs="+", default=["adaptive"], choices=["adaptive", "fixed"])
    p.add_argument("--num-speculative-tokens", type=int, default=4)
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--concurrency", nargs="+", type=int, default=[1, 32])
    p.add_argument("--prompts-alone", type=int, default=6, help="requests of a run at 1 in flight")
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json-out", default="")
    args = p.parse_args()

    rows = []
    for workload in args.workloads:
        for conc in args.concurrency:
            arms = [("off", False, "")] + [(pol, True, pol) for pol in args.policies]
            runs = {name: [] for name, _, _ in arms}
            for rep in range(args.repetitions):
                # Taking turns, the order turned around every other repetition.
                order = arms if rep % 2 == 0 else list(reversed(arms))
                for name, spec, pol in order:
                    runs[name].append(run_bench(args.folio, args, workload, conc, spec, pol))
                    print(f"{workload} x{conc} {name} rep {rep}: {runs[name][-1]['output_tok_s']:.1f} tok/s",
                          file=sys.stderr)
            off = [r["output_tok_s"] for r in runs["off"]]
            row = {"workload": workload, "concurrency": conc, "off_tok_s": statistics.median(off), "arms": {}}
            for name, spec, _ in arms:
                if not spec:
                    continue
                on = [r["output_tok_s"] for r in runs[name]]
                prop = sum(r["proposed"] for r in runs[name])
                acc = sum(r["accepted"] for r in runs[name])
                row["arms"][name] = {
                    "tok_s": statistics.median(on),
                    # Per repetition: spec / off of the same turn, then the median.
                    "ratio": statistics.median(a / b for a, b in zip(on, off)),
                    "ratios": [round(a / b, 3) for a, b in zip(on, off)],
                    "proposed_per_run": prop / len(on),
                    "acceptance": acc / prop if prop else 0.0,
                }
            rows.append(row)

    head = "| workload | in flight | off tok/s |" + "".join(f" {n} tok/s | {n} / off (per repetition) | proposed a run, acceptance |" for n in args.policies)
    print(head)
    print("| --- | ---: | ---: |" + " ---: | --- | --- |" * len(args.policies))
    for row in rows:
        line = f"| {row['workload']} | {row['concurrency']} | {row['off_tok_s']:.1f} |"
        for n in args.policies:
            a = row["arms"][n]
            line += (f" {a['tok_s']:.1f} | **{a['ratio']:.2f}x** ({', '.join(f'{x:.2f}' for x in a['ratios'])}) |"
                     f" {a['proposed_per_run']:.0f}, {100 * a['acceptance']:.0f} % |")
        print(line)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
