#!/usr/bin/env bash
# The reference environment: llama-cpp-python (which compiles llama.cpp, 10-20
# minutes the first time) and gguf, pinned in scripts/requirements-reference.txt,
# in a virtual environment inside the build tree, and llama.cpp's source tree
# from the same pinned sdist in build/llama.cpp-src (its convert_hf_to_gguf.py
# converts the tiny checkpoints of scripts/make_family_models.py). Idempotent
# and quiet when the environment already matches the requirements. Then
# regenerate the goldens:
#   build/venv-ref/bin/python scripts/make_tokenizer_goldens.py
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build_dir="${FOLIO_BUILD_DIR:-$root/build}"

# The build needs a C++ compiler and CMake; scripts/setup.sh installs both.
for tool in cmake c++ python3; do
  command -v "$tool" >/dev/null || { echo "setup_reference: $tool is missing; run scripts/setup.sh first" >&2; exit 1; }
done

venv="$build_dir/venv-ref"
req="$here/requirements-reference.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup_reference: creating $venv (llama-cpp-python compiles llama.cpp; this takes a while)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  "$venv/bin/python" -c "import llama_cpp, gguf, torch, transformers"
  echo "$want" >"$stamp"
fi

# llama.cpp's converter, from the very sdist the pin names (the wheel built
# from it carries no converter).
src="$build_dir/llama.cpp-src"
pin="$(grep -E '^llama-cpp-python==' "$req")"
if [ ! -f "$src/convert_hf_to_gguf.py" ] || [ "$(cat "$src/.pin" 2>/dev/null)" != "$pin" ]; then
  echo "setup_reference: unpacking llama.cpp's source tree of $pin into $src"
  tmp="$(mktemp -d)"
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$tmp" "$pin"
  tar -xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
  rm -rf "$src"
  mkdir -p "$src"
  cp -r "$tmp"/llama_cpp_python-*/vendor/llama.cpp/. "$src"/
  echo "$pin" >"$src/.pin"
  rm -rf "$tmp"
fi
