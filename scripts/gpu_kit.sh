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
set -euo pipefail
cd "$(dirname "$0")/.."
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
cp -r /usr/include/fmt /usr/include/nlohmann "$kit/include/"
cp /usr/include/pcre2.h "$kit/include/"
cp "$lib/libpcre2-8.a" "$kit/lib/"
cp -r /usr/src/googletest "$kit/googletest"
mkdir -p "$kit/deps"
cp "$xgrammar" "$kit/deps/"
for p in libfmt-dev nlohmann-json3-dev libpcre2-dev googletest; do
  [ -f "/usr/share/doc/$p/copyright" ] && cp "/usr/share/doc/$p/copyright" "$kit/licenses/$p.copyright"
done
grep -qx '/.gpu-kit/' .gitignore 2>/dev/null || echo "gpu_kit: note: .gpu-kit/ should be in .gitignore" >&2
echo "gpu_kit: $(du -sh "$kit" | cut -f1) in $kit; carry it with the device call: carry [\"$kit\"]"
