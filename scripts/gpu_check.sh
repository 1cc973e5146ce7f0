#!/usr/bin/env bash
# scripts/gpu_check.sh OUTDIR: the CUDA backend's check on a GPU machine, made
# for one shot on the device tool (about 15 minutes of device time in all,
# one or two of them the machine's start): one command, one time budget
# (GPU_CHECK_BUDGET seconds, default 480, inside a 600 s call), the cheap
# and decisive steps first:
#   0. env      GPU, driver, runtime, nvcc, compiler, CMake, sanitizer: printed
#   1. build    the binaries carried in .gpu-kit/bin.tar.xz when they run here
#               and were built from this tree; else a build from the kit
#   2. smoke    one op on the GPU (~10 s); if it fails, nothing else runs
#   3. ops      the op-conformance suite on cuda (f32, bf16, the cuBLAS path):
#               pass/fail and the worst error per op (gtest XML properties)
#   4. engine   the engine tests (continuous batching, chunked prefill, prefix
#               hits, preemption, n > 1, speculation) on cuda, with ==, on a
#               dummy SmolLM2-shaped model (no model file fits the call)
#   5. models   the tiny Hugging Face models and dummy presets (SmolLM2-135M,
#               Qwen2.5-1.5B at q4_k_m) against the CPU backend on the same
#               machine, f32 and bf16 activations
#   6. speed    device-to-device copy bandwidth, and batch-1 decode tok/s of a
#               dummy Qwen2.5-1.5B in q4_k_m types
#   7. memcheck compute-sanitizer over small-shape ops and a tiny model, last:
#               the runtime may refuse it (gVisor does)
# Each step runs under min(its cap, what is left); one with too little left
# is reported as skipped, never dropped. summary.txt is rewritten after every
# step and every log is written as it runs, so a run cut short still
# reports. OUTDIR gets at most 8 files (what the device tool brings back):
# summary.txt build.log ops.log ops.xml engine.log models.log speed.log
# memcheck.log.
#
# What travels. The machine has nvcc 13.0, CMake, ninja, a compiler and
# Python, but no Debian -dev packages, no GoogleTest and no network. Here,
# scripts/gpu_kit.sh --binaries makes .gpu-kit/ (git-ignored): header-only
# {fmt} and nlohmann-json, PCRE2's static library, GoogleTest's and
# xgrammar's sources, and bin.tar.xz: the four programs below built from the
# kit alone for sm_90a, with a hash of the sources they came from. They need
# only libc, libstdc++ and the toolkit's libcublas there. When they run and the
# hash matches this tree, no minute goes to compiling; otherwise the step
# builds from the kit (xgrammar with its warnings not fatal, the tree
# without -Werror: another compiler may warn where ours does not).
#
# How to run it (from a session that was lent the device):
#   scripts/gpu_kit.sh --binaries                         # here, once per change
#   run(command="scripts/gpu_check.sh $OUT", carry=[".gpu-kit"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
BUILD_LOG="$OUT/build.log"
BUDGET=${GPU_CHECK_BUDGET:-480}
START=$(date +%s)
BUILD=${GPU_CHECK_BUILD_DIR:-build-gpu}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
KIT=$PWD/.gpu-kit
export FOLIO_SOURCE_DIR=$PWD  # the carried binaries were built in another tree
export FOLIO_ALLOW_MISSING_MODELS=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # libcublas
: >"$SUMMARY"
: >"$BUILD_LOG"

ROWS=()
flush() { { printf '%s\n' "${ROWS[@]}"; printf '(%s s of %s s used)\n' "$(($(date +%s) - START))" "$BUDGET"; } >"$SUMMARY"; }
row() {
  ROWS+=("$(printf '%-16s %-11s %s' "$1" "$2" "$3")")
  flush
}
detail() {
  ROWS+=("  $1")
  flush
}
left() { echo $((BUDGET - ($(date +%s) - START))); }
finish() {
  row "wall time" "" "$(($(date +%s) - START)) s of a ${BUDGET} s budget; logs in $OUT"
  echo
  echo "== folio GPU check =="
  cat "$SUMMARY"
  exit "$1"
}

# step NAME CAP LOG CMD...: runs CMD (output appended to LOG) under
# min(CAP, what is left of the budget); returns its exit status, 124 on
# timeout, 125 when skipped for want of time.
step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local t
  t=$(left)
  ((t > cap)) && t=$cap
  if ((t < 10)); then
    echo "== $name: skipped, out of time" >>"$log"
    return 125
  fi
  echo "== $name ($(date -u +%H:%M:%S), cap ${t}s): $*" >>"$log"
  local s
  s=$(date +%s)
  timeout --kill-after=5 "$t" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $(($(date +%s) - s))s" >>"$log"
  return $rc
}

status_word() {  # exit status -> PASS / FAIL / TIMEOUT / SKIPPED
  case $1 in 0) echo PASS ;; 124 | 137) echo TIMEOUT ;; 125) echo SKIPPED ;; *) echo "FAIL($1)" ;; esac
}

gtest_counts() {  # the gtest summary of a log's last run: "N passed, M failed, K skipped"
  python3 - "$1" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
def last(pattern):
    found = re.findall(pattern, text)
    return int(found[-1]) if found else 0
passed, failed, skipped = (last(r"\[  %s \] (\d+) test" % word) for word in ("PASSED ", "FAILED ", "SKIPPED"))
print(f"{passed} passed, {failed} failed, {skipped} skipped")
EOF
}

# The sandbox the machine runs in, by its kernel (KINDS.md: Firecracker's
# kernels are named -fc-, gVisor reports 4.4.0); the sanitizer and the
# profilers work on the first only.
runtime() {
  case "$(uname -r)" in
    *-fc-*) echo Firecracker ;;
    4.4.0) echo gVisor ;;
    *) echo "kernel $(uname -r)" ;;
  esac
}

# ---- 0. the machine ---------------------------------------------------------
{
  echo "== env ($(date -u))"
  echo "kernel: $(uname -r) ($(runtime))"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv || echo "nvidia-smi failed"
  nvidia-smi | grep -m1 "CUDA Version" || true
  nvcc --version | tail -2 || echo "no nvcc"
  c++ --version | head -1
  cmake --version | head -1
  echo "ninja $(ninja --version 2>/dev/null || echo missing)"
  echo "cores $(nproc), memory $(free -g | awk '/Mem:/ {print $2}') GiB"
  ls /usr/local/cuda/lib64/libcublas.so* 2>/dev/null || echo "no libcublas in /usr/local/cuda/lib64"
  (command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer) 2>/dev/null || echo "no compute-sanitizer"
} >>"$BUILD_LOG" 2>&1
cat "$BUILD_LOG"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
row "machine" "${GPU:-no GPU}" "cc ${CC:-?}, driver ${DRIVER:-?}, $(runtime), $(nproc) cores, $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'no nvcc')"
case "$CC" in
  90) GENCODE="-gencode=arch=compute_90a,code=sm_90a" ;;
  80 | 86 | 89 | 100 | 120) GENCODE="-gencode=arch=compute_${CC},code=sm_${CC}" ;;
  *) GENCODE="-gencode=arch=compute_80,code=sm_80;-gencode=arch=compute_89,code=sm_89;-gencode=arch=compute_90a,code=sm_90a" ;;
esac

# ---- 1. build: carried binaries, or from the kit ----------------------------
b0=$(date +%s)
T=""
CARRIED=build-carried
if [ -f "$KIT/bin.tar.xz" ]; then
  want=$(cat "$KIT/bin.source-hash" 2>/dev/null)
  have=$(scripts/source_hash.sh)
  if [ "$want" != "$have" ]; then
    echo "== carried binaries: built from sources $want, this tree is $have; building here" >>"$BUILD_LOG"
  elif [ "$CC" != 90 ]; then
    echo "== carried binaries: built for sm_90a, this GPU is cc $CC; building here" >>"$BUILD_LOG"
  elif ! { rm -rf "$CARRIED" && mkdir -p "$CARRIED" && tar -xJf "$KIT/bin.tar.xz" -C "$CARRIED"; } 2>>"$BUILD_LOG"; then
    echo "== carried binaries: cannot unpack $KIT/bin.tar.xz; building here" >>"$BUILD_LOG"
  elif ! "$CARRIED/bin/test_backend" --gtest_list_tests >/dev/null 2>>"$BUILD_LOG"; then
    echo "== carried binaries do not start here; building here:" >>"$BUILD_LOG"
    ldd "$CARRIED/bin/test_backend" >>"$BUILD_LOG" 2>&1
  else
    T=$CARRIED/bin
    row "build" "CARRIED" "binaries of sources $have, sm_90a, $(($(date +%s) - b0)) s to unpack, none compiled"
  fi
fi
if [ -z "$T" ]; then
  rc=0
  if [ ! -f "$KIT/include/fmt/core.h" ]; then
    row "build" "FAIL" "no .gpu-kit: run scripts/gpu_kit.sh here and carry .gpu-kit with the call"
    finish 1
  fi
  # xgrammar from the kit's pinned archive (no network there), into the build
  # dir where CMake looks for it; its own -Werror off (build_xgrammar.sh).
  step xgrammar 150 "$BUILD_LOG" env FOLIO_DEPS_CACHE="$KIT/deps" FOLIO_BUILD_DIR="$(realpath -m "$BUILD")" \
    JOBS="$JOBS" scripts/build_xgrammar.sh
  rc=$?
  ((rc == 0)) && step configure 60 "$BUILD_LOG" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFOLIO_DEPS_KIT="$KIT" -DFOLIO_CUDA=ON "-DFOLIO_CUDA_GENCODE=$GENCODE" -DFOLIO_WERROR=OFF -DFOLIO_BUILD_BENCH=OFF
  rc=$?
  ((rc == 0)) && step build 240 "$BUILD_LOG" cmake --build "$BUILD" -j "$JOBS" --target test_backend test_engine \
    folio_decode_speed bandwidth_probe
  rc=$?
  row "build" "$(status_word $rc)" "$(($(date +%s) - b0)) s here, $GENCODE"
  if ((rc != 0)); then
    tail -40 "$BUILD_LOG"
    finish 1
  fi
  T=$BUILD/tests
fi

# ---- 2. smoke: can the backend run one op? ----------------------------------
step smoke 20 "$BUILD_LOG" "$T/test_backend" --gtest_filter=CudaBackend.IsUsableHere
rc=$?
if ((rc == 0)) && grep -q '\[  SKIPPED \]' "$BUILD_LOG"; then rc=1; fi
if ((rc != 0)); then
  row "smoke" "$(status_word $rc)" "the backend could not run one op; nothing else is run (build.log)"
  # Whether CUDA itself runs here, apart from folio: the bare copy probe.
  step cuda-probe 15 "$BUILD_LOG" "$T/bandwidth_probe" 1
  row "bare CUDA" "$(status_word $?)" "$(grep -o '[0-9.]* TB/s read+write' "$BUILD_LOG" | tail -1)"
  tail -30 "$BUILD_LOG"
  finish 1
fi
row "smoke" "PASS" "one op ran on the GPU and a device-side error came back at the sync"

# ---- 3. the op suite on cuda ------------------------------------------------
step ops 150 "$OUT/ops.log" "$T/test_backend" '--gtest_filter=*/cuda:*/cuda_*:CudaBackend.*:CudaMath.*' \
  "--gtest_output=xml:$OUT/ops.xml"
rc=$?
row "ops" "$(status_word $rc)" "$(gtest_counts "$OUT/ops.log")"
if [ -f "$OUT/ops.xml" ]; then
  while IFS= read -r line; do detail "$line"; done < <(python3 - "$OUT/ops.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
worst = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    suite, name = case.get("classname", ""), case.get("name", "")
    label = name.split("/")[-1] if "/" in name else "-"
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    rel = float(props.get("worst_relative_error", "0"))
    used = float(props.get("worst_bound_used", "0"))
    skipped = case.get("result") == "skipped"
    ok = case.find("failure") is None and not skipped
    w = worst.setdefault((label, suite.split("/")[-1]), [0, 0, 0, 0.0, 0.0])
    w[0] += 1
    w[1] += ok
    w[2] += skipped
    w[3] = max(w[3], rel)
    w[4] = max(w[4], used)
# Per backend and op group: tests passed, the worst |got - ref| / max(|ref|, 1)
# and the largest share of its bound any output used (1: at the bound).
for (label, suite), (n, ok, skipped, rel, used) in sorted(worst.items()):
    extra = f" ({skipped} skipped)" if skipped else ""
    print(f"{label:<17} {suite:<13} {ok}/{n - skipped} pass{extra}, worst err {rel:.2g}, {used:.2g} of the bound")
EOF
  )
fi

# ---- 4. the engine's exactness on cuda --------------------------------------
ENGINE="$OUT/engine.log"
FOLIO_TEST_BACKEND=cuda FOLIO_ENGINE_TEST_MODEL=dummy:SmolLM2-135M:q4_k_m step engine 120 "$ENGINE" "$T/test_engine" \
  '--gtest_filter=EngineTest.*:DummyModel.*:*TinyMoeTest.GreedyAloneEqualsBatched*:-EngineTest.StopStrings*:EngineTest.DraftModel*'
rc=$?
row "engine (==)" "$(status_word $rc)" "$(gtest_counts "$ENGINE")"

# ---- 5. models against the CPU backend --------------------------------------
MODELS="$OUT/models.log"
FOLIO_TEST_BACKEND=cuda FOLIO_AGREEMENT_DUMMY="SmolLM2-135M:q4_k_m,Qwen2.5-1.5B:q4_k_m" step models-f32 80 "$MODELS" \
  "$T/test_engine" '--gtest_filter=*TinyAgreement.*:DummyAgreement.*:*TinyModelTest.*:*TinyMoe*'
rc1=$?
FOLIO_TEST_BACKEND=cuda FOLIO_TEST_ACTIVATIONS=bf16 FOLIO_AGREEMENT_DUMMY="Qwen2.5-1.5B:q4_k_m" step models-bf16 50 \
  "$MODELS" "$T/test_engine" '--gtest_filter=*TinyAgreement.*:DummyAgreement.*'
rc2=$?
row "models f32" "$(status_word $rc1)" "transformers' logits and the CPU backend's"
row "models bf16" "$(status_word $rc2)" "the CPU backend's"
while IFS= read -r line; do detail "$line"; done < <(grep -h "^\[agreement\]\|^\[[a-z0-9_]*\] [0-9]* positions" "$MODELS")

# ---- 6. speed ---------------------------------------------------------------
SPEED="$OUT/speed.log"
step bandwidth 20 "$SPEED" "$T/bandwidth_probe" 4
row "copy bandwidth" "$(status_word $?)" "$(grep -o '[0-9.]* TB/s read+write' "$SPEED" | tail -1)"
step decode 60 "$SPEED" "$T/folio_decode_speed" --backend cuda --dummy Qwen2.5-1.5B:q4_k_m \
  --input-len 128 --output-len 128 --runs 3
row "decode b=1" "$(status_word $?)" "$(grep -o 'median decode [0-9.]* tok/s' "$SPEED" | tail -1) (dummy Qwen2.5-1.5B q4_k_m)"

# ---- 7. memcheck on small shapes, last --------------------------------------
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
MEM="$OUT/memcheck.log"
if [ ! -x "$SAN" ]; then
  row "memcheck" "SKIPPED" "no compute-sanitizer on this machine"
  finish 0
fi
step memcheck-ops 60 "$MEM" "$SAN" --tool memcheck --leak-check no --error-exitcode 9 "$T/test_backend" \
  '--gtest_filter=*RowOps*/cuda:*EmbeddingOps*/cuda:*MoeOps*/cuda:*AttentionOps.EveryCode*/cuda:*AttentionOps.WriteKv*/cuda:*AttentionOps.CopyBlocks*/cuda:*AttentionOps.SlidingWindow*/cuda:*MatmulOps.Grouped*/cuda:*SamplingOps.BadRecords*/cuda:CudaBackend.*'
rc1=$?
FOLIO_TEST_BACKEND=cuda step memcheck-model 60 "$MEM" "$SAN" --tool memcheck --leak-check no --error-exitcode 9 \
  "$T/test_engine" '--gtest_filter=*TinyModelTest.GreedyTokensEqualTransformers/llama:*TinyMoeTest.GreedyAloneEqualsBatched/mixtral'
rc2=$?
errors=$(grep -h "ERROR SUMMARY" "$MEM" | awk '{s += $4} END {print s + 0}')
rc=$((rc1 != 0 ? rc1 : rc2))
why=""
grep -q "Device not supported\|not supported on this" "$MEM" && why="; the runtime refused the sanitizer"
row "memcheck" "$(status_word $rc)" "$errors errors reported ($(grep -c 'ERROR SUMMARY' "$MEM") runs)$why"

finish 0
