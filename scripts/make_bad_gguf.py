#!/usr/bin/env python3
"""Writes the hostile GGUF corpus: small crafted files that GgufFile must refuse.

Each file is a valid base file with one thing broken. The script also writes
expected.tsv: per file, the substrings its error must contain (the field and
its byte offset, then the problem). Deterministic and rerunnable; stdlib only.

    python3 scripts/make_bad_gguf.py                 # (re)writes tests/data/bad_gguf/
    python3 scripts/make_bad_gguf.py --valid DIR     # writes only valid files (fuzzing seeds)
"""
import argparse
import struct
from pathlib import Path

# GGUF value type ids.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# ggml tensor type ids and their (elements per block, bytes per block).
T_F32, T_F16, T_Q4_0, T_Q8_0, T_F64 = 0, 1, 2, 8, 28
BLOCKS = {T_F32: (1, 4), T_F16: (1, 2), T_Q4_0: (32, 18), T_Q8_0: (32, 34), T_F64: (1, 8)}
SCALAR_FORMAT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?",
                 U64: "Q", I64: "q", F64: "d"}
HEADER_BYTES = 24
MIN_KV_BYTES = 8 + 1 + 4 + 1              # as the reader bounds metadata_kv_count
MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # as the reader bounds tensor_count
DAMAGED = "the file is damaged or cut short"


class Raw:
    """Bytes written as they are, in place of an encoded value or field."""

    def __init__(self, data: bytes):
        self.data = data


class Writer:
    """Appends little-endian (or big-endian) fields and remembers where named ones start."""

    def __init__(self, endian="<"):
        self.buf = bytearray()
        self.marks = {}
        self.endian = endian

    def mark(self, name):
        self.marks[name] = len(self.buf)

    def u32(self, v):
        self.buf += struct.pack(self.endian + "I", v & 0xFFFFFFFF)

    def u64(self, v):
        self.buf += struct.pack(self.endian + "Q", v & 0xFFFFFFFFFFFFFFFF)

    def string(self, s):
        if isinstance(s, Raw):
            self.buf += s.data
            return
        b = s.encode() if isinstance(s, str) else s
        self.u64(len(b))
        self.buf += b

    def payload(self, vtype, value):
        """A value's bytes as they follow its type id."""
        if isinstance(value, Raw):
            self.buf += value.data
        elif vtype == STRING:
            self.string(value)
        elif vtype == ARRAY:
            etype, items = value
            self.u32(etype)
            self.u64(len(items))
            for item in items:
                self.payload(etype, item)
        else:
            self.buf += struct.pack(self.endian + SCALAR_FORMAT[vtype], value)


BASE_KVS = [
    ("general.architecture", STRING, "llama"),
    ("general.name", STRING, "bad gguf corpus base"),
    ("llama.block_count", U32, 1),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b", "c"])),
    ("tokenizer.ggml.scores", ARRAY, (F32, [0.0, -1.0, -2.0])),
    ("general.alignment", U32, 32),
]
# name, dims (innermost first), type; offsets are laid out by build().
BASE_TENSORS = [
    ("a.weight", [8], T_F32),
    ("b.weight", [32, 2], T_Q8_0),
    ("c.weight", [4, 2], T_F16),
]


def tensor_bytes(dims, ttype):
    elems, nbytes = BLOCKS.get(ttype, (1, 1))  # unknown types: any small size will do
    n = 1
    for d in dims:
        n *= d
    return n // elems * nbytes


def build(kvs=None, tensors=None, *, magic=b"GGUF", version=3, n_tensors=None, n_kv=None,
          alignment=32, endian="<", data=True):
    """Assembles a file. A tensor is (name, dims, type) or a dict with any of name,
    dims, type, offset, n_dims. Returns (bytes, marks)."""
    kvs = BASE_KVS if kvs is None else kvs
    tensors = BASE_TENSORS if tensors is None else tensors
    tensors = [t if isinstance(t, dict) else {"name": t[0], "dims": t[1], "type": t[2]} for t in tensors]
    w = Writer(endian)
    w.buf += magic
    w.u32(version)
    w.mark("tensor_count")
    w.u64(len(tensors) if n_tensors is None else n_tensors)
    w.mark("metadata_kv_count")
    w.u64(len(kvs) if n_kv is None else n_kv)
    for i, (key, vtype, value) in enumerate(kvs):
        w.mark(f"kv{i}.key")
        w.string(key)
        w.mark(f"kv{i}.type")
        w.u32(vtype)
        w.mark(f"kv{i}.value")
        w.payload(vtype, value)
    w.mark("infos")
    running = 0
    for j, t in enumerate(tensors):
        w.mark(f"ti{j}.name")
        w.string(t["name"])
        w.mark(f"ti{j}.n_dims")
        w.u32(t.get("n_dims", len(t["dims"])))
        w.mark(f"ti{j}.dims")
        for d in t["dims"]:
            w.u64(d)
        w.mark(f"ti{j}.type")
        w.u32(t["type"])
        w.mark(f"ti{j}.offset")
        offset = t.get("offset", running)
        w.u64(offset)
        # Tensors too big to lay out (the corpus's huge shapes) take no room.
        if "offset" not in t and tensor_bytes(t["dims"], t["type"]) <= 1 << 16:
            running = offset + tensor_bytes(t["dims"], t["type"])
            running = (running + alignment - 1) // alignment * alignment
    w.mark("infos_end")
    if data:
        w.buf += bytes(-len(w.buf) % alignment)
        w.mark("data")
        # Distinct bytes so a reader that mixes tensors up is caught.
        w.buf += bytes((i * 7 + 1) & 0xFF for i in range(running))
    return bytes(w.buf), w.marks


# A valid file with a value of every type, empty and nested arrays and a
# zero-element tensor: a seed from which a fuzzer reaches every reader path.
EVERY_TYPE_KVS = BASE_KVS[:-1] + [
    ("v.u8", U8, 255), ("v.i8", I8, -128), ("v.u16", U16, 65535), ("v.i16", I16, -32768),
    ("v.u32", U32, 2**32 - 1), ("v.i32", I32, -2**31), ("v.f32", F32, 0.5), ("v.bool", BOOL, True),
    ("v.string", STRING, "h\u00e9llo"), ("v.u64", U64, 2**64 - 1), ("v.i64", I64, -2**63),
    ("v.f64", F64, -0.25),
    ("a.bool", ARRAY, (BOOL, [True, False])), ("a.i64", ARRAY, (I64, [-1, 2])),
    ("a.empty", ARRAY, (U16, [])),
    ("a.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"]), (ARRAY, [(F64, [1.0])])])),
    ("general.alignment", U32, 64),
]
EVERY_TYPE_TENSORS = BASE_TENSORS + [("empty.weight", [0, 4], T_F32)]


def at(field, offset):
    return f"{field} at byte {offset}"


class Corpus:
    def __init__(self):
        self.files = {}  # name -> (bytes, [substrings])

    def add(self, name, data, *expected):
        assert name not in self.files, name
        assert len(data) <= 8192, (name, len(data))
        self.files[name] = (data, list(expected))


def truncation_expectation(marks, cut, n_kv, n_tensors):
    """What the reader reports for the base file cut to `cut` bytes: the header
    bounds first, then the field the cut falls in."""
    if cut < HEADER_BYTES:
        return [at("header", 0), f"a GGUF header needs {HEADER_BYTES}"]
    if n_tensors > (cut - HEADER_BYTES) // MIN_TENSOR_INFO_BYTES:
        return [at("tensor_count", 8), "cannot fit in a file of"]
    if n_kv > (cut - HEADER_BYTES) // MIN_KV_BYTES:
        return [at("metadata_kv_count", 16), "cannot fit in a file of"]
    if cut < marks["infos"]:
        i = max(k for k in range(n_kv) if marks[f"kv{k}.key"] <= cut)
        key = BASE_KVS[i][0]
        if cut < marks[f"kv{i}.type"]:
            return [at(f"metadata key #{i}", marks[f"kv{i}.key"])]
        if cut < marks[f"kv{i}.value"]:
            return [at(key, marks[f"kv{i}.type"]), "needs 4 bytes"]
        return [at(key, marks[f"kv{i}.value"])]
    if n_tensors > (cut - marks["infos"]) // MIN_TENSOR_INFO_BYTES:
        return [at("tensor_count", 8), "after the metadata"]
    raise ValueError("choose a cut inside the metadata or the tensor infos")


def make_corpus():
    c = Corpus()
    base, m = build()
    n_kv, n_t = len(BASE_KVS), len(BASE_TENSORS)

    # ---- header
    c.add("empty.gguf", b"", at("header", 0), "has 0 bytes")
    c.add("header_truncated.gguf", base[:20], at("header", 0), "has 20 bytes")
    c.add("magic_wrong.gguf", b"GGUX" + base[4:], at("magic", 0), "not \"GGUF\"")
    c.add("magic_ggjt.gguf", b"tjgg" + base[4:], at("magic", 0), "not \"GGUF\"")
    for v in (0, 1, 4, 0xFFFFFFFF):
        c.add(f"version_{v}.gguf", build(version=v)[0], at("version", 4), f"version {v} is not supported")
    c.add("big_endian.gguf", build(endian=">")[0], at("version", 4), "big-endian")
    c.add("tensor_count_huge.gguf", build(n_tensors=2**64 - 1)[0], at("tensor_count", 8),
          f"{2**64 - 1} tensors cannot fit")
    c.add("tensor_count_too_many.gguf", build(n_tensors=50)[0], at("tensor_count", 8),
          "50 tensors cannot fit")
    c.add("kv_count_huge.gguf", build(n_kv=2**64 - 1)[0], at("metadata_kv_count", 16),
          f"{2**64 - 1} key/value pairs cannot fit")
    c.add("kv_count_near_2_63.gguf", build(n_kv=2**63 + 5)[0], at("metadata_kv_count", 16), "cannot fit")

    # ---- truncated in each key/value pair: in the key, the type id and the value
    for i in range(n_kv):
        for part, delta in (("key", 9), ("type", 2), ("value", 1)):
            cut = m[f"kv{i}.{part}"] + delta
            if part == "key" and delta >= m[f"kv{i}.type"] - m[f"kv{i}.key"]:
                continue
            c.add(f"truncated_kv{i}_{part}.gguf", base[:cut],
                  *truncation_expectation(m, cut, n_kv, n_t), DAMAGED)
    # ---- truncated in the tensor infos
    c.add("truncated_infos_start.gguf", base[:m["infos"]], at("tensor_count", 8), "after the metadata")
    last = n_t - 1
    for part, delta in (("name", 12), ("n_dims", 2), ("dims", 3), ("type", 1), ("offset", 5)):
        cut = m[f"ti{last}.{part}"] + delta
        field = f"tensor #{last} name" if part == "name" else f"tensor #{last} (c.weight) {part}"
        c.add(f"truncated_tensor_{part}.gguf", base[:cut], at(field, m[f"ti{last}.{part}"]), DAMAGED)
    # ---- truncated in the padding and in the data
    c.add("truncated_no_data.gguf", base[:m["infos_end"]], at("data section", m["infos_end"]),
          "but the file has")
    c.add("truncated_padding.gguf", base[:m["data"] - 3], at("data section", m["infos_end"]))
    c.add("truncated_data.gguf", base[:m["data"] + 40], at("tensor #1 (b.weight) offset", m["ti1.offset"]),
          "outside the data section of 40 bytes")
    c.add("truncated_last_tensor.gguf", base[:m["data"] + 140],
          at("tensor #2 (c.weight) offset", m["ti2.offset"]), "outside the data section of 140 bytes")

    # ---- metadata values
    def kv_case(name, index, key, vtype, value, *expected, **kw):
        kvs = list(BASE_KVS)
        kvs[index] = (key, vtype, value)
        data, marks = build(kvs, **kw)
        c.add(name, data, *[e(marks) if callable(e) else e for e in expected])

    kv_case("key_length_huge.gguf", 1, Raw(struct.pack("<Q", 2**64 - 1)), STRING, "x",
            lambda mk: at("metadata key #1", mk["kv1.key"]), "runs past the end")
    kv_case("key_empty.gguf", 1, "", STRING, "x", lambda mk: at("metadata key #1", mk["kv1.key"]),
            "the key is empty")
    kv_case("key_duplicate.gguf", 1, "general.architecture", STRING, "x",
            lambda mk: at("general.architecture", mk["kv1.key"]), "duplicate metadata key")
    kv_case("string_length_huge.gguf", 1, "general.name", STRING, Raw(struct.pack("<Q", 2**64 - 1)),
            lambda mk: at("general.name", mk["kv1.value"]), "runs past the end")
    kv_case("string_without_end.gguf", 5, "general.name2", STRING, Raw(struct.pack("<Q", 5000) + b"abc"),
            lambda mk: at("general.name2", mk["kv5.value"]), "string of 5000 bytes runs past the end")
    kv_case("value_type_unknown.gguf", 2, "llama.block_count", 13, Raw(b"\0" * 4),
            lambda mk: at("llama.block_count", mk["kv2.type"]), "unknown value type id 13")
    kv_case("value_type_huge.gguf", 2, "llama.block_count", 0xFFFFFFFF, Raw(b"\0" * 4),
            lambda mk: at("llama.block_count", mk["kv2.type"]), "unknown value type id 4294967295")
    kv_case("array_element_type_unknown.gguf", 4, "tokenizer.ggml.scores", ARRAY,
            Raw(struct.pack("<IQ", 99, 0)),
            lambda mk: at("tokenizer.ggml.scores", mk["kv4.value"]), "unknown value type id 99")
    kv_case("array_length_huge.gguf", 4, "tokenizer.ggml.scores", ARRAY,
            Raw(struct.pack("<IQ", F32, 2**64 - 1)),
            lambda mk: at("tokenizer.ggml.scores", mk["kv4.value"] + 4), "cannot fit")
    # 2^61 u64 elements are 2^64 bytes: a reader that multiplies first wraps to 0.
    kv_case("array_length_wraps.gguf", 4, "tokenizer.ggml.scores", ARRAY,
            Raw(struct.pack("<IQ", U64, 2**61)),
            lambda mk: at("tokenizer.ggml.scores", mk["kv4.value"] + 4), "cannot fit")
    kv_case("array_of_strings_huge.gguf", 3, "tokenizer.ggml.tokens", ARRAY,
            Raw(struct.pack("<IQ", STRING, 2**63)),
            lambda mk: at("tokenizer.ggml.tokens", mk["kv3.value"] + 4), "cannot fit")
    kv_case("array_string_length_huge.gguf", 3, "tokenizer.ggml.tokens", ARRAY,
            Raw(struct.pack("<IQQ", STRING, 2, 1) + b"a" + struct.pack("<Q", 2**64 - 2)),
            lambda mk: at("tokenizer.ggml.tokens", mk["kv3.value"] + 4 + 8 + 9), "runs past the end")
    kv_case("array_of_arrays_huge.gguf", 3, "tokenizer.ggml.tokens", ARRAY,
            Raw(struct.pack("<IQ", ARRAY, 2**62)),
            lambda mk: at("tokenizer.ggml.tokens", mk["kv3.value"] + 4), "cannot fit")
    inner_huge = struct.pack("<IQ", ARRAY, 1) + struct.pack("<IQ", U32, 2**62)
    kv_case("nested_array_length_huge.gguf", 3, "tokenizer.ggml.tokens", ARRAY, Raw(inner_huge),
            lambda mk: at("tokenizer.ggml.tokens", mk["kv3.value"] + 12 + 4), "cannot fit")

    def nested(depth):
        return struct.pack("<IQ", ARRAY, 1) * (depth - 1) + struct.pack("<IQ", U8, 0)

    kv_case("nested_arrays_9_deep.gguf", 3, "deep", ARRAY, Raw(nested(9)),
            lambda mk: at("deep", mk["kv3.value"] + 8 * 12), "nested deeper than 8")
    kv_case("nested_arrays_300_deep.gguf", 3, "deep", ARRAY, Raw(nested(300)),
            lambda mk: at("deep", mk["kv3.value"] + 8 * 12), "nested deeper than 8")
    # ---- general.alignment
    for name, vtype, value, problem, delta in (
            ("alignment_zero.gguf", U32, 0, "0 is not a power of two", 4),
            ("alignment_three.gguf", U32, 3, "3 is not a power of two", 4),
            ("alignment_u64.gguf", U64, 32, "has type u64; expected u32", 0),
            ("alignment_string.gguf", STRING, "32", "has type string; expected u32", 0),
            ("alignment_array.gguf", ARRAY, (U32, [32]), "has type array; expected u32", 0)):
        kv_case(name, 5, "general.alignment", vtype, value,
                lambda mk, d=delta: at("general.alignment", mk["kv5.type"] + d), problem)
    # A valid power of two, but the data section would start past the end of the file.
    kv_case("alignment_2_31.gguf", 5, "general.alignment", U32, 2**31,
            lambda mk: at("data section", mk["infos_end"]), f"padded to the alignment {2**31}",
            tensors=BASE_TENSORS[:1])

    # ---- tensor infos
    def tensor_case(name, index, change, *expected, **kw):
        tensors = [{"name": t[0], "dims": t[1], "type": t[2]} for t in BASE_TENSORS]
        tensors[index].update(change)
        data, marks = build(tensors=tensors, **kw)
        c.add(name, data, *[e(marks) if callable(e) else e for e in expected])

    label = "tensor #1 (b.weight)"
    tensor_case("tensor_name_empty.gguf", 1, {"name": ""},
                lambda mk: at("tensor #1 name", mk["ti1.name"]), "name of 0 bytes")
    tensor_case("tensor_name_too_long.gguf", 1, {"name": "n" * 65},
                lambda mk: at("tensor #1 name", mk["ti1.name"]), "name of 65 bytes")
    tensor_case("tensor_name_length_huge.gguf", 1, {"name": Raw(struct.pack("<Q", 2**64 - 1))},
                lambda mk: at("tensor #1 name", mk["ti1.name"]), "runs past the end")
    tensor_case("tensor_duplicate.gguf", 1, {"name": "a.weight"},
                lambda mk: at("tensor #1 (a.weight) name", mk["ti1.name"]), "duplicate tensor name")
    tensor_case("n_dims_zero.gguf", 1, {"n_dims": 0, "dims": []},
                lambda mk: at(label + " n_dims", mk["ti1.n_dims"]), "0 dimensions")
    tensor_case("n_dims_five.gguf", 1, {"dims": [32, 1, 1, 1, 2]},
                lambda mk: at(label + " n_dims", mk["ti1.n_dims"]), "5 dimensions")
    tensor_case("n_dims_huge.gguf", 1, {"n_dims": 0xFFFFFFFF},
                lambda mk: at(label + " n_dims", mk["ti1.n_dims"]), "4294967295 dimensions")
    tensor_case("dims_product_overflow.gguf", 1, {"dims": [2**32, 2**32]},
                lambda mk: at(label + " dims", mk["ti1.dims"]), "product of the dimensions overflows")
    tensor_case("dims_product_overflow_4d.gguf", 1, {"dims": [2**16, 2**16, 2**16, 2**16]},
                lambda mk: at(label + " dims", mk["ti1.dims"]), "product of the dimensions overflows")
    tensor_case("dim_negative.gguf", 1, {"dims": [32, 2**64 - 2]},
                lambda mk: at(label + " dims", mk["ti1.dims"] + 8), "dimension 1 is 18446744073709551614")
    # 2^62 f32 elements fit in int64, but their 2^64 bytes do not fit in uint64.
    tensor_case("bytes_overflow_f32.gguf", 1, {"dims": [2**62], "type": T_F32},
                lambda mk: at(label + " dims", mk["ti1.dims"]), "size in bytes")
    tensor_case("bytes_overflow_f64.gguf", 1, {"dims": [2**60, 4], "type": T_F64},
                lambda mk: at(label + " dims", mk["ti1.dims"]), "size in bytes")
    tensor_case("tensor_huge.gguf", 1, {"dims": [2**20, 2**20], "type": T_F32},
                lambda mk: at(label + " offset", mk["ti1.offset"]), "outside the data section")
    tensor_case("tensor_type_retired.gguf", 1, {"type": 4},
                lambda mk: at(label + " type", mk["ti1.type"]), "unknown tensor type id 4")
    tensor_case("tensor_type_huge.gguf", 1, {"type": 1000},
                lambda mk: at(label + " type", mk["ti1.type"]), "unknown tensor type id 1000")
    tensor_case("row_not_whole_blocks.gguf", 1, {"dims": [33, 2], "type": T_Q4_0},
                lambda mk: at(label + " dims", mk["ti1.dims"]), "not a multiple of the q4_0 block size 32")
    tensor_case("offset_misaligned.gguf", 1, {"offset": 36},
                lambda mk: at(label + " offset", mk["ti1.offset"]), "not a multiple of the alignment 32")
    tensor_case("offset_out_of_range.gguf", 1, {"offset": 2**40},
                lambda mk: at(label + " offset", mk["ti1.offset"]), "outside the data section")
    tensor_case("offset_wraps.gguf", 1, {"offset": 2**64 - 32},
                lambda mk: at(label + " offset", mk["ti1.offset"]), "outside the data section")
    tensor_case("tensors_same_offset.gguf", 2, {"offset": 32},
                lambda mk: at("tensor #2 (c.weight) offset", mk["ti2.offset"]), "overlaps tensor b.weight")
    # b.weight (68 bytes at 32) runs into c.weight, moved from 128 down to 96.
    tensor_case("tensors_overlap.gguf", 2, {"offset": 96},
                lambda mk: at("tensor #2 (c.weight) offset", mk["ti2.offset"]), "overlaps tensor b.weight")
    tensor_case("tensor_past_end.gguf", 2, {"offset": 160},
                lambda mk: at("tensor #2 (c.weight) offset", mk["ti2.offset"]), "outside the data section")
    return c


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--out", type=Path, default=root / "tests" / "data" / "bad_gguf")
    parser.add_argument("--valid", type=Path, metavar="DIR", help="write only valid files, to DIR")
    args = parser.parse_args()
    if args.valid:
        args.valid.mkdir(parents=True, exist_ok=True)
        (args.valid / "valid_base.gguf").write_bytes(build()[0])
        (args.valid / "valid_every_type.gguf").write_bytes(
            build(EVERY_TYPE_KVS, EVERY_TYPE_TENSORS, alignment=64)[0])
        return
    corpus = make_corpus()
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.gguf"):
        old.unlink()
    lines = ["# file\tsubstrings its error must contain (written by scripts/make_bad_gguf.py)"]
    for name, (data, expected) in sorted(corpus.files.items()):
        (args.out / name).write_bytes(data)
        assert all("\t" not in e and "\n" not in e for e in expected)
        lines.append("\t".join([name] + expected))
    (args.out / "expected.tsv").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(corpus.files)} files to {args.out}")


if __name__ == "__main__":
    main()
