#!/usr/bin/env bash
# Adds the NVML cost bench's binary to the kit's .gpu/ (after ../shared/gpu/bundle.sh), where
# bench/nvml_bench.py --build-dir .gpu/build finds it. Its shared libraries are a subset of
# kernel-watchdog's, which bundle.sh packed into .gpu/lib.
set -euo pipefail
build=${1:-build}
[ -d .gpu/lib ] || { echo "no .gpu/: run ../shared/gpu/bundle.sh first" >&2; exit 1; }
mkdir -p .gpu/build/bench
cp "$build/bench/kwd-nvml-bench" .gpu/build/bench/
strip .gpu/build/bench/kwd-nvml-bench
