#!/usr/bin/env bash
# The HTTP-layer comparison of bench/RESULTS.md: builds both candidates and
# probes each, taking turns, $1 rounds (default 3). libmicrohttpd is not a
# dependency of folio: this script needs libmicrohttpd-dev and says so.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds="${1:-3}"
out="${TMPDIR:-/tmp}/folio_http_choice"
mkdir -p "$out"
for p in libboost1.81-dev libmicrohttpd-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "run.sh: $p is not installed; install it (apt-get install $p) to rerun this comparison" >&2; exit 1; }
done
g++ -O2 -std=c++20 "$here/beast_proto.cc" -o "$out/beast_proto" -pthread
gcc -O2 "$here/mhd_proto.c" -o "$out/mhd_proto" -lmicrohttpd -pthread
for ((r = 0; r < rounds; r++)); do
  for candidate in beast mhd; do
    port=$((18100 + 2 * r))
    [ "$candidate" = mhd ] && port=$((port + 1))
    "$out/${candidate}_proto" "$port" &
    pid=$!
    sleep 0.5
    printf '%s ' "$candidate"
    python3 "$here/probe.py" "$port" "$pid"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
