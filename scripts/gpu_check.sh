#!/usr/bin/env bash
# scripts/gpu_check.sh OUTDIR: the CUDA backend's whole check on a GPU machine
# (made for the H200 of the device tool), one command that prints a short
# table last and leaves its logs in OUTDIR (at most 8 files: what the device
# tool brings back). Steps, each under a time cap inside one budget
# (GPU_CHECK_BUDGET seconds, default 540; a step with too little time left is
# reported as skipped, never silently dropped):
#   1. build    from this tree, for the GPU's own architecture only
#   2. ops      the op-conformance suite on cuda (f32, bf16, the cuBLAS path):
#               pass/fail and the worst error per op (gtest XML properties)
#   3. memcheck compute-sanitizer over the small-shape ops and a tiny model
#   4. models   the tiny Hugging Face models and dummy presets (SmolLM2-135M,
#               Qwen2.5-1.5B at q4_k_m) against the CPU backend on the same
#               machine: relative logit error, top-1 at decisive positions,
#               chunked prefill bit-identical; also transformers' logits of the
#               tiny models; f32 and bf16 activations
#   5. engine   the engine tests (continuous batching, chunked prefill, prefix
#               hits, preemption, n > 1, speculation) on cuda, with ==, on a
#               dummy SmolLM2-shaped model (no model file fits the tree)
#   6. speed    device-to-device copy bandwidth, and batch-1 decode tok/s of a
#               dummy Qwen2.5-1.5B in q4_k_m types
#
# Why it builds there, and from what. The machine has nvcc 13.0, CMake,
# ninja, a compiler and Python, but no Debian -dev packages, no GoogleTest and
# no network; a binary built here may not run there. So it builds from the
# working tree plus a dependency kit made here by scripts/gpu_kit.sh
# (.gpu-kit/, ~9 MB, git-ignored, carried with the call): header-only {fmt}
# and nlohmann-json, PCRE2's static library, GoogleTest's and xgrammar's sources. The
# server and the folio binary are not built (Boost's headers would outweigh
# the rest of the call), so the speed figure comes from
# tests/tools/folio_decode_speed, which drives the same engine. Only sm_90a
# (or the GPU's own architecture) is compiled there, to keep the build short.
#
# How to run it (from a session that was lent the device):
#   scripts/gpu_kit.sh                                    # here, once
#   run(command="scripts/gpu_check.sh $OUT", carry=[".gpu-kit"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
BUDGET=${GPU_CHECK_BUDGET:-540}
START=$(date +%s)
BUILD=${GPU_CHECK_BUILD_DIR:-build-gpu}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
: >"$SUMMARY"

row() { printf '%-22s %-9s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY" >/dev/null; }
left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME CAP LOG CMD...: runs CMD (output appended to LOG) under
# min(CAP, what is left of the budget); returns its exit status, 124 on timeout.
step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local t
  t=$(left)
  ((t > cap)) && t=$cap
  if ((t < 15)); then
    echo "== $name: skipped, out of time" >>"$log"
    return 125
  fi
  echo "== $name ($(date -u +%H:%M:%S), cap ${t}s): $*" >>"$log"
  local s=$(date +%s)
  timeout --kill-after=10 "$t" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $(($(date +%s) - s))s" >>"$log"
  return $rc
}

status_word() {  # exit status -> PASS / FAIL / TIMEOUT / SKIPPED
  case $1 in 0) echo PASS ;; 124 | 137) echo TIMEOUT ;; 125) echo SKIPPED ;; *) echo "FAIL($1)" ;; esac
}

gtest_counts() {  # the gtest summary of a log: "N passed, M failed, K skipped"
  python3 - "$1" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
def last(pattern):
    found = re.findall(pattern, text)
    return int(found[-1]) if found else 0
print(f"{last(r'\[  PASSED  \] (\d+) test')} passed, {last(r'\[  FAILED  \] (\d+) test')} failed, "
      f"{last(r'\[  SKIPPED \] (\d+) test')} skipped")
EOF
}

# ---- 0. the machine ---------------------------------------------------------
ENV_LOG="$OUT/build.log"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || true
  nvcc --version | tail -2
  cmake --version | head -1
  ninja --version
  c++ --version | head -1
  nproc
} >"$ENV_LOG" 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
case "$CC" in
  90) GENCODE="-gencode=arch=compute_90a,code=sm_90a" ;;
  80 | 86 | 89 | 100 | 120) GENCODE="-gencode=arch=compute_${CC},code=sm_${CC}" ;;
  *) GENCODE="-gencode=arch=compute_80,code=sm_80;-gencode=arch=compute_89,code=sm_89;-gencode=arch=compute_90a,code=sm_90a" ;;
esac
row "machine" "${GPU:-no GPU}" "cc ${CC:-?}, $(nproc) cores, $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'no nvcc')"

# ---- 1. build ---------------------------------------------------------------
if [ ! -f .gpu-kit/include/fmt/core.h ]; then
  row "build" "FAIL" "no .gpu-kit: run scripts/gpu_kit.sh here and carry .gpu-kit with the call"
  cat "$SUMMARY"
  exit 1
fi
# xgrammar from the kit's pinned archive (no network there), into the build dir
# where CMake looks for it.
step xgrammar 240 "$ENV_LOG" env FOLIO_DEPS_CACHE="$PWD/.gpu-kit/deps" FOLIO_BUILD_DIR="$(realpath -m "$BUILD")" JOBS="$JOBS" \
  scripts/build_xgrammar.sh
rc=$?
((rc == 0)) && step configure 120 "$ENV_LOG" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOLIO_DEPS_KIT="$PWD/.gpu-kit" \
  -DFOLIO_CUDA=ON "-DFOLIO_CUDA_GENCODE=$GENCODE" -DFOLIO_WERROR=OFF -DFOLIO_BUILD_BENCH=OFF
rc=$?
b0=$(date +%s)
if ((rc == 0)); then
  step build 300 "$ENV_LOG" cmake --build "$BUILD" -j "$JOBS" --target test_backend test_engine folio_decode_speed bandwidth_probe
  rc=$?
fi
row "build" "$(status_word $rc)" "$(($(date +%s) - b0)) s, $GENCODE"
if ((rc != 0)); then
  tail -40 "$ENV_LOG"
  cat "$SUMMARY"
  exit 1
fi
T="$BUILD/tests"

# ---- 2. the op suite on cuda ------------------------------------------------
step ops 150 "$OUT/ops.log" "$T/test_backend" '--gtest_filter=*/cuda:*/cuda_*:CudaBackend.*:CudaMath.*' \
  "--gtest_output=xml:$OUT/ops.xml"
rc=$?
row "ops" "$(status_word $rc)" "$(gtest_counts "$OUT/ops.log")"
if [ -f "$OUT/ops.xml" ]; then
  python3 - "$OUT/ops.xml" <<'EOF' | tee -a "$SUMMARY"
import sys, xml.etree.ElementTree as ET
worst = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    suite, name = case.get("classname", ""), case.get("name", "")
    label = name.split("/")[-1] if "/" in name else "-"
    op = suite.split("/")[-1] + "." + name.split("/")[0]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    rel = float(props.get("worst_relative_error", "0"))
    used = float(props.get("worst_bound_used", "0"))
    skipped = case.get("result") == "skipped"
    ok = case.find("failure") is None and not skipped
    key = (label, op.split(".")[0])
    w = worst.setdefault(key, [0, 0, 0, 0.0, 0.0])
    w[0] += 1
    w[1] += ok
    w[2] += skipped
    w[3] = max(w[3], rel)
    w[4] = max(w[4], used)
# Per backend and op group: tests passed, the worst |got - ref| / max(|ref|, 1)
# and the largest share of its bound any output used (1: at the bound).
for (label, suite), (n, ok, skipped, rel, used) in sorted(worst.items()):
    extra = f" ({skipped} skipped)" if skipped else ""
    print(f"  {label:<17} {suite:<13} {ok}/{n - skipped} pass{extra}, worst err {rel:.2g}, {used:.2g} of the bound")
EOF
fi

# ---- 3. memcheck on small shapes --------------------------------------------
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
MEM="$OUT/memcheck.log"
step memcheck-ops 110 "$MEM" "$SAN" --tool memcheck --leak-check no --error-exitcode 9 "$T/test_backend" \
  '--gtest_filter=*RowOps*/cuda:*EmbeddingOps*/cuda:*MoeOps*/cuda:*AttentionOps.EveryCode*/cuda:*AttentionOps.WriteKv*/cuda:*AttentionOps.CopyBlocks*/cuda:*AttentionOps.SlidingWindow*/cuda:*MatmulOps.Grouped*/cuda:*SamplingOps.BadRecords*/cuda:CudaBackend.*'
rc1=$?
FOLIO_TEST_BACKEND=cuda step memcheck-model 90 "$MEM" "$SAN" --tool memcheck --leak-check no --error-exitcode 9 \
  "$T/test_engine" '--gtest_filter=*TinyModelTest.GreedyTokensEqualTransformers/llama:*TinyMoeTest.GreedyAloneEqualsBatched/mixtral'
rc2=$?
errors=$(grep -h "ERROR SUMMARY" "$MEM" | awk '{s += $4} END {print s + 0}')
rc=$((rc1 != 0 ? rc1 : rc2))
row "memcheck" "$(status_word $rc)" "$errors errors reported ($(grep -c 'ERROR SUMMARY' "$MEM") runs)"

# ---- 4. models against the CPU backend --------------------------------------
MODELS="$OUT/models.log"
export FOLIO_ALLOW_MISSING_MODELS=1
FOLIO_TEST_BACKEND=cuda FOLIO_AGREEMENT_DUMMY="SmolLM2-135M:q4_k_m,Qwen2.5-1.5B:q4_k_m" step models-f32 150 "$MODELS" \
  "$T/test_engine" '--gtest_filter=*TinyAgreement.*:DummyAgreement.*:*TinyModelTest.*:*TinyMoe*'
rc1=$?
FOLIO_TEST_BACKEND=cuda FOLIO_TEST_ACTIVATIONS=bf16 FOLIO_AGREEMENT_DUMMY="Qwen2.5-1.5B:q4_k_m" step models-bf16 90 \
  "$MODELS" "$T/test_engine" '--gtest_filter=*TinyAgreement.*:DummyAgreement.*'
rc2=$?
row "models f32" "$(status_word $rc1)" "transformers' logits and the CPU backend's"
row "models bf16" "$(status_word $rc2)" "the CPU backend's"
grep -h "^\[agreement\]\|^\[[a-z0-9_]*\] [0-9]* positions" "$MODELS" | sed 's/^/  /' | tee -a "$SUMMARY" >/dev/null

# ---- 5. the engine's exactness on cuda --------------------------------------
ENGINE="$OUT/engine.log"
FOLIO_TEST_BACKEND=cuda FOLIO_ENGINE_TEST_MODEL=dummy:SmolLM2-135M:q4_k_m step engine 150 "$ENGINE" "$T/test_engine" \
  '--gtest_filter=EngineTest.*:DummyModel.*:*TinyMoeTest.GreedyAloneEqualsBatched*:-EngineTest.StopStrings*:EngineTest.DraftModel*'
rc=$?
row "engine (==)" "$(status_word $rc)" "$(gtest_counts "$ENGINE")"

# ---- 6. speed ---------------------------------------------------------------
SPEED="$OUT/speed.log"
step bandwidth 40 "$SPEED" "$BUILD/tests/bandwidth_probe" 4
row "copy bandwidth" "$(status_word $?)" "$(grep -o '[0-9.]* TB/s read+write' "$SPEED" | tail -1)"
step decode 90 "$SPEED" "$BUILD/tests/folio_decode_speed" --backend cuda --dummy Qwen2.5-1.5B:q4_k_m \
  --input-len 128 --output-len 128 --runs 3
row "decode b=1" "$(status_word $?)" "$(grep -o 'median decode [0-9.]* tok/s' "$SPEED" | tail -1) (dummy Qwen2.5-1.5B q4_k_m)"

row "wall time" "" "$(($(date +%s) - START)) s of a ${BUDGET} s budget; logs in $OUT"
echo
echo "== folio GPU check =="
cat "$SUMMARY"
