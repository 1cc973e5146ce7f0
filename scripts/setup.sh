#!/usr/bin/env bash
# Set-up from nothing: the Debian packages the build needs and the Python tools
# the tests need (pinned, in a virtual environment inside the build tree).
# Idempotent and quiet when everything is already there.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build_dir="${FOLIO_BUILD_DIR:-$root/build}"

# One place names every Debian package the project needs.
debian_packages=(
  build-essential cmake ninja-build pkg-config
  patch  # our fixes to xgrammar's source (scripts/patches), applied by build_xgrammar.sh
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libpcre2-dev libboost1.81-dev
  libopenblas-dev  # GPTQ (folio quantize --method gptq): Cholesky factors and matrix products
  clang libclang-rt-14-dev
  python3-venv
  chromium chromium-driver firefox-esr  # the web page's browser tests (tests/python/test_web_page.py)
  libzmq3-dev cppzmq-dev  # KV-cache events (--kv-events-endpoint): a ZeroMQ PUB socket
  nginx  # the affinity tier in deploy/nginx, run on loopback by tests/python/test_replicas.py
  libcurl4-openssl-dev ca-certificates  # folio pull: HTTPS to the Hugging Face Hub (src/hub), the system's CA store
  libssl-dev  # folio pull: SHA-256 (and git's SHA-1) of downloaded files, OpenSSL's libcrypto
  tmux  # the terminal chat's test drives `folio chat` in a real terminal (tests/python/test_chat_terminal.py)
)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts nginx as a service on port 80 when it installs it; the
  # tests run an nginx of their own on loopback ports, so stop that one.
  if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null &&
     systemctl is-active --quiet nginx 2>/dev/null; then
    "${sudo_cmd[@]}" systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi

# Python tools for the tests, pinned in scripts/requirements-test.txt.
venv="$build_dir/venv"
req="$here/requirements-test.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating Python environment in $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
fi

# xgrammar, the grammar engine of structured outputs, from its pinned source.
FOLIO_BUILD_DIR="$build_dir" "$here/build_xgrammar.sh"
