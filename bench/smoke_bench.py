#!/usr/bin/python3
"""kernel-watchdog smoke next to nbclient (Debian's python3-nbclient), on the same notebooks,
in one run, alternating, each in a fresh kernel:

  one trivial cell      -> start-up to the first cell's end (kernel start included)
  200 trivial cells     -> per-cell overhead: (t200 - t1) / 199
  large outputs         -> output handling: t(20 MB of stream text + a 5 MB image) - t1

nbclient's time is taken inside its process around NotebookClient.execute() and the write of
the executed notebook (which smoke always writes); its Python imports are not counted, which
favours nbclient. The watchdog's is the whole process. The "outside the kernel" rows take
each cell's busy-to-idle time by the kernel's own clock (from the executed notebook's
metadata.execution, which both write) out of the wall time: what is left is the client's
own cost, which the kernel's work (the same for both) otherwise dilutes. The "client CPU"
rows take the CPU time of each client process's own threads (not its kernel's), read before
it is reaped, less the one-cell notebook's: least disturbed by whatever else the machine runs.
Targets (issue 11): start-up no slower, per-cell overhead at most half, large outputs at
least 5x faster. Prints medians and the ratios.

  bench/smoke_bench.py [--watchdog build/kernel-watchdog] [--repeat 5]
"""
import argparse
import datetime
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat

NBCLIENT_RUN = r"""
import sys, time, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
client = NotebookClient(nb, kernel_name="python3", timeout=600,
                        resources={"metadata": {"path": sys.argv[2]}})
start = time.perf_counter()
client.execute()
nbformat.write(nb, sys.argv[2] + "/executed.ipynb")  # as smoke writes the executed notebook
print(time.perf_counter() - start)
"""

LARGE_TEXT = (
    "import sys\n"
    "line = 'x' * 99 + '\\n'\n"
    "for _ in range(200):\n"
    "    sys.stdout.write(line * 1000)\n"  # 200 x 100 kB = 20 MB
    "sys.stdout.flush()")
LARGE_IMAGE = (
    "from IPython.display import Image, display\n"
    "import os\n"
    "display(Image(data=b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(5 * 1024 * 1024), format='png'))")


def notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))
    return path


def kernel_seconds(executed):
    """The time the kernel itself spent on the cells, by its own clock: each cell's busy to
    idle, from the executed notebook's metadata.execution (both tools record the kernel's
    message dates there, as nbclient does). What is left of the wall time is the client's."""
    total = 0.0
    for cell in nbformat.read(str(executed), as_version=4).cells:
        timing = cell.get("metadata", {}).get("execution", {})
        if "iopub.status.busy" in timing and "iopub.status.idle" in timing:
            busy, idle = (datetime.datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                          for k in ("iopub.status.busy", "iopub.status.idle"))
            total += (idle - busy).total_seconds()
    return total


def run_measured(cmd, work):
    """Runs cmd; returns (wall seconds, the CPU seconds of its own threads, stdout, stderr,
    returncode). The CPU time is read from /proc/PID/stat while the process is a zombie, before
    it is reaped: its own user and system time, all threads, without the kernel it started and
    reaped itself (that goes to its children's fields). Wall time is at the mercy of whatever
    else runs on the machine; CPU time much less so."""
    out_path, err_path = work / "stdout.txt", work / "stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        elapsed = time.perf_counter() - start
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        proc.wait()
    return elapsed, own_cpu, out_path.read_text(), err_path.read_text(), proc.returncode


def time_watchdog(watchdog, nb, work):
    out = work / "out"
    elapsed, cpu, stdout, stderr, rc = run_measured(
        [watchdog, "smoke", "--output-dir", str(out), str(nb)], work)
    if rc != 0:
        sys.exit(f"kernel-watchdog smoke failed on {nb}:\n{stdout}\n{stderr}")
    in_kernel = kernel_seconds(out / nb.name)
    shutil.rmtree(out, ignore_errors=True)
    return elapsed, in_kernel, cpu


def time_nbclient(nb, work):
    _, cpu, stdout, stderr, rc = run_measured(
        ["/usr/bin/python3", "-c", NBCLIENT_RUN, str(nb), str(work)], work)
    if rc != 0:
        sys.exit(f"nbclient failed on {nb}:\n{stderr}")
    return (float(stdout.strip().splitlines()[-1]), kernel_seconds(work / "executed.ipynb"),
            cpu)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--watchdog", default=str(pathlib.Path(__file__).resolve().parents[1] /
                                              "build" / "kernel-watchdog"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-smoke-bench-"))
    os.environ.update(TMPDIR=str(work), JUPYTER_RUNTIME_DIR=str(work / "runtime"),
                      PYDEVD_DISABLE_FILE_VALIDATION="1")
    books = {
        "one": notebook(work / "one.ipynb", ["x = 1"]),
        "many": notebook(work / "many.ipynb", [f"x = {i}" for i in range(200)]),
        "large": notebook(work / "large.ipynb", ["x = 1", LARGE_TEXT, LARGE_IMAGE]),
    }
    times = {(tool, name): [] for tool in ("watchdog", "nbclient") for name in books}
    outside = {(tool, name): [] for tool in ("watchdog", "nbclient") for name in books}
    cpu = {(tool, name): [] for tool in ("watchdog", "nbclient") for name in books}
    for _ in range(args.repeat):
        for name, nb in books.items():
            for tool, timed in (("watchdog", time_watchdog(args.watchdog, nb, work)),
                                ("nbclient", time_nbclient(nb, work))):
                times[(tool, name)].append(timed[0])
                outside[(tool, name)].append(timed[0] - timed[1])
                cpu[(tool, name)].append(timed[2])
    med = {k: statistics.median(v) for k, v in times.items()}
    med_out = {k: statistics.median(v) for k, v in outside.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}

    def derived(tool):
        return {"startup_s": med[(tool, "one")],
                "per_cell_ms": (med[(tool, "many")] - med[(tool, "one")]) / 199 * 1000,
                "large_output_s": med[(tool, "large")] - med[(tool, "one")],
                # The same, less the kernel's own busy-to-idle time: the client's share.
                "per_cell_client_ms":
                    (med_out[(tool, "many")] - med_out[(tool, "one")]) / 199 * 1000,
                "large_output_client_s": med_out[(tool, "large")] - med_out[(tool, "one")],
                # The client process's own CPU (its threads, not the kernel's), less the
                # one-cell notebook's: the work each cell and each large output costs it.
                "per_cell_client_cpu_ms":
                    (med_cpu[(tool, "many")] - med_cpu[(tool, "one")]) / 199 * 1000,
                "large_output_client_cpu_s": med_cpu[(tool, "large")] - med_cpu[(tool, "one")]}

    ours, theirs = derived("watchdog"), derived("nbclient")
    print(f"{'':28}{'kernel-watchdog':>16}{'nbclient':>12}{'ratio':>10}  target")
    rows = [("start-up to first cell (s)", "startup_s", "<= 1.0"),
            ("per-cell overhead (ms)", "per_cell_ms", "<= 0.5"),
            ("  outside the kernel (ms)", "per_cell_client_ms", "<= 0.5"),
            ("large outputs (s)", "large_output_s", "<= 0.2"),
            ("  outside the kernel (s)", "large_output_client_s", "<= 0.2"),
            ("per-cell, client CPU (ms)", "per_cell_client_cpu_ms", "<= 0.5"),
            ("large outputs, client CPU (s)", "large_output_client_cpu_s", "<= 0.2")]
    for label, key, target in rows:
        ratio = ours[key] / theirs[key] if theirs[key] > 0 else float("nan")
        print(f"{label:28}{ours[key]:16.3f}{theirs[key]:12.3f}{ratio:10.2f}  {target}")
    print(json.dumps({"repeat": args.repeat, "watchdog": ours, "nbclient": theirs,
                      "raw_medians_s": {f"{t}/{n}": v for (t, n), v in med.items()},
                      "raw_cpu_medians_s": {f"{t}/{n}": v for (t, n), v in med_cpu.items()}}))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
