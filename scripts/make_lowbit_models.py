#!/usr/bin/env python3
"""Tiny quantized Hugging Face checkpoints (FP8 and bitsandbytes NF4) and their logits.

Each directory under tests/data/tiny/<name>/ holds a one-layer model of the
real layout, made as scripts/make_tiny_models.py makes its models (the same
tokenizer, token sequences and files: config.json, model.safetensors,
tokenizer.json, tokenizer_config.json, reference.json, logits.f32), but with
its linear weights stored quantized as the quantized releases store them:

    qwen3_fp8_block    Qwen3, quant_method "fp8" with weight_block_size
                       [128, 128] (DeepSeek-V3 and the Qwen3 FP8 releases):
                       F8_E4M3 weights and an F32 weight_scale_inv per block;
                       hidden 160 and FFN 288, so most blocks are partial
    qwen3_fp8_tensor   Qwen3, quant_method "fp8" without weight_block_size:
                       one F32 weight_scale_inv per tensor
    qwen3_fp8_channel  Qwen3, compressed-tensors float-quantized with the
                       channel strategy: a BF16 weight_scale [out, 1] per row
    llama_nf4          Llama, bitsandbytes NF4, blocksize 64, an F32 absmax
                       per block, quant-state dtype float16
    llama_nf4_dq       Llama, bitsandbytes NF4 with double quantization
                       (8-bit absmax codes, an F32 nested absmax per 256
                       blocks), quant-state dtype bfloat16

The embeddings and norms stay BF16, as in those releases. Every weight
scale multiplies (weight = code * scale). The reference logits are
transformers' fp32 logits of the model whose weights are the dequantized
ones: FP8 widened to BF16 (code * scale in fp32, then rounded, as
transformers dequantizes FP8 where it has no FP8 kernels), NF4 through
bitsandbytes' own dequantization (its reference implementation: see
bnb_dequantize for why not its native CPU kernel), in the quant state's dtype.
The FP8 checkpoints are also loaded back with transformers itself (its CPU
path dequantizes them; it needs accelerate, and compressed-tensors for the
channel one), and the largest logit difference from the reference is
recorded in reference.json ("transformers_load_max_abs_diff"). Measured:
per tensor 0.017, all of it the BF16 rounding (transformers in fp32 keeps
code * scale unrounded, and then agrees exactly); 128x128 blocks 0.95,
since transformers' dequantizer takes the block as weight size / scale-grid
size, which is wrong where edge blocks are partial (DeepSeek-V3's own
dequantization, which folio follows, tiles from the top left); per channel
0.29, presumably because this config also has compressed-tensors quantize
the activations to FP8 per token (not checked further). For the NF4 ones
bnb_dequantized.bin holds bitsandbytes' dequantization of
model.layers.0.self_attn.k_proj.weight in the quant-state dtype, for
tests/model/hf_quantization_test.cc to compare bit for bit.

Run it in an environment with torch, transformers, tokenizers, safetensors
and bitsandbytes (made with torch 2.15, transformers 5.24, bitsandbytes 0.50.2):

    build/venv-ref/bin/python scripts/make_lowbit_models.py [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as tiny  # noqa: E402

OUT = tiny.OUT
SEQUENCES = tiny.SEQUENCES[:2]  # 25 positions keep each logits file under 40 KB
SEEDS = {"qwen3_fp8_block": 1301, "qwen3_fp8_tensor": 1302, "qwen3_fp8_channel": 1303, "llama_nf4": 1304,
         "llama_nf4_dq": 1305}
FP8_MAX = 448.0
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def common(tok) -> dict:
    args = tiny.common(tok)
    args.update(hidden_size=160, intermediate_size=288, num_hidden_layers=1, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)
    return args


def build(name: str):
    import transformers as tf

    if name.startswith("qwen3"):
        tok = tiny.make_tokenizer("qwen2")
        return tok, tf.Qwen3ForCausalLM(tf.Qwen3Config(**common(tok), rope_theta=1000000.0)), None
    tok = tiny.make_tokenizer("llama3")
    return tok, tf.LlamaForCausalLM(tf.LlamaConfig(**common(tok), rope_theta=50000.0)), "<|endoftext|>"


def is_linear(key: str) -> bool:
    return key.endswith(".weight") and key.split(".")[-2] in LINEAR


def fp8_quantize(w: torch.Tensor, kind: str):
    """FP8 codes and the scale that multiplies them; blocks at the edges are partial."""
    rows, cols = w.shape
    if kind == "tensor":
        scale = (w.abs().max() / FP8_MAX).reshape(1)
        expanded = scale.expand(rows, cols)
    elif kind == "channel":
        scale = (w.abs().amax(dim=1, keepdim=True) / FP8_MAX).to(torch.bfloat16)
        expanded = scale.float().expand(rows, cols)
    else:
        br = bc = 128
        sr, sc = -(-rows // br), -(-cols // bc)
        scale = torch.empty(sr, sc)
        for i in range(sr):
            for j in range(sc):
                scale[i, j] = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc].abs().max() / FP8_MAX
        expanded = scale.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
    codes = (w / expanded.float()).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    dequantized = (codes.float() * expanded.float()).to(torch.bfloat16)
    return codes, scale, dequantized


def quantization_config(name: str) -> dict:
    if name == "qwen3_fp8_block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    if name == "qwen3_fp8_tensor":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": None}
    if name == "qwen3_fp8_channel":
        return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
                "ignore": ["lm_head"],
                "config_groups": {"group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel",
                                "dynamic": False},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}
    dtype = "float16" if name == "llama_nf4" else "bfloat16"
    return {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
            "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": name == "llama_nf4_dq",
            "bnb_4bit_compute_dtype": dtype, "bnb_4bit_quant_storage": "uint8"}


def bnb_dequantize(packed: torch.Tensor, qs) -> torch.Tensor:
    """bitsandbytes' dequantize_4bit through its reference implementation.

    bitsandbytes 0.50.2's native CPU kernel for dequantize_4bit indexes the
    absmax blocks per row, so where a row is not a whole number of blocks
    (rows of 160 here) it disagrees with the flat blocks its own quantize_4bit
    (and the CUDA kernels) use: max error 2.1 instead of 0.45 on a random
    [64, 160] matrix. The default backend's _dequantize_4bit_compute, which
    says it matches the CUDA behaviour, is flat; the nested absmax goes
    through the public dequantize_blockwise as dequantize_4bit sends it.
    """
    import bitsandbytes.functional as bnbf
    from bitsandbytes.backends.default.ops import _dequantize_4bit_compute

    absmax = qs.absmax
    if qs.nested:
        absmax = bnbf.dequantize_blockwise(qs.absmax, qs.state2) + qs.offset
    return _dequantize_4bit_compute(packed.reshape(-1), absmax, qs.code, qs.blocksize, qs.shape, qs.dtype)


def quantize(name: str, state: dict[str, torch.Tensor]):
    """The tensors to save, and the dequantized weights the reference runs on."""
    import bitsandbytes.functional as bnbf

    saved, reference, extra = {}, {}, {}
    for key, value in state.items():
        if not is_linear(key):
            v = value.to(torch.bfloat16)
            saved[key], reference[key] = v, v.float()
            continue
        if name.startswith("qwen3_fp8"):
            kind = name.rsplit("_", 1)[1]
            codes, scale, dq = fp8_quantize(value, kind)
            suffix = "weight_scale" if kind == "channel" else "weight_scale_inv"
            saved[key] = codes
            saved[key[: -len("weight")] + suffix] = scale
            reference[key] = dq.float()
        else:
            dtype = torch.float16 if name == "llama_nf4" else torch.bfloat16
            w = value.to(dtype)
            packed, qs = bnbf.quantize_4bit(w, blocksize=64, quant_type="nf4",
                                            compress_statistics=name == "llama_nf4_dq")
            saved[key] = packed
            for k, v in qs.as_dict(packed=True).items():
                saved[f"{key}.{k}"] = v
            dq = bnb_dequantize(packed, qs)
            assert dq.dtype == dtype and dq.shape == value.shape
            reference[key] = dq.float()
            if key == "model.layers.0.self_attn.k_proj.weight":
                extra["bnb_dequantized.bin"] = dq.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    return saved, reference, extra


def logits_and_greedy(model):
    positions, greedy = [], []
    with torch.no_grad():
        for ids in SEQUENCES:
            positions.append(model(torch.tensor([ids])).logits[0].to(torch.float32).numpy())
            seq, tokens, margins = list(ids), [], []
            for _ in range(tiny.GREEDY_TOKENS):
                row = model(torch.tensor([seq])).logits[0, -1].to(torch.float32)
                top = torch.topk(row, 2)
                tokens.append(int(top.indices[0]))
                margins.append(round(float(top.values[0] - top.values[1]), 6))
                seq.append(tokens[-1])
            greedy.append({"tokens": tokens, "margins": margins})
    return positions, greedy


def transformers_load(out: Path, positions) -> float | str:
    """Loads the FP8 directory with transformers itself; the largest logit difference, or why it could not."""
    import transformers as tf

    try:
        model = tf.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
        with torch.no_grad():
            diffs = [float((model(torch.tensor([ids])).logits[0].float().numpy() - want).__abs__().max())
                     for ids, want in zip(SEQUENCES, positions)]
        return round(max(diffs), 8)
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        return f"not loadable by transformers here: {type(e).__name__}: {str(e).splitlines()[0][:160]}"


def make(name: str, seed: int) -> None:
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    tok, model, bos = build(name)
    tiny.randomise(model, seed)
    model.eval()
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    saved, reference, extra = quantize(name, state)
    with torch.no_grad():
        for k, p in model.named_parameters():
            if k in reference:
                p.copy_(reference[k])
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in saved.items()}, out / "model.safetensors", metadata={"format": "pt"})
    config = model.config.to_dict()
    config["architectures"] = [type(model).__name__]
    config["dtype"] = "bfloat16"
    config["quantization_config"] = quantization_config(name)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tiny.save_tokenizer(tok, out, False, bos, "<|im_end|>")
    for file, data in extra.items():
        (out / file).write_bytes(data)

    positions, greedy = logits_and_greedy(model)
    with open(out / "logits.f32", "wb") as f:
        for rows in positions:
            f.write(rows.astype("<f4").tobytes())
    reference_json = {
        "architecture": type(model).__name__,
        "vocab_size": model.config.vocab_size,
        "token_ids": SEQUENCES,
        "greedy": greedy,
        "max_abs_logit": round(float(max(abs(r).max() for r in positions)), 4),
    }
    if "fp8" in name:
        reference_json["transformers_load_max_abs_diff"] = transformers_load(out, positions)
    (out / "reference.json").write_text(json.dumps(reference_json, indent=1) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{name}: {size} bytes, max |logit| {reference_json['max_abs_logit']}, smallest greedy margin "
          f"{min(min(g['margins']) for g in greedy):.4f}, "
          f"transformers load: {reference_json.get('transformers_load_max_abs_diff', '-')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=list(SEEDS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.only:
        make(name, SEEDS[name])


if __name__ == "__main__":
    main()
