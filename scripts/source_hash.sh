#!/usr/bin/env bash
# Prints a short hash of the sources a build reads (src/, tests/, cmake/ and
# the CMake files), so that scripts/gpu_check.sh can tell whether binaries
# carried to the GPU machine were built from the tree it runs in.
set -euo pipefail
cd "$(dirname "$0")/.."
find src tests cmake CMakeLists.txt -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
  -o -name '*.inl' -o -name 'CMakeLists.txt' -o -name '*.cmake' \) -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-16
