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

gpt_oss (issue 40) stores its experts as the released checkpoints do, in
MXFP4 blocks and scales with quantization_config mxfp4 (gpt_oss_bf16: plain
fused BF16 experts); its reference.json adds
                      transformers_truncated  the same MXFP4 numbers with
                                    YaRN's correction range truncated, as
                                    GGUF files (and llama.cpp) always do
and llama_cpp_vs_exact_max_logprob_diff: how far llama.cpp, whose MXFP4
matmuls round activations to Q8_0, is from those exact numbers.
gemma4 (issue 48) is Gemma 4's text model (Gemma4ForCausalLM) with every
structure of the small sizes: per-layer embeddings, KV shared by the last two
layers, two head sizes, keys as values and proportional RoPE on the global
layers, layer scalars (saved buffers, rounded to BF16 for the reference as
the file holds them), the shared layers' double-wide FFN.
The sequences are long enough to cross every sliding window, every
LongRoPE switch and several periods of Ministral 3's query temperature.
deepseek_v2 and deepseek_v3 (issue 41) are DeepSeek's latent attention and
routers (build() says which features each has); V3's correction bias is a
buffer, drawn like the others (zeroing it moves this model's logits by up
to 5.3 and its top-1 at 136 of 200 positions, so a reader that drops it
fails). llama.cpp scores expert groups by their top two, V2's rule is the
best one, so V2's llama_cpp figures are not V2's logits (max |logprob diff|
2.9); V3's agree with transformers within 1.5e-5.
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
         "mistral3": 2007, "olmo2": 2008, "granite4": 2009, "gpt_oss": 2010, "gpt_oss_bf16": 2011,
         "gemma4": 2012, "qwen3_5": 2012, "deepseek_v2": 2041, "deepseek_v3": 2042}
# The harmony format's special tokens (gpt-oss's chat format), in the gpt-oss
# tokenizers so that a conversation renders into them.
HARMONY_SPECIAL = ["<|startoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                   "<|return|>", "<|call|>"]


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
    if name in ("gpt_oss", "gpt_oss_bf16"):
        # gpt-oss's layout at a tiny size: four layers (sliding, full,
        # sliding, full) with the real 128-token window, four query heads of
        # 16 over two K/V heads, four experts (two per token), YaRN x8
        # over 64 trained tokens, not truncated, as the released config says.
        # gpt_oss stores its experts in MXFP4 blocks and scales (the released
        # checkpoints' layout), gpt_oss_bf16 as plain fused tensors, with
        # experts of 32 so that its F32 GGUF file stays under 1 MB.
        tok = tiny.make_tokenizer("qwen2", extra_special=HARMONY_SPECIAL)
        rope = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
                "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0}
        args = common(tok, hidden_size=64, intermediate_size=64 if name == "gpt_oss" else 32, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, max_position_embeddings=512, rope_parameters=rope,
                      num_local_experts=4, num_experts_per_tok=2, sliding_window=128, swiglu_limit=7.0,
                      layer_types=["sliding_attention", "full_attention"] * 2, attention_bias=True,
                      tie_word_embeddings=False, rms_norm_eps=1e-5)
        config = tf.GptOssConfig(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(300, 37), 512), (ids(200, 41, 7), 512)]
        # The chat template is gpt-oss's own (harmony), so that a server on
        # this checkpoint takes the harmony path.
        return tok, tf.GptOssForCausalLM(config), dict(pre="qwen2", seqs=seqs, mxfp4=name == "gpt_oss",
                                                       chat_template="gpt-oss.jinja")
    if name == "deepseek_v2":
        # DeepSeek-V2(-Lite)'s layout: latent attention without q_lora (a
        # plain q_proj), a dense first layer, then experts behind V2's softmax
        # router, group-limited (4 groups of 2, the best 2 groups by their
        # best expert), weights not renormalised, times routed_scaling_factor,
        # plus a shared expert. 26 layers: the pinned llama.cpp loads a
        # deepseek2 GGUF without q_lora only at 26 or 27 (V2-Lite's count).
        # llama.cpp scores every group by its top two (V3's rule), not by its
        # best expert: its logits are not V2's, and folio's GGUF leg is held
        # to transformers' (the file has the same numbers).
        tok = tiny.make_tokenizer("llama3")
        args = common(tok, num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=4,
                      q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                      first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                      moe_intermediate_size=16, n_group=4, topk_group=2, topk_method="group_limited_greedy",
                      routed_scaling_factor=1.5, norm_topk_prob=False, rope_theta=10000.0, tie_word_embeddings=False)
        args.pop("head_dim")
        config = tf.DeepseekV2Config(**args)
        seqs = [(s, 256) for s in SHORT] + [(ids(100, 37), 256)]
        return tok, tf.DeepseekV2ForCausalLM(config), dict(pre="llama-bpe", seqs=seqs)
    if name == "deepseek_v3":
        # DeepSeek-V3's layout: q_lora, latent attention, YaRN x4 over 64
        # trained tokens with mscale and mscale_all_dim (the softmax-scale
        # correction), a dense first layer, then experts behind the sigmoid
        # router: a selection-only correction bias (a buffer, drawn at random
        # below), 4 groups of 2 scored by their top two, the best 2 kept,
        # top-2 weights renormalised times routed_scaling_factor, and a shared
        # expert added without a gate. scoring_func and topk_method are the
        # released config's (transformers ignores them); the converter writes
        # expert_gating_func sigmoid only from scoring_func, and llama.cpp
        # takes softmax without it.
        tok = tiny.make_tokenizer("llama3")
        rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
                "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "rope_theta": 10000.0}
        args = common(tok, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                      q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                      first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                      moe_intermediate_size=16, n_group=4, topk_group=2, routed_scaling_factor=2.5,
                      norm_topk_prob=True, max_position_embeddings=256, rope_parameters=rope,
                      tie_word_embeddings=False, scoring_func="sigmoid", topk_method="noaux_tc")
        args.pop("head_dim")
        config = tf.DeepseekV3Config(**args)
        seqs = [(s, 256) for s in SHORT] + [(ids(200, 37), 256), (ids(120, 41, 7), 256)]
        return tok, tf.DeepseekV3ForCausalLM(config), dict(pre="llama-bpe", seqs=seqs)
    if name == "gemma4":
        # Gemma 4's text layout at a tiny size (the E2B kind): five layers
        # (sliding, sliding, full, sliding, full), the last two reading the
        # K/V of the last writing layer of their type (1 and 2); local heads
        # of 16 over two K/V heads, global heads of 32 over one whose keys are
        # the values, rotated on a quarter (proportional RoPE); a window of 8;
        # per-layer embeddings of 8 per layer; the shared layers' FFN twice as
        # wide; a final soft-cap of 30.
        tok = tiny.make_tokenizer("gpt2")
        rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                   "rope_theta": 1000000.0}}
        args = common(tok, num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
                      hidden_activation="gelu_pytorch_tanh", sliding_window=8, rope_parameters=rope,
                      layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                   "sliding_attention", "full_attention"],
                      num_kv_shared_layers=2, hidden_size_per_layer_input=8,
                      vocab_size_per_layer_input=tok.get_vocab_size(), use_double_wide_mlp=True,
                      final_logit_softcapping=30.0, tie_word_embeddings=True)
        config = tf.Gemma4TextConfig(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(72, 37), 512), (ids(40, 41, 7), 512)]
        return tok, tf.Gemma4ForCausalLM(config), dict(pre="gpt-2", seqs=seqs)
    if name == "qwen3_5":
        # Qwen3.5's dense layout (issue 42): three gated-DeltaNet layers, then
        # one gated full-attention layer (output gate, QK-norm, partial RoPE
        # 0.25 of a 32-wide head, its interleaved-MRoPE sections summing to
        # the 4 rotated pairs as llama.cpp requires), twice; the linear layers' value heads (2)
        # share one key head, a kernel-4 causal convolution. The sequences
        # cross transformers' 64-token chunks of the delta rule several times.
        tok = tiny.make_tokenizer("qwen2")
        args = common(tok, num_hidden_layers=8, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                       "mrope_section": [2, 1, 1], "mrope_interleaved": True},
                      linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
                      linear_num_key_heads=1, linear_num_value_heads=2, tie_word_embeddings=False,
                      layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2)
        config = tf.Qwen3_5TextConfig(**args)
        seqs = [(s, 512) for s in SHORT] + [(ids(200, 37), 512), (ids(150, 41, 7), 512)]
        return tok, tf.Qwen3_5ForCausalLM(config), dict(pre="qwen2", seqs=seqs)
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


def randomise_gemma4(model: torch.nn.Module, seed: int) -> None:
    """Gemma 4 multiplies by its norm weights as they are (not 1 + w, as Gemma 2 and 3): norms around
    one; and each layer's scalar between 0.5 and 1.5, so that the residual stream keeps its size."""
    gen = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float32))
        for name, b in sorted(model.named_buffers()):
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen, dtype=torch.float32))


def randomise_gpt_oss(model: torch.nn.Module, seed: int) -> None:
    """gpt-oss's own parameters at sizes that show a wrong sum: experts of unit gain along their input
    (gate_up_proj is [E, in, out], down_proj [E, in, out]), biases and sinks of a unit's size, and the
    first expert's gate/up scaled by 8 so that the SwiGLU's clamp at 7 fires."""
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                p.copy_(noise / p.shape[1] ** 0.5)
                if name.endswith("gate_up_proj"):
                    p[0] *= 8.0
            elif name.endswith("_bias") or name.endswith("router.bias") or name.endswith(".sinks"):
                p.copy_(0.5 * noise if not name.endswith(".sinks") else 1.0 + noise)


def randomise_qwen3_5(model: torch.nn.Module, seed: int) -> None:
    """Qwen3.5's norms are zero-centred (the factor is 1 + w) except the DeltaNet's gated one; its decay
    A = exp(A_log) spans 0.5..4 and dt_bias a unit, so that each state decays at its own rate."""
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.dim() == 1 and "norm" in name and not name.endswith("linear_attn.norm.weight"):
                p.copy_(0.2 * noise)
            elif name.endswith(".A_log"):
                p.copy_(torch.log(0.5 + 3.5 * torch.rand(p.shape, generator=gen)))
            elif name.endswith(".dt_bias"):
                p.copy_(0.5 * noise)


FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def to_mxfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w: [E, out, in] -> (blocks [E, out, in/32, 16] u8, scales [E, out, in/32] u8, the numbers they hold):
    per block of 32 an E8M0 exponent (127 + e, 2^e >= amax / 6) and E2M1 codes to nearest, element 2i in
    the low nibble of byte i, as the released gpt-oss checkpoints store them."""
    E, out, k = w.shape
    blocks = w.reshape(E, out, k // 32, 32).double()
    amax = blocks.abs().amax(-1).clamp(min=2.0 ** -100)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = blocks / torch.pow(2.0, e)[..., None]
    lut = torch.tensor(FP4_VALUES, dtype=torch.float64)
    codes = (scaled[..., None] - lut).abs().argmin(-1)  # ties: the lower code
    values = (lut[codes] * torch.pow(2.0, e)[..., None]).reshape(E, out, k).float()
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)
    return packed, (e + 127).to(torch.uint8), values


def save_mxfp4_experts(model: torch.nn.Module, out: Path) -> None:
    """Rewrites the saved experts as MXFP4 blocks and scales (model's experts already hold MXFP4 values)
    and adds the quantization_config of the released checkpoints."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(out / "model.safetensors")
    for name in [n for n in tensors if n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj")]:
        w = tensors.pop(name).float().transpose(1, 2).contiguous()  # [E, out, in]
        blocks, scales, values = to_mxfp4(w)
        assert torch.equal(values, w), name  # the model's numbers are MXFP4's already
        tensors[name + "_blocks"], tensors[name + "_scales"] = blocks, scales
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def quantize_experts_in_place(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                p.copy_(to_mxfp4(p.transpose(1, 2).contiguous())[2].transpose(1, 2))


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
if "qwen3_5" in model_dir:
    sys.argv.append("--no-mtp")  # the tiny checkpoint has no MTP layer
import convert_hf_to_gguf
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
from conversion import gemma
gemma.Gemma2Model.set_vocab = base.TextModel._set_vocab_gpt2
gemma.Gemma4Model.set_vocab = base.TextModel._set_vocab_gpt2
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
    if type(model).__name__ == "GptOssForCausalLM":
        randomise_gpt_oss(model, seed)
    if type(model).__name__ == "Gemma4ForCausalLM":
        randomise_gemma4(model, seed)
    if type(model).__name__ == "Qwen3_5ForCausalLM":
        randomise_qwen3_5(model, seed)
    model.eval()
    # The reference runs in fp32 on exactly the numbers the files hold.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
        for buffer in buffers:  # the saved buffers (Gemma 4's layer scalars) are BF16 in the file too
            b = model.get_buffer(buffer)
            b.copy_(b.to(torch.bfloat16).to(torch.float32))
    if opts.get("mxfp4"):
        quantize_experts_in_place(model)
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    save_model = type(model)(model.config)
    save_model.load_state_dict(model.state_dict())
    save_model.to(torch.bfloat16).save_pretrained(out)
    if opts.get("mxfp4"):
        save_mxfp4_experts(model, out)
    tiny.save_tokenizer(tok, out, False, "<|endoftext|>", "<|im_end|>")
    if opts.get("tokenizer_class"):
        cfg = json.loads((out / "tokenizer_config.json").read_text())
        cfg["tokenizer_class"] = opts["tokenizer_class"]
        (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    if opts.get("chat_template"):
        cfg = json.loads((out / "tokenizer_config.json").read_text())
        cfg["chat_template"] = (ROOT / "tests" / "data" / "chat_templates" / opts["chat_template"]).read_text()
        (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    (out / "generation_config.json").unlink(missing_ok=True)
    with_gguf = opts.get("gguf", True)
    if with_gguf:
        convert(llama_dir, out, out / "model.gguf", opts["pre"], "f32", opts.get("gguf_name", f"tiny {name}"))

    truncated = None
    if opts.get("mxfp4") and with_gguf:
        # llama.cpp multiplies MXFP4 weights by activations rounded to Q8_0, so
        # its logits are not the exact ones; the GGUF file is also held to the
        # exact ones of its own rotary table (GGUF cannot say truncate: false,
        # and llama.cpp truncates YaRN's correction range): transformers with
        # truncate: true, on the same MXFP4 numbers.
        import transformers as tf

        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(out, Path(tmp) / "m")
            cfg = json.loads((Path(tmp) / "m" / "config.json").read_text())
            cfg["rope_parameters"]["truncate"] = True
            (Path(tmp) / "m" / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
            truncated = tf.AutoModelForCausalLM.from_pretrained(Path(tmp) / "m", dtype=torch.float32)
            truncated.eval()
    sequences = []
    worst = 0.0
    worst_exact = 0.0
    for tokens, n_ctx in opts["seqs"]:
        with torch.no_grad():
            hf_rows = model(torch.tensor([tokens])).logits[0].to(torch.float32)
        entry = {"token_ids": tokens, "n_ctx": n_ctx, "transformers": top_k(hf_rows)}
        if truncated is not None:
            with torch.no_grad():
                exact_rows = truncated(torch.tensor([tokens])).logits[0].float()
            entry["transformers_truncated"] = top_k(exact_rows)
        if with_gguf:
            cpp_rows = llama_cpp_logits(out / "model.gguf", tokens, n_ctx)
            hf_lp = torch.log_softmax(hf_rows.double(), -1)
            cpp_lp = torch.log_softmax(cpp_rows.double(), -1)
            worst = max(worst, float((hf_lp - cpp_lp).abs().max()))
            entry["llama_cpp"] = top_k(cpp_rows)
            if truncated is not None:
                # llama.cpp against the exact numbers of its own file, over its top-8.
                exact_lp = torch.log_softmax(exact_rows.double(), -1)
                top = torch.topk(cpp_lp, TOP_K, dim=-1).indices
                worst_exact = max(worst_exact, float((exact_lp.gather(1, top) - cpp_lp.gather(1, top)).abs().max()))
        sequences.append(entry)
    reference = {
        "architecture": type(model).__name__,
        "vocab_size": model.config.get_text_config().vocab_size,
        "randomised_buffers": buffers,
        "sequences": sequences,
    }
    if with_gguf:
        reference["transformers_vs_llama_cpp_max_logprob_diff"] = round(worst, 6)
    if truncated is not None:
        reference["llama_cpp_vs_exact_max_logprob_diff"] = round(worst_exact, 6)
    if opts.get("mxfp4"):
        # transformers' own MXFP4 loader (it dequantizes on a CPU) must read the
        # blocks and scales written here as the numbers the reference ran.
        import transformers as tf

        loaded = tf.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
        loaded.eval()
        tokens = opts["seqs"][-1][0]
        with torch.no_grad():
            a = model(torch.tensor([tokens])).logits[0].float()
            b = loaded(torch.tensor([tokens])).logits[0].float()
        diff = float((a - b).abs().max())
        assert diff < 1e-3, f"transformers' MXFP4 loader reads other numbers: max |logit diff| {diff}"
        reference["transformers_mxfp4_loader_max_logit_diff"] = round(diff, 8)
    (out / "reference.json").write_text(json.dumps(reference, separators=(",", ":")) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, {size} bytes, "
          f"{sum(len(t) for t, _ in opts['seqs'])} positions"
          + (f"; transformers vs llama.cpp max |logprob diff| {worst:.2e}" if with_gguf else "")
          + (f"; llama.cpp vs the exact numbers of its file {worst_exact:.2e}" if truncated is not None else ""))


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
