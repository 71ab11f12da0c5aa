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
# (awk reads all of ldconfig's list: leaving early would kill ldconfig by SIGPIPE, which
# pipefail and set -e turn into this script's silent end.)
zmq=$(ldconfig -p | awk '/libzmq\.so\.5 / && !found {print $NF; found = 1}')
[ -n "$zmq" ] || { echo "no libzmq.so.5 here (apt install libzmq5)" >&2; exit 1; }
cp -L "$zmq" .gpu/lib/
ldd "$zmq" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/lib(c|m|pthread|resolv|stdc\+\+|gcc_s|dl)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done

# Native stacks (issue 38): the crash handler the start-up hook loads into the kernel, beside the
# executable where `run` looks for it, and elfutils' libdw with libelf, which the device's
# userland may lack (their other needs, zlib, lzma, bzip2 and zstd, every distribution has).
cp "$build/kernel-watchdog-crash.so" .gpu/bin/
for name in libdw.so.1 libelf.so.1; do
  lib=$(ldconfig -p | awk -v n="$name" '$1 == n && !found {print $NF; found = 1}')
  [ -n "$lib" ] || { echo "no $name here (apt install libdw1)" >&2; exit 1; }
  cp -L "$lib" .gpu/lib/
done
