#!/usr/bin/env python3
"""Token-id goldens for tokenizer.json files, from the tokenizers package (Hugging Face's own).

For every tokenizer below and every UTF-8 string of
tests/data/tokenizer/strings.jsonl, this writes tests/data/tokenizer/hf/<name>.jsonl:
the ids tokenizers gives with added tokens split out (its default) and with
special tokens read as text (encode_special_tokens), neither adding BOS/EOS,
and the text its decoder gives back. tests/tokenizer/hf_tokenizer_golden_test.cc
checks folio's tokenizer (Vocab::from_hf) against these files with ==.

The tokenizers:
- tiny-llama, tiny-qwen2, tiny-gemma3: the tokenizer.json of each tiny model of
  tests/data/tiny (scripts/make_tiny_models.py): a Split regex then ByteLevel,
  NFC, ByteLevel with its own regex, merges as strings or pairs.
- smollm2-135m, qwen2.5-0.5b: real vocabularies. No tokenizer.json of them can
  be fetched here, so the script builds one from the GGUF file of the models
  cache (vocab, merges, control tokens as special added tokens) with the
  pre-tokenizer and normalizer the published tokenizer.json files of those
  models use; the golden's meta records that JSON, and the test builds the same
  file from the same GGUF. Skipped when the models cache lacks the file.

Strings that are not UTF-8 ({"hex": ...} lines) are left out: tokenizers takes
only Python str. Rerunning gives identical output. Run it in the reference
environment (scripts/setup_reference.sh; it needs tokenizers and gguf):

    build/venv-ref/bin/python scripts/make_hf_tokenizer_goldens.py
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRINGS = ROOT / "tests" / "data" / "tokenizer" / "strings.jsonl"
OUT = ROOT / "tests" / "data" / "tokenizer" / "hf"

QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# name -> (GGUF file in the models cache, normalizer, pre_tokenizer), as the
# published tokenizer.json of each model has them.
GGUF_TOKENIZERS = {
    "smollm2-135m": ("smollm2-135m-instruct-q4_1.gguf", None, {
        "type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}),
    "qwen2.5-0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", {"type": "NFC"}, {
        "type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}),
}


def models_dir() -> Path:
    return Path(os.environ.get("FOLIO_MODELS", Path.home() / ".cache" / "folio" / "models"))


def strings() -> list[str]:
    out = []
    for line in STRINGS.read_text(encoding="utf-8").splitlines():
        value = json.loads(line)
        if isinstance(value, str):
            out.append(value)
    return out


def tokenizer_json_from_gguf(path: Path, normalizer, pre_tokenizer) -> str:
    """A tokenizer.json with the GGUF's vocab and merges; control tokens become special added tokens."""
    import gguf

    reader = gguf.GGUFReader(str(path))

    def field(name):
        f = reader.fields[name]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = field("tokenizer.ggml.tokens")
    merges = field("tokenizer.ggml.merges")
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(tokens) if types[i] == 3]
    data = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": merges},
    }
    return json.dumps(data, ensure_ascii=False)


def write_golden(name: str, tokenizer_json: str, meta: dict) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    plain = Tokenizer.from_str(tokenizer_json)
    plain.encode_special_tokens = True
    lines = [json.dumps({"meta": meta}, ensure_ascii=False)]
    for text in strings():
        ids = tok.encode(text, add_special_tokens=False).ids
        lines.append(json.dumps({
            "text": text,
            "ids": ids,
            "ids_no_special": plain.encode(text, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
        }, ensure_ascii=False))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{name}: {len(lines) - 1} strings", file=sys.stderr)


def main() -> None:
    import tokenizers

    for tiny in ("llama", "qwen2", "gemma3"):
        path = ROOT / "tests" / "data" / "tiny" / tiny / "tokenizer.json"
        write_golden(f"tiny-{tiny}", path.read_text(encoding="utf-8"),
                     {"tokenizer_json": f"tests/data/tiny/{tiny}", "tokenizers": tokenizers.__version__})
    for name, (file, normalizer, pre) in GGUF_TOKENIZERS.items():
        path = models_dir() / file
        if not path.exists():
            print(f"{name}: {path} is missing; skipped (python3 scripts/fetch_models.py --all)", file=sys.stderr)
            continue
        write_golden(name, tokenizer_json_from_gguf(path, normalizer, pre),
                     {"gguf": file, "normalizer": normalizer, "pre_tokenizer": pre,
                      "tokenizers": tokenizers.__version__})


if __name__ == "__main__":
    main()
