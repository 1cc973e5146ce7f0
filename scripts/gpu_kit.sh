#!/usr/bin/env bash
# Makes .gpu-kit/: what the build needs from Debian packages, for a machine
# that has a compiler, CMake and the CUDA toolkit but none of those packages
# (the GPU machine). Run it here, where scripts/setup.sh installed them; the
# kit is ignored by git and travels with the working tree when the device
# call carries it (carry: [".gpu-kit"]). About 9 MB:
#   include/fmt, include/nlohmann   header-only {fmt} (MIT) and nlohmann-json (MIT)
#   include/pcre2.h, lib/libpcre2-8.a   PCRE2 (BSD), static: C, needs only libc
#   googletest/                     GoogleTest and GoogleMock sources (BSD-3), built there
#   deps/xgrammar-*.tar.gz          xgrammar's pinned source (Apache-2.0), built there by
#                                   scripts/build_xgrammar.sh, which checks its sha256
#   licenses/                       each package's copyright file
# cmake/deps_kit.cmake reads it (-DFOLIO_DEPS_KIT=$PWD/.gpu-kit). The server
# and the folio binary are not built from a kit: Boost's Beast and Asio
# headers would take much of the 64 MiB a call carries, so they stay out.
#
# scripts/gpu_kit.sh --binaries also builds, from the kit alone (the GPU
# machine's path: FOLIO_DEPS_KIT, xgrammar from the kit's archive) in
# build-kit/, the four programs scripts/gpu_check.sh runs - test_backend,
# test_engine, folio_decode_speed, bandwidth_probe - for sm_90a (the H100's
# and H200's), checks that the build read no header of a -dev package and
# links no library of one, and packs them, stripped, into .gpu-kit/bin.tar.xz
# (44 MB of programs in 8 MB: the tree, the kit and the programs must fit
# the 64 MiB a call carries) beside the hash of the sources they came from
# (bin.source-hash, scripts/source_hash.sh). They need only libc, libstdc++
# and the CUDA 13 toolkit's libcublas there.
set -euo pipefail
cd "$(dirname "$0")/.."
binaries=0
case "${1:-}" in
  "") ;;
  --binaries) binaries=1 ;;
  *) echo "usage: scripts/gpu_kit.sh [--binaries]" >&2; exit 2 ;;
esac
kit=.gpu-kit
lib=/usr/lib/$(gcc -print-multiarch)

need() { [ -e "$1" ] || { echo "gpu_kit: $1 is missing; run scripts/setup.sh first ($2)" >&2; exit 1; }; }
need /usr/include/fmt/format-inl.h "libfmt-dev"
need /usr/include/nlohmann/json.hpp "nlohmann-json3-dev"
need /usr/include/pcre2.h "libpcre2-dev"
need "$lib/libpcre2-8.a" "libpcre2-dev"
need /usr/src/googletest/CMakeLists.txt "googletest"
deps_cache="${FOLIO_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/folio/deps}"
xgrammar=$(ls "$deps_cache"/xgrammar-*.tar.gz 2>/dev/null | head -1)
need "${xgrammar:-$deps_cache/xgrammar-VERSION.tar.gz}" "scripts/build_xgrammar.sh fetches it"

rm -rf "$kit"
mkdir -p "$kit/include" "$kit/lib" "$kit/licenses"
cp -rp /usr/include/fmt /usr/include/nlohmann "$kit/include/"
cp -p /usr/include/pcre2.h "$kit/include/"
cp -p "$lib/libpcre2-8.a" "$kit/lib/"
cp -rp /usr/src/googletest "$kit/googletest"
mkdir -p "$kit/deps"
cp -p "$xgrammar" "$kit/deps/"
for p in libfmt-dev nlohmann-json3-dev libpcre2-dev googletest; do
  [ -f "/usr/share/doc/$p/copyright" ] && cp "/usr/share/doc/$p/copyright" "$kit/licenses/$p.copyright"
done
grep -qx '/.gpu-kit/' .gitignore 2>/dev/null || echo "gpu_kit: note: .gpu-kit/ should be in .gitignore" >&2

if ((binaries)); then
  build="build-kit"
  programs=(test_backend test_engine folio_decode_speed bandwidth_probe)
  FOLIO_DEPS_CACHE="$PWD/$kit/deps" FOLIO_BUILD_DIR="$PWD/$build" scripts/build_xgrammar.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOLIO_DEPS_KIT="$PWD/$kit" -DFOLIO_CUDA=ON \
    "-DFOLIO_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" -DFOLIO_WERROR=ON -DFOLIO_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${programs[@]}"
  # The kit must be all the build read: this machine has the -dev packages,
  # the GPU machine does not.
  leaks=$(ninja -C "$build" -t deps | grep -E '^ +/usr/include/(fmt|nlohmann|pcre2|gtest|gmock|boost|CLI|zmq|cblas|openblas)' |
    sort -u || true)
  if [ -n "$leaks" ]; then
    echo "gpu_kit: the kit build read headers of -dev packages, which the GPU machine lacks:" >&2
    echo "$leaks" | head -20 >&2
    exit 1
  fi
  staged=$(mktemp -d)
  trap 'rm -rf "$staged"' EXIT
  mkdir -p "$staged/bin"
  for p in "${programs[@]}"; do
    path=$(find "$build" -name "$p" -type f -perm -u+x | head -1)
    if ldd "$path" | grep -E 'lib(fmt|pcre2|gtest|gmock|openblas|zmq|boost)|not found'; then
      echo "gpu_kit: $p needs a library the GPU machine lacks (above)" >&2
      exit 1
    fi
    strip -o "$staged/bin/$p" "$path"
  done
  tar -cJf "$kit/bin.tar.xz" -C "$staged" bin
  scripts/source_hash.sh >"$kit/bin.source-hash"
  echo "gpu_kit: ${programs[*]} of sources $(cat "$kit/bin.source-hash") in $kit/bin.tar.xz" \
    "($(du -k "$kit/bin.tar.xz" | cut -f1) KiB), needing:"
  ldd "$staged/bin/test_engine" | awk '{print "  " $1}'
fi
echo "gpu_kit: $(du -sh "$kit" | cut -f1) in $kit; carry it with the device call: carry [\"$kit\"]"
