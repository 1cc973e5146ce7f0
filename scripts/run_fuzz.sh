#!/usr/bin/env bash
# Fuzzes the GGUF reader: builds tests/fuzz/gguf_fuzz with clang (libFuzzer, ASan,
# UBSan) in its own build directory, seeds it with the hostile corpus and valid
# files, and runs it for FOLIO_FUZZ_SECONDS (default 60); then the HTTP request
# parser (tests/fuzz/request_parser_fuzz) for FOLIO_FUZZ_HTTP_SECONDS (default
# 30); then the safetensors reader and the widening of quantized (FP8, NF4)
# weights (safetensors_fuzz, hf_quantization_fuzz) for FOLIO_FUZZ_ST_SECONDS
# (default 30) each. Fails on any crash.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build_dir="${FOLIO_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${FOLIO_FUZZ_SECONDS:-60}"
http_seconds="${FOLIO_FUZZ_HTTP_SECONDS:-30}"
st_seconds="${FOLIO_FUZZ_ST_SECONDS:-30}"

# The fuzz targets need none of xgrammar, but configuring the project finds
# it: the one setup.sh built into the main build tree.
xgrammar_dir="${FOLIO_BUILD_DIR:-$root/build}/deps/xgrammar"
CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FUZZ=ON -DFOLIO_BUILD_TESTS=OFF -DFOLIO_WERROR=ON \
  -DFOLIO_XGRAMMAR_DIR="$xgrammar_dir" >/dev/null
cmake --build "$build_dir" --target gguf_fuzz request_parser_fuzz safetensors_fuzz hf_quantization_fuzz

# The working corpus persists between runs so coverage accumulates; seeds are
# rewritten every time from the sources.
work="$build_dir/fuzz/gguf"
mkdir -p "$work/corpus" "$work/artifacts"
rm -rf "$work/seeds"
mkdir -p "$work/seeds"
cp "$root"/tests/data/bad_gguf/*.gguf "$work/seeds/"
python3 "$root/scripts/make_bad_gguf.py" --valid "$work/seeds"

# Values that random mutation rarely guesses: the magic, the alignment key, type
# ids, and u64s at the edges of overflow. With it the fuzzer finds, from the valid
# seeds alone, a tensor size that wraps around 2^64.
cat >"$work/gguf.dict" <<'DICT'
magic="GGUF"
alignment_key="general.alignment"
u32_max="\xff\xff\xff\xff"
u32_2_31="\x00\x00\x00\x80"
u64_2_32="\x00\x00\x00\x00\x01\x00\x00\x00"
u64_2_61="\x00\x00\x00\x00\x00\x00\x00\x20"
u64_2_62="\x00\x00\x00\x00\x00\x00\x00\x40"
u64_2_63="\x00\x00\x00\x00\x00\x00\x00\x80"
u64_max="\xff\xff\xff\xff\xff\xff\xff\xff"
u64_max_minus_31="\xe1\xff\xff\xff\xff\xff\xff\xff"
value_type_string="\x08\x00\x00\x00"
value_type_array="\x09\x00\x00\x00"
value_type_u64="\x0a\x00\x00\x00"
value_type_f64_or_tensor_q4_k="\x0c\x00\x00\x00"
tensor_type_f64="\x1c\x00\x00\x00"
tensor_type_bf16="\x1e\x00\x00\x00"
n_dims_4="\x04\x00\x00\x00"
DICT

# Inputs stay under 64 KiB, so one allocation of 16 MiB would already be
# hundreds of times the input: the reader must never make one.
echo "run_fuzz: fuzzing the GGUF reader for ${seconds}s (crashes are saved in $work/artifacts)"
"$build_dir/fuzz/gguf_fuzz" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=16 \
  -dict="$work/gguf.dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
  "$work/corpus" "$work/seeds"

# The HTTP request parser, seeded with requests of every framing it takes and
# some it refuses; the first byte of an input picks how the rest is cut.
http="$build_dir/fuzz/http"
mkdir -p "$http/corpus" "$http/artifacts"
rm -rf "$http/seeds"
mkdir -p "$http/seeds"
printf '\x07GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n' >"$http/seeds/get"
printf '\x01POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 13\r\n\r\n{"prompt": 1}' >"$http/seeds/post"
printf '\x03POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n0\r\nT: v\r\n\r\n' \
  >"$http/seeds/chunked"
printf '\x05POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}' >"$http/seeds/both"
printf '\x09GET /a%%0d%%0ab HTTP/1.0\r\nExpect: 100-continue\r\nX: a\r\n b\r\n\r\n' >"$http/seeds/odd"
cat >"$http/http.dict" <<'DICT'
crlf="\x0d\x0a"
end="\x0d\x0a\x0d\x0a"
cl="Content-Length: "
te="Transfer-Encoding: chunked"
ce="Content-Encoding: gzip"
host="Host: a"
expect="Expect: 100-continue"
version="HTTP/1.1"
pct="%00"
DICT
echo "run_fuzz: fuzzing the HTTP request parser for ${http_seconds}s (crashes are saved in $http/artifacts)"
"$build_dir/fuzz/request_parser_fuzz" \
  -max_total_time="$http_seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -dict="$http/http.dict" -artifact_prefix="$http/artifacts/" -print_final_stats=1 \
  "$http/corpus" "$http/seeds"

# The safetensors reader and the quantized-weight widening, seeded with small
# valid files: an FP8 weight of [130, 130] (partial 128x128 blocks) with its
# block, tensor or channel scales, and an NF4 weight of [4, 96] with its
# absmax, code and quant state, with and without double quantization.
# hf_quantization_fuzz reads its first byte as the quantization_config.
st="$build_dir/fuzz/safetensors"
mkdir -p "$st/corpus" "$st/artifacts" "$st/qcorpus"
rm -rf "$st/seeds" "$st/qseeds"
mkdir -p "$st/seeds" "$st/qseeds"
python3 - "$st/seeds" "$st/qseeds" <<'PY'
import json, struct, sys
from pathlib import Path

def safetensors(tensors):
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data

f32 = lambda values: struct.pack(f"<{len(values)}f", *values)
nf4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0]
w = "model.layers.0.mlp.up_proj.weight"
codes = bytes((i * 37) % 0x7e for i in range(130 * 130))
fp8 = {0: [(w, "F8_E4M3", [130, 130], codes), (w[:-6] + "weight_scale_inv", "F32", [2, 2], f32([0.5, 1, 2, 0.25]))],
       1: [(w, "F8_E4M3", [130, 130], codes), (w[:-6] + "weight_scale_inv", "F32", [1], f32([0.01]))],
       2: [(w, "F8_E4M3", [130, 130], codes), (w[:-6] + "weight_scale", "F32", [130, 1], f32([0.01] * 130))]}
state = {"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4, 96]}
packed = bytes((i * 29) % 256 for i in range(4 * 96 // 2))
plain = [(w, "U8", [192, 1], packed), (w + ".absmax", "F32", [6], f32([0.5, 1, 2, 3, 4, 5])),
         (w + ".quant_map", "F32", [16], f32(nf4))]
blob = json.dumps(state).encode()
plain.append((w + ".quant_state.bitsandbytes__nf4", "U8", [len(blob)], blob))
dq_state = dict(state, nested_blocksize=256, nested_dtype="float32", nested_offset=0.125)
dq_blob = json.dumps(dq_state).encode()
nested = [(w, "U8", [192, 1], packed), (w + ".absmax", "U8", [6], bytes([0, 40, 80, 120, 200, 255])),
          (w + ".quant_map", "F32", [16], f32(nf4)), (w + ".nested_absmax", "F32", [1], f32([0.02])),
          (w + ".nested_quant_map", "F32", [256], f32([i / 255 for i in range(256)])),
          (w + ".quant_state.bitsandbytes__nf4", "U8", [len(dq_blob)], dq_blob)]
seeds, qseeds = Path(sys.argv[1]), Path(sys.argv[2])
for pick, tensors in fp8.items():
    (seeds / f"fp8_{pick}.safetensors").write_bytes(safetensors(tensors))
    (qseeds / f"fp8_{pick}").write_bytes(bytes([pick]) + safetensors(tensors))
for name, tensors in (("nf4", plain), ("nf4_dq", nested)):
    (seeds / f"{name}.safetensors").write_bytes(safetensors(tensors))
    (qseeds / name).write_bytes(bytes([3]) + safetensors(tensors))
PY
cat >"$st/st.dict" <<'DICT'
f8="F8_E4M3"
u8="U8"
f32="F32"
bf16="BF16"
offsets="data_offsets"
shape="shape"
dtype="dtype"
scale_inv="weight_scale_inv"
quant_state=".quant_state.bitsandbytes__nf4"
absmax=".absmax"
nested="nested_absmax"
blocksize="blocksize"
nested_offset="nested_offset"
DICT
echo "run_fuzz: fuzzing the safetensors reader for ${st_seconds}s (crashes are saved in $st/artifacts)"
"$build_dir/fuzz/safetensors_fuzz" \
  -max_total_time="$st_seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 \
  -dict="$st/st.dict" -artifact_prefix="$st/artifacts/" -print_final_stats=1 \
  "$st/corpus" "$st/seeds"
echo "run_fuzz: fuzzing the widening of quantized weights for ${st_seconds}s (crashes are saved in $st/artifacts)"
"$build_dir/fuzz/hf_quantization_fuzz" \
  -max_total_time="$st_seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 \
  -dict="$st/st.dict" -artifact_prefix="$st/artifacts/q-" -print_final_stats=1 \
  "$st/qcorpus" "$st/qseeds"
