#!/usr/bin/env bash
# One device session's GPU checks (issue 10), in one call, through the kit in ../shared/gpu:
#   scripts/build.sh && ../shared/gpu/bundle.sh && tests/gpu/pack_bench.sh
#   device: bash .gpu/enter.sh bash tests/gpu/device_run.sh [--only SCENARIO ...]
# It writes $OUT/gpu-run.tgz: every scenario's report, re-diagnosis, terminal view and logs
# (tests/gpu/scenarios.py), the NVML sampling cost with the real driver beside the same calls
# from Python (bench/nvml_bench.py), the daemon watching an unwrapped kernel on the GPU
# (tests/gpu/daemon_check.py), and the driver's Xid lines and device state.
set -u
out=${OUT:-/tmp/kwd-gpu-out}
dir=$out/gpu
mkdir -p "$dir"
pack() { tar czf "$out/gpu-run.tgz" -C "$out" gpu; }

{
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  uname -a
  python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)"
  echo "--- run --memory-limit where the shell's cgroup is shared:"
  "$KW" run --memory-limit 1G -- python3 -c 'print("kernel ran")'
} > "$dir/machine.txt" 2>&1
pack

lib=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
lib=${lib:-libnvidia-ml.so.1}  # the dynamic linker's search path, as `run` loads it
# The cost of a sample with one compute process on the device (a process holding 1 GiB).
python3 -c '
import torch, time
x = torch.empty(2**30, dtype=torch.uint8, device="cuda"); x.fill_(1); torch.cuda.synchronize()
print("holding", flush=True); time.sleep(60)' > "$dir/nvml-holder.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q holding "$dir/nvml-holder.out" && break; sleep 0.2; done
timeout 60 python3 bench/nvml_bench.py --build-dir .gpu/build --library "$lib" --seconds 5 \
  --iterations 5000 > "$dir/nvml_bench.txt" 2>&1
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
cat "$dir/nvml_bench.txt"
pack

timeout 420 python3 tests/gpu/scenarios.py --out "$dir" "$@" 2>&1 | tee "$dir/scenarios.log"
timeout 120 python3 tests/gpu/daemon_check.py --out "$dir/daemon" 2>&1 | tail -30
(dmesg 2>&1 | grep -i -E 'xid|nvrm' | tail -50) > "$dir/xid.txt"
pack
ls -la "$out"
