#!/usr/bin/env python3
"""Instructions per token of two folio binaries, counted by callgrind.

Wall-clock A/B runs need a quiet machine; an instruction count does not: it
is the same on a loaded machine as on an idle one (one thread, greedy, the
same prompt), so it shows what a refactor costs per token where timing
cannot. It does not see memory stalls or SIMD width, so it complements
bench/folio_ab.py rather than replacing it.

For each binary: decode instructions per token are the difference between a
run of --long and one of --short new tokens, divided by the difference;
prefill instructions per prompt token are the difference between a run with
the long prompt and one with a one-word prompt (each writing one token),
divided by the difference in prompt tokens. Load and set-up cancel out.

  python3 bench/instructions_ab.py --before OLD/folio --after build/folio \\
      --model ~/.cache/folio/models/smollm2-135m-instruct-q4_1.gguf
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

STORY = ("Once upon a time, in a small village by the sea, there lived an old fisherman "
         "who told stories to the children every evening. ")


def instructions(binary, model, prompt, max_tokens):
    """Instructions callgrind counted for one `folio run`, and its stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
               binary, "run", "-m", model, "-t", "1", "--temp", "0", "-p", prompt,
               "-n", str(max_tokens)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd[:3])} ... failed ({done.returncode}):\n{done.stderr[-2000:]}")
        match = re.search(r"Collected : (\d+)", done.stderr)
        if not match:
            sys.exit(f"no instruction count in callgrind's output:\n{done.stderr[-2000:]}")
        return int(match.group(1)), done.stdout


def measure(binary, model, short, long, prompt_words):
    i_short, out_short = instructions(binary, model, STORY, short)
    i_long, out_long = instructions(binary, model, STORY, long)
    long_prompt = " ".join([STORY] * max(1, prompt_words // len(STORY.split())))
    i_p1, out_p1 = instructions(binary, model, "Hello", 1)
    i_pn, out_pn = instructions(binary, model, long_prompt, 1)
    return {
        "decode": (i_long - i_short) / (long - short),
        "prefill": (i_pn - i_p1),
        "outputs": (out_short, out_long, out_p1, out_pn),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--short", type=int, default=8)
    ap.add_argument("--long", type=int, default=40)
    ap.add_argument("--prompt-words", type=int, default=200)
    args = ap.parse_args()
    if args.long <= args.short:
        sys.exit("--long must be more than --short")
    results = {}
    for label, binary in (("before", args.before), ("after", args.after)):
        results[label] = measure(os.path.abspath(binary), args.model, args.short, args.long, args.prompt_words)
    same = results["before"]["outputs"][:2] == results["after"]["outputs"][:2]
    print(f"| figure | before | after | change |")
    print(f"| --- | ---: | ---: | ---: |")
    for key, name in (("decode", "decode, instructions per token"),
                      ("prefill", f"prefill of ~{args.prompt_words} words, instructions")):
        b, a = results["before"][key], results["after"][key]
        print(f"| {name} | {b / 1e6:,.2f} M | {a / 1e6:,.2f} M | {100 * (a - b) / b:+.3f} % |")
    print(f"decoded text identical: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
