#!/usr/bin/env python3
"""Token-id goldens from the reference tokenizer (llama.cpp, via llama-cpp-python).

For every string of tests/data/tokenizer/strings.jsonl and every model below,
this writes tests/data/tokenizer/<name>.jsonl: what llama.cpp's tokenizer gives
for parse_special false and true (add_special true), what its detokenizer gives
back, and facts about the vocab (token attributes, end-of-generation ids, a
sample of token pieces). tests/tokenizer/tokenizer_golden_test.cc checks
folio's tokenizer against these files with ==.

Run it (regenerates every file; rerunning gives identical output):

    scripts/setup_reference.sh                # once: build/venv-ref with llama-cpp-python
    build/venv-ref/bin/python scripts/make_tokenizer_goldens.py

The models come from the models cache (python3 scripts/fetch_models.py --all;
FOLIO_MODELS overrides its place). Besides the three real tokenizers, three
variants run Qwen2.5's vocab with another tokenizer.ggml.pre (llama-bpe, gpt-2,
default) so that those pre-tokenizers are checked too: the script writes each
variant as a vocab-only GGUF (metadata copied, no tensors) in a temporary
directory.

strings.jsonl holds one JSON string per line, or {"hex": ...} for input bytes
that are not UTF-8 (llama.cpp reads those leniently, and so must folio).

File format: the first line is {"meta": {...}}; every other line is
{"text", "parse_special", "ids", "detok", "detok_special", "roundtrip"} where
detok/detok_special are llama_detokenize(ids, remove_special=false,
unparse_special=false/true) as a string, or {"hex": ...} when the bytes are not
UTF-8, and roundtrip says whether llama.cpp gives the text back from the ids
less the BOS it added (rendering special tokens when they were parsed).
"""

import argparse
import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "tokenizer"

# name -> (model file in the cache, tokenizer.ggml.pre override or None)
MODELS = {
    "smollm2-135m": ("smollm2-135m-instruct-q4_1.gguf", None),
    "qwen2.5-0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", None),
    "gemma-3-270m": ("gemma-3-270m-q4_k_m.gguf", None),
    "qwen2.5-0.5b-pre-llama-bpe": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "llama-bpe"),
    "qwen2.5-0.5b-pre-gpt-2": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "gpt-2"),
    "qwen2.5-0.5b-pre-default": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "default"),
}

# Token ids whose pieces are recorded: the first ones, a stride through the
# vocab, and every token that is not a plain normal one.
PIECE_SAMPLE_FIRST = 600
PIECE_SAMPLE_STRIDE = 397


def models_dir() -> Path:
    env = os.environ.get("FOLIO_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "folio" / "models"


def write_vocab_only(src: Path, dst: Path, pre: str) -> None:
    """Copies src's metadata (tokenizer.ggml.pre replaced) into a GGUF without tensors."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(dst), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = pre if key == "tokenizer.ggml.pre" else field.contents()
        vtype = gguf.GGUFValueType(field.types[0])
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = gguf.GGUFValueType(field.types[1]) if len(field.types) > 1 else None
            writer.add_key_value(key, value, vtype, sub_type=sub)
        else:
            writer.add_key_value(key, value, vtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def as_json_text(data: bytes):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": data.hex()}


class Reference:
    def __init__(self, path: Path):
        import llama_cpp

        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab = self.llm._model.vocab
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text: bytes, parse_special: bool):
        return self.llm.tokenize(text, add_bos=True, special=parse_special)

    def detokenize(self, ids, unparse_special: bool) -> bytes:
        arr = (self.lc.llama_token * max(1, len(ids)))(*ids)
        size = 256 + 64 * len(ids)
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self.lc.llama_detokenize(self.vocab, arr, len(ids), buf, size, False, unparse_special)
            if n >= 0:
                return buf.raw[:n]
            size = -n + 1

    def piece(self, token: int, special: bool) -> bytes:
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self.lc.llama_token_to_piece(self.vocab, token, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def meta(self):
        lc, v = self.lc, self.vocab
        attrs = {}
        for i in range(self.n_vocab):
            a = lc.llama_vocab_get_attr(v, i)
            if a != 4:  # LLAMA_TOKEN_ATTR_NORMAL (1 << 2)
                attrs[str(i)] = a
        eog = [i for i in range(self.n_vocab) if lc.llama_vocab_is_eog(v, i)]
        sample = sorted(set(range(min(PIECE_SAMPLE_FIRST, self.n_vocab)))
                        | set(range(0, self.n_vocab, PIECE_SAMPLE_STRIDE))
                        | {int(k) for k in attrs})
        pieces = [[i, as_json_text(self.piece(i, False)), as_json_text(self.piece(i, True))] for i in sample]
        return {
            "llama_cpp_python": lc.__version__,
            "n_vocab": self.n_vocab,
            "bos": lc.llama_vocab_bos(v),
            "eos": lc.llama_vocab_eos(v),
            "eot": lc.llama_vocab_eot(v),
            "add_bos": bool(lc.llama_vocab_get_add_bos(v)),
            "add_eos": bool(lc.llama_vocab_get_add_eos(v)),
            "attrs": attrs,
            "eog": eog,
            "pieces": pieces,
        }


def golden_lines(ref: Reference, strings):
    yield json.dumps({"meta": ref.meta()}, ensure_ascii=False)
    bos = ref.lc.llama_vocab_bos(ref.vocab)
    for text in strings:
        # An entry is a JSON string, or {"hex": ...} for bytes that are not UTF-8.
        data = bytes.fromhex(text["hex"]) if isinstance(text, dict) else text.encode("utf-8")
        for parse_special in (False, True):
            ids = ref.tokenize(data, parse_special)
            body = ids[1:] if ref.lc.llama_vocab_get_add_bos(ref.vocab) and ids and ids[0] == bos else ids
            roundtrip = ref.detokenize(body, parse_special) == data
            yield json.dumps({
                "text": text,
                "parse_special": parse_special,
                "ids": ids,
                "detok": as_json_text(ref.detokenize(ids, False)),
                "detok_special": as_json_text(ref.detokenize(ids, True)),
                "roundtrip": roundtrip,
            }, ensure_ascii=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS), help="regenerate only these goldens")
    args = parser.parse_args()

    strings = [json.loads(line) for line in (DATA / "strings.jsonl").read_text(encoding="utf-8").split("\n") if line]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (file, pre) in MODELS.items():
            if args.only and name not in args.only:
                continue
            path = models_dir() / file
            if not path.exists():
                print(f"{path} is missing; run: python3 scripts/fetch_models.py --all", file=sys.stderr)
                return 1
            if pre is not None:
                variant = Path(tmp) / f"{name}.gguf"
                write_vocab_only(path, variant, pre)
                path = variant
            ref = Reference(path)
            out = DATA / f"{name}.jsonl"
            lines = list(golden_lines(ref, strings))
            out.write_text("\n".join(lines) + "\n", encoding="utf-8")
            print(f"{out.relative_to(ROOT)}: {len(lines) - 1} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
