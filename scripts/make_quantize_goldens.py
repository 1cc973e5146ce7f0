#!/usr/bin/env python3
"""Goldens for `folio quantize`: files it writes, as llama.cpp reads them.

For each model and type below, folio quantizes the packaged GGUF to F16 (the
"unquantized" base, dequantized from the packaged weights) and the F16 file
to the type. llama.cpp (llama-cpp-python) then loads each file and writes
greedy 64-token continuations of the prompts of the model's reference golden
(scripts/make_model_goldens.py), with its top-1/top-2 logit margin at every
step. The golden also records a 64-bit FNV-1a checksum of each file, so the
test (tests/offline/quantize_test.cc) knows that the file it
quantizes again is byte for byte the one llama.cpp read.

Run in the reference environment after building folio:
    build/venv-ref/bin/python scripts/make_quantize_goldens.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from make_model_goldens import llama_cpp_continuations, models_dir  # noqa: E402

FOLIO = ROOT / "build" / "folio"
OUT = ROOT / "tests" / "data" / "reference" / "quantize.json"

# model golden name -> (packaged file, types to write and check)
CASES = {
    "smollm2-135m-instruct-q4_1": ("smollm2-135m-instruct-q4_1.gguf", ["q8_0", "q4_k_m", "q6_k", "q4_0"]),
}


def fnv1a64(path: Path) -> str:
    """FNV-1a over the file's little-endian 64-bit words (the last one zero-padded)."""
    import numpy as np

    data = path.read_bytes()
    data += b"\0" * (-len(data) % 8)
    h = 0xCBF29CE484222325
    prime = 0x100000001B3
    mask = (1 << 64) - 1
    for w in np.frombuffer(data, dtype="<u8").tolist():
        h = ((h ^ w) * prime) & mask
    return f"{h:016x}"


def quantize(src: Path, dst: Path, qtype: str) -> None:
    subprocess.run([str(FOLIO), "quantize", str(src), str(dst), "--type", qtype],
                   check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    golden: dict = {"models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for golden_name, (file_name, types) in CASES.items():
            reference = json.loads((ROOT / "tests" / "data" / "reference" / f"{golden_name}.json").read_text())
            token_ids = reference["token_ids"]
            base = Path(tmp) / f"{golden_name}-f16.gguf"
            quantize(models_dir() / file_name, base, "f16")
            entry = {"model": file_name, "token_ids": token_ids, "base_fnv1a64": fnv1a64(base), "types": {}}
            for qtype in types:
                out = Path(tmp) / f"{golden_name}-{qtype}.gguf"
                quantize(base, out, qtype)
                print(f"{golden_name} {qtype}: {out.stat().st_size / 2**20:.1f} MiB, llama.cpp decoding", flush=True)
                entry["types"][qtype] = {"fnv1a64": fnv1a64(out), "bytes": out.stat().st_size,
                                         "llama_cpp": llama_cpp_continuations(out, token_ids)}
                out.unlink()
            golden["models"][golden_name] = entry
    OUT.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
