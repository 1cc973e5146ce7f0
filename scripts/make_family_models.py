#!/usr/bin/env python3
"""Tiny random-weight checkpoints of the model families of issue 39, with goldens from two references.

No checkpoint of these families can be downloaded here, so this script makes
them, as scripts/make_tiny_models.py does for the older families: for each
family below, transformers builds a model of the real layout (the family's
norms, biases, fused projections, rotary scaling and attention quirks) but
two to four layers, a hidden size of 32 (two query heads of 16 sharing one
K/V head) and the 384-token byte-level BPE vocabulary of make_tiny_models.py.
Every parameter, and every buffer the checkpoint saves (those it does not,
such as the rotary tables, are the config's constants), is drawn from a fixed
seed: norms around their neutral value, biases small, matrices of unit gain,
so that a norm, bias or buffer read wrongly shows in the logits. Each goes to
tests/data/tiny/<name>/:

    config.json, model.safetensors (BF16), tokenizer.json, tokenizer_config.json
    model.gguf      the same checkpoint converted by llama.cpp's own
                    convert_hf_to_gguf.py (F32: the same numbers)
    reference.json  per sequence: its token ids, the context both references
                    ran it with (n_ctx: llama.cpp's context, and folio's
                    --max-model-len; LongRoPE chooses its factors by it), and
                    from each reference the top-8 ids and logits and the
                    log-sum-exp of every position:
                      transformers  the HF directory, fp32 on the BF16 weights
                      llama_cpp     model.gguf through llama-cpp-python, F32
                                    K/V cache

The sequences are long enough to cross every sliding window, every
LongRoPE switch and several periods of Ministral 3's query temperature.
VARIANTS run checkpoints already there with other rope parameters (YaRN on
Qwen3, truncated and not) or at longer positions (Llama 3.1's scaling to 250
tokens), with no copy of their weights.
tests/engine/family_model_test.cc holds folio to both: the HF directory to
transformers, model.gguf to llama.cpp.

The converter only needs help with the vocabulary: it names BPE
pre-tokenizers by hashing what known tokenizers make of a test string, which
no tiny tokenizer matches, so get_vocab_base_pre answers the pre-tokenizer
the tiny tokenizer was built with; and Gemma 2's converter reads a
SentencePiece tokenizer.model, which these tiny checkpoints replace by a BPE
tokenizer.json, so it writes that one as Gemma 3's converter does without a
tokenizer.model. Tensors and hyper-parameters are the converter's own.

Run it in the reference environment (scripts/setup_reference.sh makes it and
unpacks the pinned llama-cpp-python sdist's llama.cpp tree under
build/llama.cpp-src; made with transformers 5.24, torch 2.15, tokenizers 0.23
and llama-cpp-python 0.3.36):

    build/venv-ref/bin/python scripts/make_family_models.py [--only NAME ...] [--llama-cpp DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as tiny  # noqa: E402  (the tokenizers and paragraphs)

ROOT = Path(__file__).resolve().parents[1]
OUT = tiny.OUT
TOP_K = 8
SEEDS = {"gemma2": 2001, "phi3": 2002, "granite": 2003, "smollm3": 2004, "glm4": 2005, "ministral3": 2006,
         "mistral3": 2007, "olmo2": 2008, "granite4": 2009}


def ids(n: int, mult: int, offset: int = 0) -> list[int]:
    """n token ids spread over the vocabulary, fixed."""
    return [(offset + i * mult) % tiny.VOCAB_SIZE for i in range(1, n + 1)]


SHORT = [tiny.SEQUENCES[0], tiny.SEQUENCES[1]]


def common(tok, **over) -> dict:
    args = dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
        pad_token_id=tok.token_to_id("<|endoftext|>"),
    )
    args.update(over)
    return args


def build(name: str):
    """(tokenizer, model, options): options name the tokenizer kind the
    converter is told about (pre), the sequences with their n_ctx, and
    tokenizer_config tweaks."""
    import transformers as tf

    if name == "gemma2":
        # Sliding window of 8 on layers 0 and 2; 50 / 30 soft-caps; a query
        # scalar equal to the head size, the only one a GGUF file implies.
        tok = tiny.make_tokenizer("gpt2")
        config = tf.Gemma2Config(**common(tok, num_hidden_layers=3, hidden_activation="gelu_pytorch_tanh",
                                          query_pre_attn_scalar=16, sliding_window=8, rope_theta=10000.0,
                                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                          tie_word_embeddings=True))
        seqs = [(s, 512) for s in SHORT] + [(ids(72, 37), 512)]
        return tok, tf.Gemma2ForCausalLM(config), dict(pre="gpt-2", seqs=seqs)
    if name == "phi3":
        # Phi-4-mini's shape: LongRoPE on three quarters of each head, tied
        # embeddings, GPT-2-style tokenizer. Trained context 256 (llama.cpp
        # rounds its context up to multiples of 256, so the switch must lie
        # on one), extended to 1024.
        tok = tiny.make_tokenizer("qwen2")
        pairs = int(16 * 0.75) // 2
        gen = torch.Generator().manual_seed(77)
        short = [round(1.0 + 0.5 * float(x), 4) for x in torch.rand(pairs, generator=gen)]
        long = [round(1.0 + 6.0 * float(x), 4) for x in torch.rand(pairs, generator=gen)]
        rope = {"rope_type": "longrope", "short_factor": short, "long_factor": long, "rope_theta": 10000.0,
                "partial_rotary_factor": 0.75}
        args = common(tok, max_position_embeddings=1024, original_max_position_embeddings=256,
                      rope_parameters=rope, partial_rotary_factor=0.75, tie_word_embeddings=True,
                      sliding_window=None)
        args.pop("head_dim")
        config = tf.Phi3Config(**args)
        seqs = [(s, 256) for s in SHORT] + [(ids(200, 37), 256), (ids(300, 41, 5), 1024)]
        return tok, tf.Phi3ForCausalLM(config), dict(pre="qwen2", seqs=seqs, tokenizer_class="GPT2Tokenizer",
                                                      gguf_name="tiny Phi-4-mini")
    if name == "granite":
        tok = tiny.make_tokenizer("llama3")
        args = common(tok, embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.1,
                      logits_scaling=4.0, rope_theta=10000.0, tie_word_embeddings=True)
        args.pop("head_dim")
        config = tf.GraniteConfig(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(64, 37), 512)]
        return tok, tf.GraniteForCausalLM(config), dict(pre="llama-bpe", seqs=seqs)
    if name == "smollm3":
        # Four layers, the fourth without RoPE; YaRN x4 over a trained
        # context of 64 (SmolLM3's own long-context recipe).
        tok = tiny.make_tokenizer("llama3")
        rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 10000.0}
        args = common(tok, num_hidden_layers=4, max_position_embeddings=64, rope_parameters=rope,
                      tie_word_embeddings=True)
        args.pop("head_dim")
        config = tf.SmolLM3Config(**args)
        seqs = [(s, 256) for s in SHORT] + [(ids(200, 37), 256)]
        return tok, tf.SmolLM3ForCausalLM(config), dict(pre="llama-bpe", seqs=seqs)
    if name == "glm4":
        tok = tiny.make_tokenizer("qwen2", extra_special=["<|user|>"])
        args = common(tok, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                            "partial_rotary_factor": 0.5},
                      attention_bias=True, tie_word_embeddings=False)
        config = tf.Glm4Config(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(64, 37), 512)]
        return tok, tf.Glm4ForCausalLM(config), dict(pre="qwen2", seqs=seqs)
    if name == "ministral3":
        # YaRN x4 over 32 trained tokens and the query temperature
        # 1 + 0.1 ln(1 + floor(pos / 32)): four periods in 128 tokens.
        tok = tiny.make_tokenizer("llama3")
        rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32, "beta_fast": 32.0,
                "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1,
                "rope_theta": 10000.0}
        config = tf.Ministral3Config(**common(tok, max_position_embeddings=128, rope_parameters=rope,
                                              tie_word_embeddings=False))
        seqs = [(s, 128) for s in SHORT] + [(ids(127, 37), 128)]
        return tok, tf.Ministral3ForCausalLM(config), dict(pre="llama-bpe", seqs=seqs)
    if name == "mistral3":
        # The released Ministral 3 and Mistral-Small 3.x layout: a
        # vision-language checkpoint whose language model is Ministral 3's
        # (the tiny vision tower is saved, and left out by folio and by
        # llama.cpp's converter alike).
        tok = tiny.make_tokenizer("llama3")
        rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32, "beta_fast": 32.0,
                "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1,
                "rope_theta": 10000.0}
        text = tf.Ministral3Config(**common(tok, max_position_embeddings=128, rope_parameters=rope,
                                            tie_word_embeddings=False))
        vision = tf.PixtralVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, head_dim=16, image_size=32, patch_size=16)
        config = tf.Mistral3Config(vision_config=vision, text_config=text, tie_word_embeddings=False,
                                   image_token_index=5)
        seqs = [(s, 128) for s in SHORT] + [(ids(127, 43, 3), 128)]
        return tok, tf.Mistral3ForConditionalGeneration(config), dict(pre="llama-bpe", seqs=seqs)
    if name == "granite4":
        # Granite 4's dense layout: GraniteMoeHybrid with every layer
        # attention, no experts, the shared MLP as the FFN, RoPE.
        tok = tiny.make_tokenizer("llama3")
        args = common(tok, embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.1,
                      logits_scaling=4.0, rope_theta=10000.0, tie_word_embeddings=True,
                      layer_types=["attention", "attention"], num_local_experts=0, num_experts_per_tok=0,
                      shared_intermediate_size=64, position_embedding_type="rope",
                      mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=16)  # unused: no Mamba layer
        args.pop("head_dim")
        config = tf.GraniteMoeHybridConfig(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(64, 41), 512)]
        # llama.cpp's converter keeps this tiny one's arch "granitehybrid"
        # with no KV heads and RoPE off, which llama.cpp cannot load: the
        # transformers leg only.
        return tok, tf.GraniteMoeHybridForCausalLM(config), dict(pre="llama-bpe", seqs=seqs, gguf=False)
    if name == "olmo2":
        tok = tiny.make_tokenizer("qwen2")
        args = common(tok, rope_theta=500000.0, tie_word_embeddings=False)
        args.pop("head_dim")
        config = tf.Olmo2Config(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(64, 37), 512)]
        return tok, tf.Olmo2ForCausalLM(config), dict(pre="qwen2", seqs=seqs)
    raise SystemExit(f"unknown family {name} (known: {', '.join(SEEDS)})")


def randomise(model: torch.nn.Module, seed: int) -> list[str]:
    """Every parameter, and every buffer the checkpoint saves; returns the buffers drawn. Buffers it does
    not save (rotary tables, Gemma's embedding scale) are constants of the config, as a reader derives them."""
    tiny.randomise(model, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    saved = set(model.state_dict())
    drawn = []
    with torch.no_grad():
        for name, b in sorted(model.named_buffers()):
            if name not in saved or not b.is_floating_point():
                continue
            b.copy_(0.1 * torch.randn(b.shape, generator=gen, dtype=torch.float32))
            drawn.append(name)
    return drawn


def top_k(rows: torch.Tensor) -> dict:
    """rows: [positions, vocab] f32 -> top-8 ids and logits and log-sum-exp per position."""
    values, indices = torch.topk(rows, TOP_K, dim=-1)
    lse = torch.logsumexp(rows.double(), dim=-1)
    return {"top_ids": indices.tolist(), "top_logits": [[round(float(v), 6) for v in r] for r in values],
            "logsumexp": [round(float(v), 6) for v in lse]}


CONVERT = r"""
import sys
llama_dir, model_dir, outfile, pre, outtype, name = sys.argv[1:7]
sys.path.insert(0, llama_dir)
sys.argv = ["convert_hf_to_gguf.py", model_dir, "--outfile", outfile, "--outtype", outtype, "--model-name", name]
import convert_hf_to_gguf
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
from conversion import gemma
gemma.Gemma2Model.set_vocab = base.TextModel._set_vocab_gpt2
convert_hf_to_gguf.main()
"""


def convert(llama_dir: Path, model_dir: Path, outfile: Path, pre: str, outtype: str, name: str) -> None:
    """llama.cpp's converter; `name` becomes general.name (llama.cpp gives a model named like phi3 the
    special tokens of Phi-3's vocabulary, which a tiny one lacks)."""
    subprocess.run([sys.executable, "-c", CONVERT, str(llama_dir), str(model_dir), str(outfile), pre, outtype, name],
                   check=True, stdout=subprocess.DEVNULL)


def llama_cpp_logits(gguf: Path, tokens: list[int], n_ctx: int) -> torch.Tensor:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=n_ctx, n_batch=512, n_ubatch=512, logits_all=True,
                          n_threads=2, verbose=False, type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    llm.eval(tokens)
    rows = torch.tensor(llm.scores[: len(tokens)], dtype=torch.float32)
    llm.close()
    return rows


def make(name: str, seed: int, llama_dir: Path) -> None:
    torch.manual_seed(seed)
    tok, model, opts = build(name)
    buffers = randomise(model, seed)
    model.eval()
    # The reference runs in fp32 on exactly the numbers the files hold.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    save_model = type(model)(model.config)
    save_model.load_state_dict(model.state_dict())
    save_model.to(torch.bfloat16).save_pretrained(out)
    tiny.save_tokenizer(tok, out, False, "<|endoftext|>", "<|im_end|>")
    if opts.get("tokenizer_class"):
        cfg = json.loads((out / "tokenizer_config.json").read_text())
        cfg["tokenizer_class"] = opts["tokenizer_class"]
        (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    (out / "generation_config.json").unlink(missing_ok=True)
    with_gguf = opts.get("gguf", True)
    if with_gguf:
        convert(llama_dir, out, out / "model.gguf", opts["pre"], "f32", opts.get("gguf_name", f"tiny {name}"))

    sequences = []
    worst = 0.0
    for tokens, n_ctx in opts["seqs"]:
        with torch.no_grad():
            hf_rows = model(torch.tensor([tokens])).logits[0].to(torch.float32)
        entry = {"token_ids": tokens, "n_ctx": n_ctx, "transformers": top_k(hf_rows)}
        if with_gguf:
            cpp_rows = llama_cpp_logits(out / "model.gguf", tokens, n_ctx)
            hf_lp = torch.log_softmax(hf_rows.double(), -1)
            cpp_lp = torch.log_softmax(cpp_rows.double(), -1)
            worst = max(worst, float((hf_lp - cpp_lp).abs().max()))
            entry["llama_cpp"] = top_k(cpp_rows)
        sequences.append(entry)
    reference = {
        "architecture": type(model).__name__,
        "vocab_size": model.config.get_text_config().vocab_size,
        "randomised_buffers": buffers,
        "sequences": sequences,
    }
    if with_gguf:
        reference["transformers_vs_llama_cpp_max_logprob_diff"] = round(worst, 6)
    (out / "reference.json").write_text(json.dumps(reference, separators=(",", ":")) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, {size} bytes, "
          f"{sum(len(t) for t, _ in opts['seqs'])} positions"
          + (f"; transformers vs llama.cpp max |logprob diff| {worst:.2e}" if with_gguf else ""))


# Checkpoints already in tests/data/tiny run with other rope parameters, or at
# longer positions, without a copy of their weights: reference.json names the
# base directory and the config.json keys replaced (the test makes the same
# directory). "gguf" converts the base with those keys for the llama.cpp leg
# (None: transformers only, as for what GGUF cannot say, YaRN's truncate).
VARIANTS = {
    # Qwen2.5 / Qwen3's long-context recipe, YaRN x4 over the trained 64.
    "qwen3_yarn": dict(base="qwen3", pre="qwen2", gguf=None, config={
        "max_position_embeddings": 64,
        "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                            "rope_theta": 1000000.0}}, seqs=[(SHORT[1], 256), (ids(250, 37), 256)]),
    # gpt-oss's kind: the correction range not truncated, other betas, and an
    # explicit attention factor.
    "qwen3_yarn_untruncated": dict(base="qwen3", pre="qwen2", gguf=None, config={
        "max_position_embeddings": 64,
        "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                            "beta_fast": 16.0, "beta_slow": 2.0, "truncate": False, "attention_factor": 1.2,
                            "rope_theta": 1000000.0}}, seqs=[(ids(250, 37), 256)]),
    # MistralForCausalLM: llama's layout with a sliding window (8 here).
    "mistral_window": dict(base="llama", pre="llama-bpe", gguf=None, config={
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 8},
        seqs=[(SHORT[1], 256), (ids(64, 37), 256)]),
    # Llama 3.1's scaling past its trained 64 tokens, to 250; llama.cpp reads
    # the factors from rope_freqs.weight (F16 weights, as the checkpoint's).
    "llama3_long": dict(base="llama3", pre="llama-bpe", gguf="f16", config=None, seqs=[(ids(250, 37), 256)]),
}


def make_variant(name: str, v: dict, llama_dir: Path) -> None:
    import transformers as tf

    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / v["base"]
        shutil.copytree(OUT / v["base"], model_dir)
        if v["config"]:
            cfg = json.loads((model_dir / "config.json").read_text())
            cfg.update(v["config"])
            (model_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        model = tf.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model.eval()
        if v["gguf"]:
            convert(llama_dir, model_dir, out / "model.gguf", v["pre"], v["gguf"], f"tiny {name}")
        sequences, worst = [], 0.0
        for tokens, n_ctx in v["seqs"]:
            with torch.no_grad():
                hf_rows = model(torch.tensor([tokens])).logits[0].to(torch.float32)
            entry = {"token_ids": tokens, "n_ctx": n_ctx, "transformers": top_k(hf_rows)}
            if v["gguf"]:
                cpp_rows = llama_cpp_logits(out / "model.gguf", tokens, n_ctx)
                entry["llama_cpp"] = top_k(cpp_rows)
                worst = max(worst, float((torch.log_softmax(hf_rows.double(), -1) -
                                          torch.log_softmax(cpp_rows.double(), -1)).abs().max()))
            sequences.append(entry)
    reference = {"architecture": type(model).__name__, "vocab_size": model.config.vocab_size, "base": v["base"],
                 "config": v["config"], "sequences": sequences}
    if v["gguf"]:
        reference["transformers_vs_llama_cpp_max_logprob_diff"] = round(worst, 6)
    (out / "reference.json").write_text(json.dumps(reference, separators=(",", ":")) + "\n")
    print(f"{name} (on {v['base']}): {sum(len(t) for t, _ in v['seqs'])} positions"
          + (f"; transformers vs llama.cpp max |logprob diff| {worst:.2e}" if v["gguf"] else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=list(SEEDS) + list(VARIANTS))
    parser.add_argument("--llama-cpp", type=Path, default=ROOT / "build" / "llama.cpp-src",
                        help="llama.cpp's source tree (the pinned llama-cpp-python sdist's vendor/llama.cpp)")
    args = parser.parse_args()
    if not (args.llama_cpp / "convert_hf_to_gguf.py").exists():
        raise SystemExit(f"{args.llama_cpp} holds no convert_hf_to_gguf.py; run scripts/setup_reference.sh")
    torch.set_num_threads(1)
    for name in args.only:
        if name in VARIANTS:
            make_variant(name, VARIANTS[name], args.llama_cpp.resolve())
        elif name in SEEDS:
            make(name, SEEDS[name], args.llama_cpp.resolve())
        else:
            raise SystemExit(f"unknown family {name} (known: {', '.join(list(SEEDS) + list(VARIANTS))})")


if __name__ == "__main__":
    main()
