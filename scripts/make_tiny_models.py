#!/usr/bin/env python3
"""Tiny randomly initialised Hugging Face models and transformers' logits for them.

No package carries Hugging Face checkpoints of these architectures, so this
script makes them: for each architecture below, a model of the real layout
(grouped-query attention, the architecture's norms, biases and RoPE) but two
layers, a hidden size of 64 and a vocabulary of a few hundred tokens, with
every weight drawn from a fixed seed. Each is saved as a Hugging Face
directory under tests/data/tiny/<name>/:

    config.json, model.safetensors (or shards + model.safetensors.index.json),
    tokenizer.json, tokenizer_config.json, generation_config.json
    reference.json  the token-id sequences, transformers' greedy continuations
                    and the top-1/top-2 margin of every greedy step
    logits.f32      transformers' fp32 logits of every position of every
                    sequence, little-endian float32, [positions, vocab] per
                    sequence, one after another

The tokenizer is a byte-level BPE trained with the tokenizers package on the
strings of tests/data/tokenizer/strings.jsonl plus a few paragraphs, with the
pre-tokenizer each family uses (a Split regex then ByteLevel, or ByteLevel
with its own regex). Each directory varies something the loader must handle:

    llama   F32, three shards with an index, separate lm_head, merges as
            "a b" strings
    qwen2   BF16 weights (the logits come from the BF16-rounded weights in
            fp32), Q/K/V biases, tied embeddings, NFC normalizer
    qwen3   F32, per-head Q/K RMSNorm, head_dim * heads != hidden, tied
    gemma3  F32, sandwich norms, GeGLU, sliding-window layers, tied
    llama3  F16 weights, Llama 3's RoPE scaling (rope_type llama3, an
            original context short enough that all three frequency bands
            occur), tied
    mixtral    F16, a mixture of 8 SwiGLU experts (top-2, weights
               renormalised), per-expert tensors, separate lm_head
    qwen3_moe  BF16, 8 experts (top-2, norm_topk_prob), per-head Q/K
               RMSNorm, tied
    qwen2_moe  F32, 4 experts (top-2, not renormalised) plus a shared
               expert behind a sigmoid gate, Q/K/V biases, tied

The routers are random like every other weight, so tokens do spread over the
experts.

tests/engine/tiny_model_test.cc checks folio's logits and greedy tokens
against these files. Rerunning gives identical files (fixed seeds, CPU).

Run it in the reference environment (scripts/setup_reference.sh makes it; it
needs torch, transformers and tokenizers; made with transformers 5.24,
torch 2.15 and tokenizers 0.23):

    build/venv-ref/bin/python scripts/make_tiny_models.py [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "tiny"
STRINGS = ROOT / "tests" / "data" / "tokenizer" / "strings.jsonl"

VOCAB_SIZE = 384
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = ["<think>", "</think>"]  # added, not special
GREEDY_TOKENS = 12
SEEDS = {"llama": 1234, "qwen2": 1235, "qwen3": 1236, "gemma3": 1237, "llama3": 1238, "mixtral": 1239,
         "qwen3_moe": 1240, "qwen2_moe": 1241}
SEQUENCES = [  # token ids, fixed; every id below the smallest vocab
    [1, 17, 200, 33, 5, 150, 42, 260],
    [7, 300, 301, 12, 99, 64, 5, 5, 5, 18, 120, 250, 3, 77, 380, 2, 45],
    [i * 37 % VOCAB_SIZE for i in range(1, 34)],
]

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

PARAGRAPHS = """\
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
Once upon a time, in a small village by the sea, there lived an old fisherman and his wife.
def fibonacci(n):
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)
The capital of France is Paris; the capital of Italy is Rome; 1, 2, 3, 4, 5, 6, 7, 8, 9, 10.
"""


def training_texts() -> list[str]:
    texts = [PARAGRAPHS] * 4
    for line in STRINGS.read_text(encoding="utf-8").splitlines():
        value = json.loads(line)
        if isinstance(value, str):
            texts.append(value)
    return texts


def make_tokenizer(kind: str, extra_special: list[str] | None = None):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        regex = LLAMA3_REGEX if kind == "llama3" else QWEN2_REGEX
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(ADDED_TOKENS),
                                  special_tokens=SPECIAL_TOKENS + list(extra_special or []),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_texts(), trainer=trainer)
    tok.add_tokens(ADDED_TOKENS)
    return tok


def save_tokenizer(tok, out: Path, merges_as_strings: bool, bos: str | None, eos: str) -> None:
    data = json.loads(tok.to_str())
    if merges_as_strings:
        data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    config = {
        "add_bos_token": bos is not None,
        "add_eos_token": False,
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 256,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")


def randomise(model: torch.nn.Module, seed: int) -> None:
    """Weights of a size that gives logits of a few units, and norms that are not all ones."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.dim() == 1 and "norm" in name:
                # Gemma stores its norm weights as w in (1 + w); the others as the factor.
                base = 0.0 if "gemma" in type(model).__name__.lower() else 1.0
                p.copy_(base + 0.2 * noise)
            elif p.dim() == 1:
                p.copy_(0.1 * noise)
            else:
                p.copy_(noise / p.shape[-1] ** 0.5)


def common(tok) -> dict:
    return dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
    )


def build(name: str):
    import transformers as tf

    if name == "llama":
        tok = make_tokenizer("llama3")
        config = tf.LlamaConfig(**common(tok), rope_theta=50000.0, tie_word_embeddings=False)
        return tok, tf.LlamaForCausalLM(config), dict(dtype=torch.float32, shard="40KB", string_merges=True,
                                                       bos="<|endoftext|>")
    if name == "llama3":
        tok = make_tokenizer("llama3")
        scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64, "rope_theta": 50000.0}
        config = tf.LlamaConfig(**common(tok), rope_parameters=scaling, tie_word_embeddings=True)
        return tok, tf.LlamaForCausalLM(config), dict(dtype=torch.float16, shard=None, string_merges=False,
                                                       bos="<|endoftext|>")
    if name == "qwen2":
        tok = make_tokenizer("qwen2")
        config = tf.Qwen2Config(**common(tok), rope_theta=1000000.0, tie_word_embeddings=True)
        return tok, tf.Qwen2ForCausalLM(config), dict(dtype=torch.bfloat16, shard=None, string_merges=False,
                                                       bos=None)
    if name == "qwen3":
        tok = make_tokenizer("qwen2")
        config = tf.Qwen3Config(**common(tok), head_dim=32, rope_theta=1000000.0, tie_word_embeddings=True)
        return tok, tf.Qwen3ForCausalLM(config), dict(dtype=torch.float32, shard=None, string_merges=False,
                                                       bos=None)
    if name == "gemma3":
        tok = make_tokenizer("gpt2")
        args = common(tok)
        args.update(num_hidden_layers=3, hidden_activation="gelu_pytorch_tanh", head_dim=32,
                    query_pre_attn_scalar=24, sliding_window=4,
                    layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                    rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True)
        config = tf.Gemma3TextConfig(**args)
        return tok, tf.Gemma3ForCausalLM(config), dict(dtype=torch.float32, shard=None, string_merges=False,
                                                        bos="<|endoftext|>")
    if name == "mixtral":
        tok = make_tokenizer("llama3")
        args = common(tok)
        args.update(intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, rope_theta=1000000.0,
                    tie_word_embeddings=False)
        config = tf.MixtralConfig(**args)
        return tok, tf.MixtralForCausalLM(config), dict(dtype=torch.float16, shard=None, string_merges=False,
                                                         bos="<|endoftext|>")
    if name == "qwen3_moe":
        tok = make_tokenizer("qwen2")
        config = tf.Qwen3MoeConfig(**common(tok), head_dim=32, num_experts=8, num_experts_per_tok=2,
                                   moe_intermediate_size=32, norm_topk_prob=True, rope_theta=1000000.0,
                                   tie_word_embeddings=True)
        return tok, tf.Qwen3MoeForCausalLM(config), dict(dtype=torch.bfloat16, shard=None, string_merges=False,
                                                          bos=None)
    if name == "qwen2_moe":
        tok = make_tokenizer("qwen2")
        config = tf.Qwen2MoeConfig(**common(tok), num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                   shared_expert_intermediate_size=48, norm_topk_prob=False,
                                   rope_theta=1000000.0, tie_word_embeddings=True)
        return tok, tf.Qwen2MoeForCausalLM(config), dict(dtype=torch.float32, shard=None, string_merges=False,
                                                          bos=None)
    raise SystemExit(f"unknown model {name} (known: {', '.join(SEEDS)})")


def make(name: str, seed: int) -> None:
    if name not in SEEDS:
        raise SystemExit(f"unknown model {name} (known: {', '.join(SEEDS)})")
    torch.manual_seed(seed)
    tok, model, opts = build(name)
    randomise(model, seed)
    model.eval()
    if opts["dtype"] != torch.float32:
        # The reference runs in fp32 on exactly the weights the file holds.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(opts["dtype"]).to(torch.float32))
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    save_model = model
    if opts["dtype"] != torch.float32:
        save_model = type(model)(model.config)
        save_model.load_state_dict(model.state_dict())
        save_model = save_model.to(opts["dtype"])
    kwargs = {"max_shard_size": opts["shard"]} if opts["shard"] else {}
    save_model.save_pretrained(out, **kwargs)
    save_tokenizer(tok, out, opts["string_merges"], opts["bos"], "<|im_end|>")

    positions = []
    greedy = []
    with torch.no_grad():
        for ids in SEQUENCES:
            logits = model(torch.tensor([ids])).logits[0].to(torch.float32)
            positions.append(logits.numpy())
            seq = list(ids)
            tokens, margins = [], []
            for _ in range(GREEDY_TOKENS):
                row = model(torch.tensor([seq])).logits[0, -1].to(torch.float32)
                top = torch.topk(row, 2)
                tokens.append(int(top.indices[0]))
                margins.append(round(float(top.values[0] - top.values[1]), 6))
                seq.append(tokens[-1])
            greedy.append({"tokens": tokens, "margins": margins})
    with open(out / "logits.f32", "wb") as f:
        for rows in positions:
            f.write(rows.astype("<f4").tobytes())
    reference = {
        "architecture": type(model).__name__,
        "vocab_size": model.config.vocab_size,
        "token_ids": SEQUENCES,
        "greedy": greedy,
        "max_abs_logit": round(float(max(abs(r).max() for r in positions)), 4),
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, {size} bytes, "
          f"max |logit| {reference['max_abs_logit']}, smallest greedy margin "
          f"{min(min(g['margins']) for g in greedy):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=list(SEEDS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.only:
        make(name, SEEDS[name])


if __name__ == "__main__":
    main()
