"""GPU failures in a real ipykernel under the watchdog, for the device machine (issue 10).

Each scenario starts `$KW run -- python3 -m ipykernel_launcher -f {connection_file}` through
a real jupyter_client KernelManager, runs its cells, waits for the kernel to die, and keeps
what the watchdog wrote: the report, `reports diagnose --json` over it, `reports show`, the
watchdog's own stderr and the kernel's stderr (what a Jupyter server's log would get). A
summary line per scenario says what the diagnosis named; `expect` is what a reader of the
cells would call the cause, printed beside it (a mismatch is a finding, not hidden).

On the device: bash .gpu/enter.sh python3 tests/gpu/scenarios.py --out $OUT/gpu
Here, without a GPU: KW=build/kernel-watchdog /usr/bin/python3 tests/gpu/scenarios.py
--only cpu_selftest --out /tmp/gpu (the harness itself, on a CPU crash).
"""
import argparse
import json
import os
import pathlib
import queue
import shutil
import subprocess
import sys
import tempfile
import time

from jupyter_client import KernelManager

# A JAX process that is not the kernel: default preallocation takes 75 % of the device.
JAX_HOLDER = """\
import jax, jax.numpy as jnp, sys, time
jnp.ones(4).block_until_ready()
print("holding", flush=True)
time.sleep(600)
"""

TORCH_HOLDER = """\
import torch, sys, time
x = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda"); x.fill_(1)
torch.cuda.synchronize()
print("holding", flush=True)
time.sleep(600)
"""

SCENARIOS = {
    # The harness itself on a CPU crash: runs anywhere.
    "cpu_selftest": {
        "cells": [
            ("ok", "import ctypes, os\nx = bytearray(50 * 2**20)"),
            ("death", "def load_batch():\n    return ctypes.string_at(0)\nload_batch()"),
        ],
        "expect": "native_crash",
    },
    # Issue 10 item 4 as seen on an H100: a CUDA OOM the kernel survived in cell 2, cell 3 ran
    # fine, cell 4 segfaulted in load_batch. The OOM is context, the segfault the cause.
    "survived_cuda_oom_then_segv": {
        "cells": [
            ("ok", "import torch, ctypes\nwarm = torch.ones(1, device='cuda')"),
            ("error", "too_big = torch.empty(400 * 2**30, dtype=torch.uint8, device='cuda')"),
            ("ok", "a = torch.randn(2048, 2048, device='cuda')\nfloat((a @ a).sum())"),
            ("death", "def load_batch():\n    return ctypes.string_at(0)\nload_batch()"),
        ],
        "expect": "native_crash",
    },
    # Item 5: another process (JAX, preallocating) holds most of the device; PyTorch in the
    # kernel runs out, and the training loop's handler logs the error to fd 2 and aborts (as
    # a C++ trainer does). The report must name the holder and advise for JAX.
    "contention_jax_holder": {
        "holder": JAX_HOLDER,
        "cells": [
            ("ok", "import torch, os\nfree, total = torch.cuda.mem_get_info()\n"
                   "want = int(free + total // 8)"),
            ("death", "try:\n    x = torch.empty(want, dtype=torch.uint8, device='cuda')\n"
                      "except torch.cuda.OutOfMemoryError as e:\n"
                      "    os.write(2, ('training step failed: ' + str(e) + '\\n').encode())\n"
                      "    os.abort()"),
        ],
        "expect": "gpu_out_of_memory",
    },
    # Item 1 on a GPU: XLA's allocator logs its failure to fd 2 (absl logging, native code),
    # then the process aborts within milliseconds; those lines must reach the report.
    "jax_oom_last_words": {
        "env": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        "cells": [
            ("ok", "import jax, jax.numpy as jnp, os\njnp.ones(4).block_until_ready()"),
            ("death", "try:\n    jnp.ones((1 << 36,), dtype=jnp.float32).block_until_ready()\n"
                      "finally:\n    os.abort()"),
        ],
        "expect": "gpu_out_of_memory",
    },
    # A kernel holding 30 GiB of device memory segfaults two cells later: the cells' GPU
    # memory (delta and peak per cell) and the device state at death.
    "segv_holding_gpu": {
        "cells": [
            ("ok", "import torch, ctypes\nx = torch.empty(30 * 2**30, dtype=torch.uint8, "
                   "device='cuda'); x.fill_(1); torch.cuda.synchronize()"),
            ("ok", "import time\ntime.sleep(1.2)\ny = x[:2**20].sum().item()"),
            ("death", "ctypes.string_at(0)"),
        ],
        "expect": "native_crash",
    },
    # Issue 38: a bad host pointer handed to the driver (cuMemcpyHtoD through ctypes, as a
    # binding with a bug would): the segfault is inside libcuda, and the report must say so.
    "crash_in_libcuda": {
        "cells": [
            ("ok", "import torch, ctypes\ndst = torch.empty(1 << 20, dtype=torch.uint8, "
                   "device='cuda')\ncuda = ctypes.CDLL('libcuda.so.1')"),
            ("death", "def upload(host, n):\n    return cuda.cuMemcpyHtoD_v2("
                      "ctypes.c_uint64(dst.data_ptr()), ctypes.c_void_p(host), ctypes.c_size_t(n))"
                      "\nprint('returned', upload(0xdead0000, 1 << 20))"),
        ],
        "expect": "native_crash",
        "headline_names": "libcuda",
    },
    # An illegal address (Xid 31) and the exit that follows within milliseconds, as a CUDA
    # program dies of it: the Xid must be in the report (asked for at the death).
    "illegal_address_then_exit": {
        "cells": [
            ("ok", "import cupy, os\nk = cupy.RawKernel(r'extern \"C\" __global__ void "
                   "f(int* p) { *(int*)0x10 = 1; }', 'f')\nz = cupy.zeros(1, dtype=cupy.int32)"),
            ("death", "try:\n    k((1,), (1,), (z,))\n    cupy.cuda.runtime.deviceSynchronize()\n"
                      "finally:\n    os._exit(1)"),
        ],
        "expect": "gpu_driver_fault",
    },
    # "Run all": short cells queued at once, each allocating; each cell's GPU delta must be
    # its own (the GPU is sampled at 2 Hz on a thread of its own; a cell's end is read at
    # once).
    "run_all_short_cells": {
        "queued": True,
        "cells": [
            ("ok", "import torch, ctypes, time"),
            ("ok", "a = torch.empty(8 * 2**30, dtype=torch.uint8, device='cuda')"),
            ("ok", "b = torch.empty(4 * 2**30, dtype=torch.uint8, device='cuda')"),
            ("ok", "del a; torch.cuda.empty_cache()"),
            ("death", "time.sleep(0.7)\nctypes.string_at(0)"),
        ],
        "expect": "native_crash",
    },
    # The same as "run all" really sends it: every cell queued at once, so each starts a
    # millisecond after the one before ends. The assert's Xid is taken at cell 2's end, after
    # cell 3 began; it must still count as cell 2's, which the kernel went on from.
    "run_all_survived_device_assert_then_abort": {
        "queued": True,
        "cells": [
            ("ok", "import torch, os, time\nv = torch.zeros(10, device='cuda')\n"
                   "i = torch.tensor([100], device='cuda')"),
            ("error", "w = v[i]\ntorch.cuda.synchronize()"),
            ("ok", "print('carrying on')"),
            ("death", "time.sleep(0.3)\nos.abort()"),
        ],
        "expect": "abort",
    },
    # A device-side assert the kernel survived (Xid 43 through NVML events), then an abort in
    # a later cell: the assert is context, the abort the cause.
    "survived_device_assert_then_abort": {
        "cells": [
            ("ok", "import torch, os\nv = torch.zeros(10, device='cuda')\n"
                   "i = torch.tensor([100], device='cuda')"),
            ("error", "w = v[i]\ntorch.cuda.synchronize()"),
            ("ok", "import time\ntime.sleep(1.5)\nprint('carrying on')"),
            ("death", "os.abort()"),
        ],
        "expect": "abort",
    },
}


def kernelspec(root, kw):
    spec = root / "share" / "jupyter" / "kernels" / "gpu-watched"
    spec.mkdir(parents=True)
    argv = [kw, "run", "--", sys.executable, "-m", "ipykernel_launcher", "-f",
            "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "Python 3 (watched)", "language": "python"}))
    return "gpu-watched"


def execute(km, kc, code, timeout):
    """Runs a cell; returns 'ok' or 'error' (its reply), 'death', or 'timeout'."""
    msg_id = kc.execute(code, stop_on_error=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = kc.get_shell_msg(timeout=0.2)
        except queue.Empty:
            if not km.is_alive():
                return "death"
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]["status"]
    return "timeout"


def start_holder(source, log):
    holder = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE,
                              stderr=log, text=True)
    line = holder.stdout.readline()
    if "holding" not in line:
        holder.kill()
        raise RuntimeError("the GPU holder did not start (see its log)")
    return holder


def summary(report, diagnosed):
    d = diagnosed.get("diagnosis", diagnosed)
    cells = (report.get("execution") or {}).get("last_cells") or []
    gpu = [(c.get("execution_count"), c.get("gpu_delta"),
            c.get("gpu_peak")) for c in cells]
    return {"cause": d.get("cause"), "headline": d.get("headline"),
            "evidence": [e.get("fact") for e in d.get("evidence") or []][:8],
            "signatures": [(s.get("id"), s.get("cell"), s.get("survived"))
                           for s in d.get("signatures") or []],
            "remedies": [r.get("id") for r in d.get("remedies") or []],
            "termination": (report.get("termination") or {}).get("description"),
            "cell_in_flight": ((report.get("execution") or {}).get("cell_in_flight") or {})
            .get("execution_count"), "cells_gpu": gpu,
            "crash_stack": [(os.path.basename(f.get("module") or "?"), f.get("function"))
                            for f in (report.get("crash_stack") or {}).get("frames") or []][:8],
            "crash_stack_missing": (report.get("crash_stack") or {}).get("missing")}


def run_scenario(name, scenario, kw, out, timeout):
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"kwd-gpu-{name}-"))
    reports = work / "reports"
    runtime = work / "xdg"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, JUPYTER_PATH=str(work / "share" / "jupyter"),
               JUPYTER_RUNTIME_DIR=str(work / "runtime"), XDG_RUNTIME_DIR=str(runtime),
               KERNEL_WATCHDOG_REPORT_DIR=str(reports), PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.update(scenario.get("env", {}))
    os.environ.update(JUPYTER_PATH=env["JUPYTER_PATH"],
                      JUPYTER_RUNTIME_DIR=env["JUPYTER_RUNTIME_DIR"])
    name_of_spec = kernelspec(work, kw)
    dest = out / name
    dest.mkdir(parents=True)
    holder = None
    holder_log = open(dest / "holder.stderr", "w")
    result = {"scenario": name, "expect": scenario["expect"], "cells": []}
    t0 = time.monotonic()
    try:
        if "holder" in scenario:
            holder = start_holder(scenario["holder"], holder_log)
            result["holder_pid"] = holder.pid
        with open(dest / "kernel.stderr", "wb") as server_log:
            km = KernelManager(kernel_name=name_of_spec)
            km.start_kernel(env=env, stderr=server_log)
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=120)
            if scenario.get("queued"):
                # Cell 1 alone (imports, CUDA context), then the rest sent at once.
                want, code = scenario["cells"][0]
                result["cells"].append({"want": want, "got": execute(km, kc, code, timeout)})
                for want, code in scenario["cells"][1:]:
                    kc.execute(code, stop_on_error=False)
                    result["cells"].append({"want": want, "got": "queued"})
                deadline = time.monotonic() + timeout
                while km.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
            for want, code in [] if scenario.get("queued") else scenario["cells"]:
                got = execute(km, kc, code, timeout)
                result["cells"].append({"want": want, "got": got})
                if got in ("death", "timeout") or not km.is_alive():
                    break
            deadline = time.monotonic() + 30
            while km.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            result["kernel_alive_at_end"] = km.is_alive()
            kc.stop_channels()
            if km.has_kernel:
                km.shutdown_kernel(now=True)
            km.cleanup_resources()
        deadline = time.monotonic() + 10
        found = []
        while time.monotonic() < deadline:
            found = sorted(reports.glob("*.json")) if reports.is_dir() else []
            if found:
                break
            time.sleep(0.1)
        result["reports"] = [p.name for p in found]
        if found:
            shutil.copy(found[-1], dest / "report.json")
            report = json.loads(found[-1].read_text())
            diag = subprocess.run([kw, "reports", "diagnose", str(found[-1]), "--json"],
                                  capture_output=True, text=True, env=env)
            (dest / "diagnose.json").write_text(diag.stdout + diag.stderr)
            show = subprocess.run([kw, "reports", "show", str(found[-1])],
                                  capture_output=True, text=True, env=env)
            (dest / "show.txt").write_text(show.stdout + show.stderr)
            try:
                result["summary"] = summary(report, json.loads(diag.stdout))
            except ValueError:
                result["summary"] = {"diagnose_failed": diag.stderr[-500:]}
    except Exception as e:  # a scenario's failure is recorded, the others still run
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        if holder:
            holder.kill()
            holder.wait()
        holder_log.close()
        result["seconds"] = round(time.monotonic() - t0, 1)
        shutil.rmtree(work, ignore_errors=True)
    (dest / "result.json").write_text(json.dumps(result, indent=1))
    s = result.get("summary") or {}
    named = scenario.get("headline_names", "")
    verdict = ("as expected" if s.get("cause") == scenario["expect"] and
               named in (s.get("headline") or "") else "DIFFERS")
    print(f"{name}: {verdict}: cause {s.get('cause')} (expected {scenario['expect']}"
          f"{', naming ' + named if named else ''}); "
          f"{s.get('headline')!r}; {result.get('error', '')}", flush=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--only", action="append", help="a scenario's name (repeatable)")
    ap.add_argument("--cell-timeout", type=float, default=90)
    args = ap.parse_args()
    kw = os.environ.get("KW")
    if not kw:
        sys.exit("KW must name the kernel-watchdog executable (enter.sh sets it)")
    names = args.only or [n for n in SCENARIOS if n != "cpu_selftest"]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.exit(f"no scenario {unknown}; there are {list(SCENARIOS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_scenario(n, SCENARIOS[n], kw, args.out, args.cell_timeout) for n in names]
    (args.out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
