#!/usr/bin/env bash
# Configures and builds build-asan: clang with AddressSanitizer + UndefinedBehaviorSanitizer,
# the library also carrying libFuzzer's coverage hooks, so that one build serves the
# sanitizer stage's tests (scripts/sanitize.sh) and the fuzz targets (scripts/fuzz.sh).
#   scripts/asan_build.sh TARGET...     e.g. scripts/asan_build.sh kernel-watchdog kwd-fuzzers
# -O1 -g1 (line tables): ASan's recommended level and libFuzzer's, and a third quicker to
# compile than -O2 -g. Clang, not GCC: it compiles this code a third faster under ASan, and
# libFuzzer is clang's.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  echo "usage: scripts/asan_build.sh TARGET..." >&2
  exit 2
fi
# A build-asan configured by GCC (before the fuzzers moved in) cannot change compiler in place.
if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:FILEPATH=.*clang++' build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DKWD_SANITIZE=address,undefined \
  -DKWD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-asan -j "${KWD_BUILD_JOBS:-$(nproc)}" "${targets[@]}"
