#!/usr/bin/env bash
# Configures and builds into ./build (warnings are errors).
#   scripts/build.sh [DIR [CMAKE_ARGS...]]   another build directory, e.g. with sanitizers:
#   scripts/build.sh build-asan -DKWD_SANITIZE=address,undefined
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift $(($# > 0 ? 1 : 0))
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j "${KWD_BUILD_JOBS:-$(nproc)}"
