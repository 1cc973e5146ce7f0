#!/usr/bin/env python3
"""Reference goldens for folio's forward pass, from two independent implementations.

1. Hugging Face transformers on the CPU in fp32, loading the same GGUF file
   (it dequantizes the weights with the gguf package): per-position logits of
   teacher-forced sequences, stored as the top-k ids and values plus the
   log-sum-exp of every position.
2. llama.cpp through llama-cpp-python: greedy 64-token continuations of the
   same prompts, with the top-1/top-2 logit margin at every step.

The prompts are tokenized by llama.cpp so both references and folio see the
same ids. Outputs go to tests/data/reference/<model>.json (small, committed).

3. For models with sliding-window layers (--long-context, Gemma 3 by
   default): transformers' logits over the last positions of one sequence
   longer than the window (the first LONG_TOKENS tokens of the GPL-3 text), in
   tests/data/reference/<model>.long.json.

Run in the reference environment (scripts/setup_reference.sh makes it):
    build/venv-ref/bin/python scripts/make_model_goldens.py [--models NAME ...]
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "reference"
TOP_K = 8
CONTINUATION_TOKENS = 64
LONG_TEXT = Path("/usr/share/common-licenses/GPL-3")
LONG_TOKENS = 800      # beyond Gemma 3's 512-token window
LONG_CHECKED = 160     # positions at the end whose logits are stored
LONG_CONTEXT_MODELS = ["gemma-3-270m"]

MODELS = {
    "smollm2-135m-instruct-q4_1": "smollm2-135m-instruct-q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma-3-270m": "gemma-3-270m-q4_k_m.gguf",
}

# Twenty prompts: plain prose, chat-formatted turns, code, lists and numbers.
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWhat is the boiling point of water in Celsius?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nName three primary colors.<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "1, 2, 3, 4, 5, 6, 7, 8,",
    "Photosynthesis is the process by which plants",
    "#include <stdio.h>\n\nint main(void) {\n",
    "Q: What is 12 times 12?\nA:",
    "In 1969, Neil Armstrong became the first person to",
    "SELECT name, age FROM users WHERE",
    "A haiku about autumn leaves:\n",
    "The three laws of thermodynamics are",
    "<|im_start|>user\nTranslate 'good morning' into Spanish.<|im_end|>\n<|im_start|>assistant\n",
    "Water is made of hydrogen and",
    "fn main() {\n    let v = vec![1, 2, 3];\n",
    "The best way to learn a new programming language is",
    "Paris, London, Berlin, Madrid,",
    "<|im_start|>user\nWrite a short poem about the moon.<|im_end|>\n<|im_start|>assistant\n",
]


def models_dir() -> Path:
    env = os.environ.get("FOLIO_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "folio" / "models"


def tokenize_all(path: Path) -> list[list[int]]:
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
    return [llm.tokenize(p.encode(), add_bos=True, special=True) for p in PROMPTS]


def transformers_logits(path: Path, sequences: list[list[int]]) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count() or 1)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    out = []
    with torch.no_grad():
        for ids in sequences:
            logits = model(torch.tensor([ids])).logits[0].float()  # [len, vocab]
            lse = torch.logsumexp(logits, dim=-1)
            top = torch.topk(logits, TOP_K, dim=-1)
            out.append({
                "top_ids": top.indices.tolist(),
                "top_logits": [[round(v, 6) for v in row] for row in top.values.tolist()],
                "logsumexp": [round(v, 6) for v in lse.tolist()],
            })
    return out


def llama_cpp_continuations(path: Path, sequences: list[list[int]]) -> list[dict]:
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=512, n_batch=512, n_threads=os.cpu_count() or 1,
                logits_all=True, verbose=False)
    out = []
    for ids in sequences:
        llm.reset()
        llm.eval(ids)
        tokens, margins = [], []
        for _ in range(CONTINUATION_TOKENS):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            order = np.argsort(-logits, kind="stable")
            tok = int(order[0])
            margins.append(round(float(logits[order[0]] - logits[order[1]]), 6))
            tokens.append(tok)
            if llm.token_eos() == tok:
                break
            llm.eval([tok])
        out.append({"tokens": tokens, "margins": margins})
    return out


def long_context_golden(path: Path) -> dict:
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
    ids = llm.tokenize(LONG_TEXT.read_bytes(), add_bos=True, special=False)[:LONG_TOKENS]
    ref = transformers_logits(path, [ids])[0]
    first = len(ids) - LONG_CHECKED
    return {"model": path.name, "text": str(LONG_TEXT), "token_ids": ids, "first_checked": first,
            "transformers": {k: v[first:] for k, v in ref.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--long-context", nargs="*", default=None, metavar="MODEL",
                    help=f"only the long-context goldens, of these models (default {LONG_CONTEXT_MODELS})")
    args = ap.parse_args()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.long_context is not None:
        for name in args.long_context or LONG_CONTEXT_MODELS:
            dest = OUT_DIR / f"{name}.long.json"
            dest.write_text(json.dumps(long_context_golden(models_dir() / MODELS[name]), separators=(",", ":")) + "\n")
            print(f"wrote {dest} ({dest.stat().st_size} bytes)")
        return
    for name in args.models:
        path = models_dir() / MODELS[name]
        sequences = tokenize_all(path)
        golden = {
            "model": MODELS[name],
            "prompts": PROMPTS,
            "token_ids": sequences,
            "transformers": transformers_logits(path, sequences),
            "llama_cpp": llama_cpp_continuations(path, sequences),
        }
        dest = OUT_DIR / f"{name}.json"
        dest.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
        print(f"wrote {dest} ({dest.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
