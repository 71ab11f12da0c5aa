"""smoke -j auto packing notebooks onto the one real GPU, against blind -j (issue 39).

Four notebooks each hold GB_EACH GiB of device memory for a few seconds (PyTorch), more
together than the device has. Three runs of `$KW smoke`, one after the other:
  blind:  -j 4, no memory awareness: all four start at once, and the device is expected to
          run out (a CUDA out-of-memory error fails at least one cell);
  cold:   -j auto with an empty history (--store-durations): never seen notebooks one at a
          time until their memory is known; must pass;
  warm:   -j auto with that history: packed by their GPU peaks, several at once and never
          more than fit; must pass, with no requeue.
Each run's --json, its stderr (the plan and the table) and wall time go to --out; a line per
run says what was found beside what was expected.

On the device: bash .gpu/enter.sh python3 tests/gpu/packing_check.py --out $OUT/gpu/packing
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

GB_EACH = 40
NOTEBOOKS = 4


def notebook(path, hold_s):
    sources = [
        "import torch, time",
        f"x = torch.empty({GB_EACH} * 2**30, dtype=torch.uint8, device='cuda')\n"
        "x.fill_(1)\ntorch.cuda.synchronize()",
        f"time.sleep({hold_s})\nfloat(x[:1024].sum())",
    ]
    cells = [{"cell_type": "code", "source": s, "metadata": {}, "outputs": [],
              "execution_count": None, "id": f"c{i}"} for i, s in enumerate(sources)]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": cells,
                                "metadata": {"kernelspec": {"name": "python3"}}}))


def smoke(kw, env, work, name, notebooks, extra):
    out_dir = work / f"out-{name}"
    t0 = time.monotonic()
    run = subprocess.run([kw, "smoke", "--kernel", "python3", "--output-dir", str(out_dir),
                          "--json", *extra, *map(str, notebooks)],
                         capture_output=True, text=True, env=env, timeout=300)
    return run, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--hold", type=float, default=6, help="seconds each notebook holds")
    args = ap.parse_args()
    kw = os.environ.get("KW")
    if not kw:
        sys.exit("KW must name the kernel-watchdog executable (enter.sh sets it)")
    args.out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-gpu-packing-"))
    spec = work / "share" / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    env = dict(os.environ, JUPYTER_PATH=str(work / "share" / "jupyter"))
    notebooks = [work / f"heavy{i}.ipynb" for i in range(NOTEBOOKS)]
    for nb in notebooks:
        notebook(nb, args.hold)
    history = work / "history.json"
    runs = [("blind", ["-j", str(NOTEBOOKS)]),
            ("cold", ["-j", "auto", "--durations", str(history), "--store-durations"]),
            ("warm", ["-j", "auto", "--durations", str(history)])]
    results = []
    for name, extra in runs:
        run, took = smoke(kw, env, work, name, notebooks, extra)
        (args.out / f"{name}.json").write_text(run.stdout)
        (args.out / f"{name}.stderr").write_text(run.stderr)
        try:
            summary = json.loads(run.stdout)
        except ValueError:
            summary = {}
        nbs = summary.get("notebooks") or []
        said = run.stdout + run.stderr
        cuda_oom = "OutOfMemoryError" in said or "out of memory" in said
        requeues = sum(len((n.get("scheduling") or {}).get("requeues") or []) for n in nbs)
        row = {"run": name, "exit": run.returncode, "seconds": round(took, 1),
               "outcomes": [n.get("outcome") for n in nbs], "cuda_oom_seen": cuda_oom,
               "requeues": requeues,
               "peak_gpu_gib": [round((n.get("peak_gpu_bytes") or 0) / 2**30, 1) for n in nbs],
               "wait_s": [(n.get("scheduling") or {}).get("wait_s") for n in nbs]}
        if name == "blind":
            ok = run.returncode != 0 and cuda_oom
            want = "a CUDA out-of-memory failure"
        else:
            ok = run.returncode == 0 and not cuda_oom and (name == "cold" or requeues == 0)
            want = "all pass, no CUDA OOM" + (", no requeue" if name == "warm" else "")
        row["ok"] = ok
        results.append(row)
        print(f"{name}: {'as expected' if ok else 'DIFFERS'} (expected {want}): {row}",
              flush=True)
    (args.out / "result.json").write_text(json.dumps(results, indent=1))
    if history.exists():
        (args.out / "history.json").write_text(history.read_text())


if __name__ == "__main__":
    main()
