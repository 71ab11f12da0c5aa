#!/usr/bin/env bash
# One device session's checks for issues 38 and 39, in one call (device_run.sh is the whole
# GPU round of issue 10; this is the part these issues add):
#   scripts/build.sh && ../shared/gpu/bundle.sh && tests/gpu/pack_bench.sh
#   device: bash .gpu/enter.sh bash tests/gpu/stacks_packing_run.sh
# It writes $OUT/gpu-run.tgz: a crash inside libcuda (scenarios.py), a kernel stuck waiting
# for the GPU asked where it is (stacks_check.py), and smoke -j auto against blind -j on the
# one device (packing_check.py).
set -u
out=${OUT:-/tmp/kwd-gpu-out}
dir=$out/gpu
mkdir -p "$dir"
pack() { tar czf "$out/gpu-run.tgz" -C "$out" gpu; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
  python3 -c "import ctypes; ctypes.CDLL('libdw.so.1'); print('libdw loads')"
  cat /proc/sys/kernel/yama/ptrace_scope 2>&1
} > "$dir/machine.txt" 2>&1
timeout 100 python3 tests/gpu/scenarios.py --out "$dir" --only crash_in_libcuda 2>&1 |
  tee "$dir/scenarios.log"
pack
timeout 200 python3 tests/gpu/stacks_check.py --out "$dir/stacks" 2>&1 | tee "$dir/stacks.log"
pack
timeout 240 python3 tests/gpu/packing_check.py --out "$dir/packing" 2>&1 | tee "$dir/packing.log"
pack
ls -la "$out"
