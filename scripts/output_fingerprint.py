#!/usr/bin/env python3
"""What a folio build writes, as one JSON document, so that two builds can be
compared for bit-identical output (a refactor must not change a token or a
perplexity digit):

    python3 scripts/output_fingerprint.py --folio OLD/folio > old.json
    python3 scripts/output_fingerprint.py --folio build/folio > new.json
    python3 scripts/output_fingerprint.py --compare old.json new.json

Per packaged model: greedy and seeded sampled texts of `folio run` (plain, with
a repetition penalty, with a q8_0 KV cache, with n-gram speculation, at the
reference and f32 settings on the smallest model), perplexity of the GPL-3
text, and through `folio serve`: n = 3 seeded completions with logprobs, a
batch of concurrent greedy requests, and the draft-model speculation of
Qwen2.5 1.5B by 0.5B. Uses only the standard library.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

MODELS = {
    "smollm2": "smollm2-135m-instruct-q4_1.gguf",
    "qwen0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}
PROMPT = "Write a short poem about the sea, then explain what a hash map is."
TEXT = "/usr/share/common-licenses/GPL-3"

RUNS = [  # (name, flags)
    ("greedy", ["--temp", "0"]),
    ("seeded", ["--temp", "0.8", "--top-p", "0.9", "--seed", "42"]),
    ("seeded-topk-minp", ["--temp", "1.1", "--top-k", "40", "--min-p", "0.05", "--seed", "7"]),
    ("greedy-penalty", ["--temp", "0", "--repeat-penalty", "1.3"]),
    ("greedy-q8kv", ["--temp", "0", "--kv-cache-dtype", "q8_0"]),
    ("ngram", ["--temp", "0", "--speculative", "ngram"]),
    # Seeded sampling under speculation is reproducible only with a fixed
    # number of proposals: the adaptive policy picks it from measured step
    # times, and each proposal count draws the seeded stream differently.
    ("seeded-ngram", ["--temp", "0.7", "--seed", "3", "--speculative", "ngram", "--speculative-policy", "fixed"]),
]


def run_text(folio, model, flags, tokens, extra=()):
    out = subprocess.run([folio, "run", "-m", model, "--chat", "-p", PROMPT, "-n", str(tokens), *flags, *extra],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    return out.decode("utf-8", "replace")


def perplexity(folio, model, ctx, chunks):
    out = subprocess.run([folio, "perplexity", "-m", model, "-f", TEXT, "--ctx", str(ctx), "--chunks", str(chunks)],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    # Timings and the loading line (its size figure is not an output) left out.
    lines = re.sub(r", [\d.]+ s \([\d.]+ tok/s\)", "", out).strip().splitlines()
    return [line for line in lines if not line.startswith("loading ")]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def strip(reply):
    for key in ("id", "created", "system_fingerprint"):
        reply.pop(key, None)
    return reply


def serve(folio, model, args, work):
    log = open(os.path.join(work, "serve.log"), "wb")
    proc = subprocess.Popen([folio, "serve", "-m", model, "--port", "0", "--no-request-log", *args],
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 120
    port = None
    while port is None:
        m = re.search(rb"listening on http://[^:]+:(\d+)", open(log.name, "rb").read())
        if m:
            port = int(m.group(1))
        elif proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"folio serve did not start: {open(log.name, 'rb').read().decode()}")
        else:
            time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        time.sleep(0.05)
    return proc, url


def server_outputs(folio, model, name, work, args=()):
    proc, url = serve(folio, model, list(args), work)
    try:
        out = {}
        out["n3-seeded-logprobs"] = strip(post(url + "/v1/completions", {
            "model": name, "prompt": "The three most useful data structures are", "max_tokens": 24, "n": 3,
            "temperature": 0.9, "seed": 11, "logprobs": 5}))
        out["chat-logprobs"] = strip(post(url + "/v1/chat/completions", {
            "model": name, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 24,
            "temperature": 0, "logprobs": True, "top_logprobs": 3, "frequency_penalty": 0.5,
            "presence_penalty": 0.3, "logit_bias": {"13": -5}}))
        prompts = [f"Count from {i} to {i + 9}:" for i in range(12)]
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            replies = list(pool.map(lambda p: strip(post(url + "/v1/completions", {
                "model": name, "prompt": p, "max_tokens": 32, "temperature": 0})), prompts))
        out["batch-greedy"] = [r["choices"][0]["text"] for r in replies]
        return out
    finally:
        proc.terminate()
        proc.wait(60)


def fingerprint(args):
    doc = {}
    for key, file in MODELS.items():
        if args.only and key not in args.only:
            continue
        model = os.path.join(args.models_dir, file)
        entry = {}
        for name, flags in RUNS:
            entry[name] = run_text(args.folio, model, flags, args.tokens)
        if key == "smollm2":
            entry["greedy-f32"] = run_text(args.folio, model, ["--temp", "0", "--precision", "f32"], args.tokens)
            entry["greedy-scalar"] = run_text(args.folio, model, ["--temp", "0", "--cpu-level", "scalar"], 48)
            entry["greedy-reference"] = run_text(args.folio, model, ["--temp", "0", "--backend", "reference"], 24)
        entry["perplexity"] = perplexity(args.folio, model, 256, 4)
        entry["server"] = server_outputs(args.folio, model, file[:-len(".gguf")], args.work)
        print(f"fingerprint: {key} done", file=sys.stderr)
        doc[key] = entry
    if not args.only or "draft" in args.only:
        target = os.path.join(args.models_dir, MODELS["qwen1.5b"])
        draft = os.path.join(args.models_dir, MODELS["qwen0.5b"])
        doc["draft"] = {
            "greedy": run_text(args.folio, target, ["--temp", "0", "--speculative", f"draft:{draft}"], args.tokens),
            "seeded": run_text(args.folio, target, ["--temp", "0.8", "--seed", "5", "--speculative", f"draft:{draft}",
                                                    "--speculative-policy", "fixed"],
                               args.tokens),
        }
    return doc


def compare(a_path, b_path):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    differences = 0

    def walk(x, y, where):
        nonlocal differences
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                walk(x.get(k), y.get(k), f"{where}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (p, q) in enumerate(zip(x, y)):
                walk(p, q, f"{where}[{i}]")
        elif x != y:
            differences += 1
            print(f"differs at {where}:\n  {str(x)[:300]!r}\n  {str(y)[:300]!r}")

    walk(a, b, "")
    print(f"{differences} difference(s)" if differences else "identical")
    return 1 if differences else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folio", help="the folio binary to fingerprint")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two fingerprints")
    ap.add_argument("--tokens", type=int, default=160, help="tokens per `folio run` text")
    ap.add_argument("--only", nargs="*", help="models to run (smollm2 qwen0.5b qwen1.5b gemma3 draft)")
    ap.add_argument("--models-dir", default=os.environ.get("FOLIO_MODELS", os.path.expanduser("~/.cache/folio/models")))
    ap.add_argument("--work", default="/tmp", help="folder for the server's log")
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.folio:
        ap.error("give --folio BINARY or --compare A B")
    json.dump(fingerprint(args), sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
