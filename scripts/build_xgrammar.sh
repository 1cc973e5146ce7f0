#!/usr/bin/env bash
# Builds xgrammar (the grammar engine behind structured outputs) from its
# pinned source distribution, with the fixes in scripts/patches, into
# $FOLIO_BUILD_DIR/deps/xgrammar: a static library and its headers (with
# dlpack's; picojson is used inside only). Called by setup.sh; a second run
# with the same pin and patches does nothing.
set -euo pipefail

version=0.2.9
sha256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build_dir="${FOLIO_BUILD_DIR:-$root/build}"
prefix="$build_dir/deps/xgrammar"
stamp="$prefix/.built"
# Our fixes to it, applied in name order (each says what and why); they join
# the stamp, so a new or changed one builds again.
patches=("$here"/patches/xgrammar-"$version"-*.patch)
[ -e "${patches[0]}" ] || patches=()
built="$version $sha256${patches:+ $(cat "${patches[@]}" | sha256sum | cut -d' ' -f1)}"
[ "$(cat "$stamp" 2>/dev/null)" = "$built" ] && exit 0

# The archive is kept outside the build tree, so a fresh build dir builds
# again without fetching again.
cache="${FOLIO_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/folio/deps}"
archive="$cache/xgrammar-$version.tar.gz"
mkdir -p "$cache"
if [ ! -f "$archive" ] || [ "$(sha256sum "$archive" | cut -d' ' -f1)" != "$sha256" ]; then
  echo "setup: fetching the xgrammar $version source distribution"
  pip="$build_dir/venv/bin/pip"
  [ -x "$pip" ] || pip="pip3"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$pip" download -q --disable-pip-version-check "xgrammar==$version" --no-binary xgrammar --no-deps -d "$tmp"
  got="$(sha256sum "$tmp/xgrammar-$version.tar.gz" | cut -d' ' -f1)"
  if [ "$got" != "$sha256" ]; then
    echo "setup: xgrammar-$version.tar.gz has sha256 $got, expected $sha256; refusing it" >&2
    exit 1
  fi
  mv "$tmp/xgrammar-$version.tar.gz" "$archive"
fi

echo "setup: building xgrammar $version (a static library, about 2 minutes on 2 cores)"
src="$build_dir/deps/xgrammar-src"
rm -rf "$src" "$prefix"
mkdir -p "$src"
tar -xzf "$archive" -C "$src" --strip-components=1
for p in "${patches[@]}"; do
  if command -v patch >/dev/null; then
    patch -s -d "$src" -p1 <"$p"
  else  # a machine set up by other means (the GPU kit's): git applies it outside a repository too
    (cd "$src" && git apply -p1 "$p")
  fi
done
# xgrammar reads its options from a config.cmake, the build dir's first (its
# shipped cmake/config.cmake turns the Python bindings on). Our flags come
# after its own: -fno-lto after its -flto=auto (plain objects that any linker
# and archiver read), -Wno-error after its -Werror (another compiler's new
# warnings, as on the GPU machine's, must not stop a library we do not edit).
mkdir -p "$src/build"
cat >"$src/build/config.cmake" <<'CONFIG'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
CONFIG
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DXGRAMMAR_BUILD_PYTHON_BINDINGS=OFF -DXGRAMMAR_BUILD_CXX_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$src/build" -j "${JOBS:-$(nproc)}" >/dev/null
cmake --install "$src/build" >/dev/null
cp "$src/LICENSE" "$prefix/LICENSE"
rm -rf "$src"
echo "$built" >"$stamp"
