#!/usr/bin/env python3
"""Quality of `folio quantize` per type, with and without calibration.

The base is an F16 model dequantized from the packaged weights (`folio
quantize MODEL base.gguf --type f16`). Each type is quantized from that base
with the reference encoder's scales (--reference-scales: what the gguf package
writes; q4_0 .. q8_0 only, the K types have no such encoder), with searched
scales (the default: least squared error per block), with --calibration
(each block's error weighted by its columns' activations; "calibrated") and,
with --variants ... gptq awq awq+gptq, with --calibration --method gptq,
awq or awq+gptq, on a text held apart from the evaluation text (the other licence texts of /usr/share/common-licenses and
the project's grounded prompts; never GPL-3). Each result is compared with
the base by `folio perplexity --kl-divergence` over the evaluation text
(GPL-3, llama-perplexity's chunks of --ctx tokens): size, bits per weight,
perplexity and its change, mean KL divergence and how often the top token
agrees. Prints a Markdown table.

    python3 bench/quantize_quality.py --model ~/.cache/folio/models/smollm2-135m-instruct-q4_1.gguf
    python3 bench/quantize_quality.py --model ... --types q4_0 q4_k_m --variants calibrated gptq
"""
from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LICENSES = Path("/usr/share/common-licenses")
EVAL_TEXT = LICENSES / "GPL-3"
CALIBRATION_SOURCES = ["Apache-2.0", "MPL-2.0", "GFDL-1.3", "Artistic", "CC0-1.0"]
DEFAULT_TYPES = ["q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_k_s", "q5_0", "q4_1", "q4_0"]


def calibration_text(path: Path) -> None:
    import json

    parts = [(LICENSES / name).read_text(errors="replace") for name in CALIBRATION_SOURCES]
    for line in (ROOT / "bench" / "prompts" / "grounded.jsonl").read_text().splitlines():
        if line.strip():
            parts += [m["content"] for m in json.loads(line)["messages"]]
    path.write_text("\n\n".join(parts))


def run(cmd: list[str]) -> str:
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return done.stdout + done.stderr


def kl(folio: str, model: Path, base: Path, ctx: int, threads: int, chunks: int) -> dict:
    out = run([folio, "perplexity", "-m", str(model), "--kl-divergence", str(base), "-f", str(EVAL_TEXT),
               "-c", str(ctx), "-t", str(threads), "--chunks", str(chunks)])
    grab = lambda pattern: float(re.search(pattern, out).group(1))  # noqa: E731
    return {"ppl": grab(r"Final estimate: PPL = ([\d.]+)"), "base_ppl": grab(r"Base PPL:\s+([\d.]+)"),
            "kld": grab(r"Mean KLD:\s+([\d.]+)"), "kld_se": grab(r"Mean KLD:\s+[\d.]+ \+/- ([\d.]+)"),
            "same_top": grab(r"Same top p:\s+([\d.]+)")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="packaged GGUF to start from")
    ap.add_argument("--folio", default=str(ROOT / "build" / "folio"))
    ap.add_argument("--types", nargs="+", default=DEFAULT_TYPES)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calibration-chunks", type=int, default=0, help="calibrate on at most this many windows")
    ap.add_argument("--chunks", type=int, default=0, help="evaluate at most this many windows (0: all)")
    ap.add_argument("--variants", nargs="+", choices=["reference", "searched", "calibrated", "gptq", "awq", "awq+gptq"],
                    default=["reference", "searched", "calibrated"],
                    help="which encoders to measure (reference: the legacy types only)")
    ap.add_argument("--workdir", help="keep the files here (default: a temporary directory)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        base = work / "base-f16.gguf"
        run([args.folio, "quantize", args.model, str(base), "--type", "f16", "-t", str(args.threads)])
        calib = work / "calibration.txt"
        calibration_text(calib)
        print(f"model {Path(args.model).name}; base F16 {base.stat().st_size / 2**20:.1f} MiB; evaluation "
              f"{EVAL_TEXT} (ctx {args.ctx}); calibration {', '.join(CALIBRATION_SOURCES)} + "
              f"bench/prompts/grounded.jsonl ({calib.stat().st_size // 1024} KiB)", flush=True)
        print("| type | scales | MiB | bits/weight | PPL | vs F16 | mean KLD | same top | quantize s |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
        base_ppl = None
        for qtype in args.types:
            variants = [v for v in args.variants if v != "reference" or "_k" not in qtype]
            for variant in variants:
                out = work / f"{qtype}-{variant}.gguf"
                cmd = [args.folio, "quantize", str(base), str(out), "--type", qtype, "-t", str(args.threads)]
                if variant == "reference":
                    cmd += ["--reference-scales"]
                if variant != "searched" and variant != "reference":
                    cmd += ["--calibration", str(calib), "--calibration-chunks", str(args.calibration_chunks)]
                if variant in ("gptq", "awq", "awq+gptq"):
                    cmd += ["--method", variant]
                start = time.monotonic()
                log = run(cmd)
                seconds = time.monotonic() - start
                bpw = float(re.search(r"\(([\d.]+) bits per weight\)", log).group(1))
                r = kl(args.folio, out, base, args.ctx, args.threads, args.chunks)
                base_ppl = r["base_ppl"]
                print(f"| {qtype} | {variant} | {out.stat().st_size / 2**20:.1f} | {bpw:.2f} | "
                      f"{r['ppl']:.4f} | {100 * (r['ppl'] / r['base_ppl'] - 1):+.2f}% | "
                      f"{r['kld']:.5f} ± {r['kld_se']:.5f} | {r['same_top']:.2f}% | {seconds:.1f} |", flush=True)
                out.unlink()
        print(f"\nF16 base perplexity {base_ppl:.4f}")


if __name__ == "__main__":
    main()
