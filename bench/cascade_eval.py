#!/usr/bin/env python3
"""A query cascade measured: accuracy against cost on bench/cascade/questions.jsonl.

Asks every question of the small and of the large model (greedy, logprobs with
the top two), through a `folio serve` that serves both by name, and keeps
each answer, whether it is right, its cost (seconds, generated tokens, weight
bytes read: the model's weight bytes once per forward pass) and three
confidence scores of the small answer: the mean token log-probability, the
smallest one, and the smallest margin between the top two. Then, on the
held-out half, with thresholds chosen on the calibration half:
  all small, all large, the cascade at escalation rates of 10..90 %, random
  routing at the same rates (its expectation), and the oracle (escalate
  exactly where the small model is wrong).
With --check-server-cascade NAME, the server's own cascade (folio serve
--cascade) is asked the held-out questions too, and its choices must equal
the simulation's at its threshold.

    build/folio serve -m qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -m small=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \\
        --cascade cascade=small,qwen2.5-coder-1.5b-instruct-q4_k_m --port 8080 &
    python3 bench/cascade_eval.py --url http://127.0.0.1:8080 --small small \\
        --large qwen2.5-coder-1.5b-instruct-q4_k_m --small-bytes 491400064 --large-bytes 1117320768
"""
import argparse
import json
import math
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path

SYSTEM = "Answer with the answer alone: a number, a word or a name, nothing else."


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    start = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        headers = dict(r.headers)
        return json.loads(r.read()), time.monotonic() - start, headers


def is_right(answer, expected):
    text = answer.strip().splitlines()[0] if answer.strip() else ""
    if re.fullmatch(r"-?\d+", expected):
        m = re.search(r"-?\d[\d,]*", text)
        return bool(m) and m.group(0).replace(",", "") == expected
    words = re.findall(r"[A-Za-z]+(?: [A-Za-z]+)?", text)
    flat = " ".join(re.findall(r"[A-Za-z]+", text)).lower()
    if len(expected) <= 2:  # a letter or a symbol: it must stand alone, in its case for symbols
        return any(w == expected or (len(expected) == 1 and w.lower() == expected.lower()) for w in
                   re.findall(r"[A-Za-z]+", text))
    return bool(words) and expected.lower() in flat


def scores(choice):
    content = (choice.get("logprobs") or {}).get("content") or []
    if not content:
        return {"mean": -math.inf, "min": -math.inf, "margin": -math.inf}
    lps = [t["logprob"] for t in content]
    margins = []
    for t in content:
        tops = sorted((x["logprob"] for x in t.get("top_logprobs", [])), reverse=True)
        margins.append(tops[0] - tops[1] if len(tops) >= 2 else 0.0)
    return {"mean": sum(lps) / len(lps), "min": min(lps), "margin": min(margins)}


def ask(url, model, question, max_tokens):
    body = {"model": model, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            "temperature": 0, "max_tokens": max_tokens, "logprobs": True, "top_logprobs": 2}
    r, seconds, headers = post(url + "/v1/chat/completions", body)
    choice = r["choices"][0]
    return {"text": choice["message"]["content"] or "", "seconds": seconds,
            "tokens": r["usage"]["completion_tokens"], "scores": scores(choice), "model": r["model"],
            "headers": {k.lower(): v for k, v in headers.items()}}


def pick(rows, key):
    return [r for r in rows if r["split"] == key]


def summarize(rows, small_bytes, large_bytes):
    def cost(r, escalate):
        s = r["small"]
        c_time = s["seconds"] + (r["large"]["seconds"] if escalate else 0)
        c_bytes = small_bytes * s["tokens"] + (large_bytes * r["large"]["tokens"] if escalate else 0)
        return c_time, c_bytes

    def policy(rows, escalate):
        right, times, nbytes = 0, [], []
        for r, e in zip(rows, escalate):
            right += r["large"]["right"] if e else r["small"]["right"]
            t, b = cost(r, e)
            times.append(t)
            nbytes.append(b)
        return {"accuracy": right / len(rows), "seconds": statistics.mean(times), "gb_read": statistics.mean(nbytes) / 1e9,
                "escalated": sum(escalate) / len(rows)}

    cal, held = pick(rows, "calibration"), pick(rows, "held_out")
    lines = []
    all_small = policy(held, [False] * len(held))
    all_large = {"accuracy": statistics.mean(r["large"]["right"] for r in held),
                 "seconds": statistics.mean(r["large"]["seconds"] for r in held),
                 "gb_read": statistics.mean(large_bytes * r["large"]["tokens"] for r in held) / 1e9, "escalated": 1.0}
    oracle = policy(held, [not r["small"]["right"] for r in held])
    lines.append(("all small", all_small))
    lines.append(("all large", all_large))
    lines.append(("oracle", oracle))
    # How well each score tells right from wrong on the calibration half: the area under the ROC curve.
    auc = {}
    for measure in ("mean", "min", "margin"):
        pos = [r["small"]["scores"][measure] for r in cal if r["small"]["right"]]
        neg = [r["small"]["scores"][measure] for r in cal if not r["small"]["right"]]
        pairs = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
        auc[measure] = pairs / (len(pos) * len(neg)) if pos and neg else float("nan")
    best = max(auc, key=lambda m: auc[m])
    thresholds = {}
    for rate in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        cal_scores = sorted(r["small"]["scores"][best] for r in cal)
        threshold = cal_scores[min(len(cal_scores) - 1, int(rate * len(cal_scores)))]
        thresholds[rate] = threshold
        escalate = [r["small"]["scores"][best] < threshold for r in held]
        c = policy(held, escalate)
        lines.append((f"cascade ({best} < {threshold:.4f})", c))
        rr = c["escalated"]
        lines.append((f"random at {rr:.0%}", {
            "accuracy": (1 - rr) * all_small["accuracy"] + rr * all_large["accuracy"],
            "seconds": all_small["seconds"] + rr * statistics.mean(r["large"]["seconds"] for r in held),
            "gb_read": all_small["gb_read"] + rr * statistics.mean(large_bytes * r["large"]["tokens"] for r in held) / 1e9,
            "escalated": rr}))
    return lines, auc, best, thresholds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--small", required=True)
    ap.add_argument("--large", required=True)
    ap.add_argument("--small-bytes", type=int, required=True, help="the small model's weight bytes")
    ap.add_argument("--large-bytes", type=int, required=True, help="the large model's weight bytes")
    ap.add_argument("--questions", default=str(Path(__file__).resolve().parent / "cascade" / "questions.jsonl"))
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--limit", type=int, default=0, help="the first N questions only")
    ap.add_argument("--save", help="write every answer here (JSON)")
    ap.add_argument("--load", help="read the answers from a --save instead of asking")
    ap.add_argument("--check-server-cascade", metavar="NAME", help="the server's cascade model name to check")
    ap.add_argument("--server-threshold", type=float, help="its threshold (folio serve --cascade-threshold)")
    ap.add_argument("--server-measure", default="min")
    a = ap.parse_args()

    if a.load:
        rows = json.loads(Path(a.load).read_text())
    else:
        rows = [json.loads(line) for line in open(a.questions)]
        if a.limit:
            rows = rows[:a.limit]
        for i, r in enumerate(rows):
            for which, model in (("small", a.small), ("large", a.large)):
                r[which] = ask(a.url, model, r["question"], a.max_tokens)
                r[which]["right"] = is_right(r[which]["text"], r["answer"])
            if i % 25 == 0:
                print(f"{i}/{len(rows)}", file=sys.stderr)
        if a.save:
            Path(a.save).write_text(json.dumps(rows, indent=1))
    lines, auc, best, _ = summarize(rows, a.small_bytes, a.large_bytes)
    held = pick(rows, "held_out")
    print(f"{len(rows)} questions, {len(held)} held out; small {a.small}, large {a.large}")
    print("how well each score of the small answer tells right from wrong (ROC AUC, calibration half): " +
          ", ".join(f"{m} {v:.3f}" for m, v in auc.items()) + f"; the cascade uses {best}")
    print(f"| policy (held-out) | accuracy | of large's | escalated | s per answer | GB read per answer |")
    print("| --- | --- | --- | --- | --- | --- |")
    large_acc = lines[1][1]["accuracy"]
    for name, p in lines:
        print(f"| {name} | {p['accuracy']:.3f} | {p['accuracy'] / large_acc:.0%} | {p['escalated']:.0%} | "
              f"{p['seconds']:.3f} | {p['gb_read']:.2f} |")
    if a.check_server_cascade:
        mismatches = 0
        for r in held:
            got = ask(a.url, a.check_server_cascade, r["question"], a.max_tokens)
            escalate = r["small"]["scores"][a.server_measure] < a.server_threshold
            want = r["large"] if escalate else r["small"]
            said = got["headers"].get("x-folio-cascade", "")
            if got["text"] != want["text"] or said != ("large" if escalate else "small"):
                mismatches += 1
                print(f"mismatch on {r['id']}: server {said} {got['text']!r}, simulation "
                      f"{'large' if escalate else 'small'} {want['text']!r}", file=sys.stderr)
        print(f"server cascade: {len(held) - mismatches} of {len(held)} held-out answers as simulated")
        sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
