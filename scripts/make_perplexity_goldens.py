#!/usr/bin/env python3
"""Perplexity goldens from llama.cpp (llama-cpp-python), in llama-perplexity's windows.

The text is a licence from /usr/share/common-licenses (on every Debian
machine). Each window of `ctx` tokens is evaluated from an empty cache with
its first token replaced by BOS when the vocab adds one; the second half of
each window is scored - what llama-perplexity does by default. Writes
tests/data/reference/perplexity.json.

Run in the reference environment (scripts/setup_reference.sh makes it):
    build/venv-ref/bin/python scripts/make_perplexity_goldens.py
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TEXT = Path("/usr/share/common-licenses/GPL-3")
CASES = [
    # model file, ctx, chunks (small enough for CI)
    ("smollm2-135m-instruct-q4_1.gguf", 256, 8),
    ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 256, 4),
]


def models_dir() -> Path:
    env = os.environ.get("FOLIO_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "folio" / "models"


def perplexity(model_file: str, ctx: int, chunks: int) -> dict:
    from llama_cpp import Llama

    llm = Llama(model_path=str(models_dir() / model_file), n_ctx=ctx, n_batch=ctx, n_threads=os.cpu_count() or 1,
                logits_all=True, verbose=False)
    tokens = llm.tokenize(TEXT.read_bytes(), add_bos=True, special=False)
    add_bos = llm._model.add_bos_token() if hasattr(llm._model, "add_bos_token") else tokens[0] == llm.token_bos()
    first = ctx // 2
    nll, count, running = 0.0, 0, []
    for c in range(min(chunks, len(tokens) // ctx)):
        start = c * ctx
        window = list(tokens[start:start + ctx])
        if add_bos:
            window[0] = llm.token_bos()
        llm.reset()
        llm.eval(window)
        logits = np.array(llm.scores[:ctx], dtype=np.float64)
        for pos in range(first, ctx - 1):
            row = logits[pos]
            m = row.max()
            nll += m + math.log(np.exp(row - m).sum()) - row[tokens[start + pos + 1]]
            count += 1
        running.append(math.exp(nll / count))
    return {"model": model_file, "ctx": ctx, "chunks": len(running), "num_tokens": len(tokens),
            "perplexity": math.exp(nll / count), "running": running}


def main() -> None:
    out = {"text": str(TEXT), "cases": [perplexity(*c) for c in CASES]}
    dest = ROOT / "tests" / "data" / "reference" / "perplexity.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    for c in out["cases"]:
        print(f"{c['model']}: ctx {c['ctx']}, {c['chunks']} chunks, PPL {c['perplexity']:.4f}")


if __name__ == "__main__":
    main()
