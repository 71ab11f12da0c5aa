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

# The kit's pyzmq loads libzmq.so.5 from .gpu/lib, which bundle.sh fills from kernel-watchdog's
# own shared libraries; kernel-watchdog links libzmq statically now (the wheel), so it and the
# libraries it needs that the GPU machine may lack are added here.
zmq=$(ldconfig -p | awk '/libzmq\.so\.5 /{print $NF; exit}')
[ -n "$zmq" ] || { echo "no libzmq.so.5 here (apt install libzmq5)" >&2; exit 1; }
cp -L "$zmq" .gpu/lib/
ldd "$zmq" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/lib(c|m|pthread|resolv|stdc\+\+|gcc_s|dl)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
