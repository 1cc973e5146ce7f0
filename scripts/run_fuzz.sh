#!/usr/bin/env bash
# Fuzzes the GGUF reader: builds tests/fuzz/gguf_fuzz with clang (libFuzzer, ASan,
# UBSan) in its own build directory, seeds it with the hostile corpus and valid
# files, and runs it for FOLIO_FUZZ_SECONDS (default 60); then the HTTP request
# parser (tests/fuzz/request_parser_fuzz) for FOLIO_FUZZ_HTTP_SECONDS (default
# 30). Fails on any crash.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build_dir="${FOLIO_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${FOLIO_FUZZ_SECONDS:-60}"
http_seconds="${FOLIO_FUZZ_HTTP_SECONDS:-30}"

# The fuzz targets need none of xgrammar, but configuring the project finds
# it: the one setup.sh built into the main build tree.
xgrammar_dir="${FOLIO_BUILD_DIR:-$root/build}/deps/xgrammar"
CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FUZZ=ON -DFOLIO_BUILD_TESTS=OFF -DFOLIO_WERROR=ON \
  -DFOLIO_XGRAMMAR_DIR="$xgrammar_dir" >/dev/null
cmake --build "$build_dir" --target gguf_fuzz request_parser_fuzz

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
