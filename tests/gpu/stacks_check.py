"""A kernel stuck waiting for the GPU, asked where it is, on the device machine (issue 38).

A real ipykernel under `$KW run` queues a GPU kernel that spins for two minutes (CuPy, on
the device's clock) and calls torch.cuda.synchronize(): the cell shows [*] and SIGINT cannot
end it. Then:
  - `$KW stacks CONNECTION_FILE` (text and --json) must say it waits for the GPU, and name the
    CUDA call it is in;
  - the kernel's TracerPid is 0 before and after (nothing stays attached);
  - `$KW smoke --timeout 15` on a notebook with the same cells must fail the cell with where it
    was stuck, after the interrupt did not end it.
Everything seen goes to --out (stacks.txt, stacks.json, smoke.json, result.json); a line per
check says what was found beside what was expected.

On the device: bash .gpu/enter.sh python3 tests/gpu/stacks_check.py --out $OUT/gpu/stacks
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from jupyter_client import KernelManager

SETUP = """\
import torch, cupy
spin = cupy.RawKernel(r'''
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}''', 'spin')
torch.ones(1, device='cuda')
"""
STUCK = """\
spin((1,), (1,), (cupy.uint64(120 * 10**9),))
torch.cuda.synchronize()
"""

# --cpu-selftest: the harness itself, anywhere (a cell stuck in time.sleep; the GPU checks
# then differ, as they must).
CPU_SETUP, CPU_STUCK = "import time", "time.sleep(120)"


def tracer_pid(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return None


def kernel_pid_of(launcher_pid):
    """The kernel is the launcher's child (run starts it and stays as its parent)."""
    for _ in range(100):
        kids = pathlib.Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children")
        pids = kids.read_text().split() if kids.exists() else []
        if pids:
            return int(pids[0])
        time.sleep(0.1)
    return None


def check(results, name, ok, detail):
    results.append({"check": name, "ok": bool(ok), "detail": detail})
    print(f"{name}: {'as expected' if ok else 'DIFFERS'}: {detail}", flush=True)


def stuck_under_run(kw, work, out, results):
    spec = work / "share" / "jupyter" / "kernels" / "gpu-watched"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [kw, "run", "--", sys.executable, "-m", "ipykernel_launcher", "-f",
                 "{connection_file}"],
        "display_name": "Python 3 (watched)", "language": "python"}))
    env = dict(os.environ, JUPYTER_PATH=str(work / "share" / "jupyter"),
               JUPYTER_RUNTIME_DIR=str(work / "runtime"),
               KERNEL_WATCHDOG_REPORT_DIR=str(work / "reports"))
    os.environ.update(JUPYTER_PATH=env["JUPYTER_PATH"],
                      JUPYTER_RUNTIME_DIR=env["JUPYTER_RUNTIME_DIR"])
    with open(out / "kernel.stderr", "wb") as log:
        km = KernelManager(kernel_name="gpu-watched")
        km.start_kernel(env=env, stderr=log)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=120)
            reply = kc.execute_interactive(SETUP, timeout=120)
            check(results, "setup cell", reply["content"]["status"] == "ok",
                  reply["content"].get("evalue", "ok"))
            kernel = kernel_pid_of(km.provisioner.process.pid)
            before = tracer_pid(kernel)
            kc.execute(STUCK)
            time.sleep(8)
            t0 = time.monotonic()
            text = subprocess.run([kw, "stacks", km.connection_file], capture_output=True,
                                  text=True, env=env, timeout=60)
            took = time.monotonic() - t0
            (out / "stacks.txt").write_text(text.stdout + text.stderr)
            as_json = subprocess.run([kw, "stacks", km.connection_file, "--json"],
                                     capture_output=True, text=True, env=env, timeout=60)
            (out / "stacks.json").write_text(as_json.stdout + as_json.stderr)
            after = tracer_pid(kernel)
            waits = [line for line in text.stdout.splitlines() if "What it waits on" in line]
            check(results, "stacks names the GPU wait",
                  any("waiting for the GPU" in w for w in waits),
                  f"{waits or text.stdout[-400:] + text.stderr[-400:]} ({took:.2f} s)")
            names = []
            try:
                for t in json.loads(as_json.stdout).get("threads", []):
                    names += [f.get("function") or "" for f in t.get("native") or []]
            except ValueError:
                pass
            cuda_calls = sorted({n for n in names if "ynchronize" in n})
            check(results, "the CUDA call is named", cuda_calls, cuda_calls)
            check(results, "TracerPid 0 before and after", before == 0 and after == 0,
                  f"kernel {kernel}: before {before}, after {after}")
            check(results, "kernel still stuck and alive after stacks", km.is_alive(),
                  "alive" if km.is_alive() else "dead")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            km.cleanup_resources()


def stuck_under_smoke(kw, work, out, results):
    spec = work / "share" / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    cells = [{"cell_type": "code", "source": source, "metadata": {}, "outputs": [],
              "execution_count": None, "id": f"c{i}"} for i, source in enumerate([SETUP, STUCK])]
    notebook = work / "gpu_sync.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": cells,
                                    "metadata": {"kernelspec": {"name": "python3"}}}))
    env = dict(os.environ, JUPYTER_PATH=str(work / "share" / "jupyter"))
    t0 = time.monotonic()
    run = subprocess.run([kw, "smoke", "--kernel", "python3", "--timeout", "15",
                          "--interrupt-grace", "3", "--output-dir", str(work / "smoke-out"),
                          "--json", str(notebook)],
                         capture_output=True, text=True, env=env, timeout=240)
    (out / "smoke.json").write_text(run.stdout)
    (out / "smoke.stderr").write_text(run.stderr)
    if (work / "smoke-out").is_dir():
        shutil.copytree(work / "smoke-out", out / "smoke-out")
    said = run.stdout + run.stderr
    check(results, "smoke's timeout names the GPU wait",
          run.returncode != 0 and "waiting for the GPU" in said,
          f"exit {run.returncode} in {time.monotonic() - t0:.0f} s; " +
          next((line.strip() for line in said.splitlines() if "waiting for" in line or "still running" in line),
               said[-600:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--cpu-selftest", action="store_true",
                    help="the harness on a cell stuck in time.sleep (no GPU needed)")
    args = ap.parse_args()
    if args.cpu_selftest:
        global SETUP, STUCK
        SETUP, STUCK = CPU_SETUP, CPU_STUCK
    kw = os.environ.get("KW")
    if not kw:
        sys.exit("KW must name the kernel-watchdog executable (enter.sh sets it)")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for part in (stuck_under_run, stuck_under_smoke):
        work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-gpu-stacks-"))
        try:
            part(kw, work, args.out, results)
        except Exception as e:  # one part's failure is recorded; the other still runs
            check(results, part.__name__, False, f"{type(e).__name__}: {e}")
    (args.out / "result.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
