#!/usr/bin/env bash
# The reference environment: llama-cpp-python (which compiles llama.cpp, 10-20
# minutes the first time) and gguf, pinned in scripts/requirements-reference.txt,
# in a virtual environment inside the build tree. Idempotent and quiet when the
# environment already matches the requirements. Then regenerate the goldens:
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
