#!/usr/bin/python3
"""`smoke -j auto` against what people run today, side by side in one run, each run in a fresh
memory cgroup of this machine with a real limit (the test's own cgroup's child, cgroup v1):

  smoke -j 1                 serial: never OOMs, slowest
  smoke -j N                 blind parallelism, as nbmake users run it
  pytest --nbmake -n N       pytest-xdist workers (PyPI's nbmake and pytest-xdist, in
                             .cache/venv-frameworks), each running notebooks in its own kernel
  smoke -j auto, cold        no history: its stops and runs again, and its time
  smoke -j auto, warm        with the history the cold run stored
  pytest --nbmake -n N --kernel-watchdog
                             the pytest plugin's budget shared by the xdist workers, with the
                             history the cold run stored (--kernel-watchdog-history) and
                             without (notebooks of unknown memory one at a time); the package
                             is this checkout's Python side, installed with pip --target

The suite: heavy notebooks that each grow to ~45 % of the limit (two never fit together in
-j auto's budget) and light ones of ~70 MiB. Per tool: runs, OOM kills (the cgroup's
oom_kill count), runs that failed, and the median wall time against the lower bound smoke
prints (the heavy notebooks back to back, by the times the cold run recorded). Goal (issue 39): zero OOM kills in 10 of
10 warm runs, and wall time within 1.15x of the lower bound.

  bench/scheduling_bench.py [--watchdog build/kernel-watchdog] [--limit 2G] [--rounds 10]
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent
MiB = 1024 * 1024


def own_memory_cgroup_dir():
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return pathlib.Path("/sys/fs/cgroup/memory" + path)
    sys.exit("scheduling_bench: needs a cgroup v1 memory hierarchy (and root)")


class Cgroup:
    def __init__(self, limit):
        self.dir = own_memory_cgroup_dir() / f"kwd-sched-bench-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir()
        (self.dir / "memory.limit_in_bytes").write_text(str(limit))

    def join(self):
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def oom_kills(self):
        fields = dict(l.split() for l in (self.dir / "memory.oom_control").read_text().splitlines())
        return int(fields.get("oom_kill", 0))

    def remove(self):
        for _ in range(3):
            for pid in (self.dir / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        for _ in range(50):
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def notebook(path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))


def make_suite(folder, limit, heavy, light):
    step_mib = 20
    heavy_mib = int(limit * 0.45 / MiB)
    names = []
    for i in range(heavy):
        name = f"heavy{i}.ipynb"
        notebook(folder / name, "import time\nheld = []\n"
                 f"for _ in range({heavy_mib // step_mib}):\n"
                 f"    held.append(b'x' * ({step_mib} << 20))\n    time.sleep(0.1)\n"
                 "time.sleep(3)")
        names.append(name)
    for i in range(light):
        name = f"light{i}.ipynb"
        notebook(folder / name, "import time\ntime.sleep(1.5)\nx = sum(range(10**6))")
        names.append(name)
    return names


def run_in_cgroup(argv, limit, folder, env=None):
    cgroup = Cgroup(limit)
    try:
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=1800,
                              preexec_fn=cgroup.join, env=env)
        seconds = time.monotonic() - start
        return {"seconds": seconds, "rc": proc.returncode, "oom_kills": cgroup.oom_kills(),
                "stderr": proc.stderr, "stdout": proc.stdout}
    finally:
        cgroup.remove()


def install_package(folder, python):
    """This checkout's Python package without its C++ (as tests/integration does), installed
    with `pip --target` into folder/site; returns that folder."""
    wheels, site = folder / "wheel", folder / "site"
    subprocess.run([str(python), "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--config-settings=wheel.cmake=false", "-w", str(wheels), str(ROOT)],
                   check=True, timeout=300)
    [wheel] = wheels.glob("kernel_watchdog-*.whl")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                    str(wheel)], check=True, timeout=300)
    return site


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watchdog", default=str(ROOT / "build" / "kernel-watchdog"))
    parser.add_argument("--limit", default="2G", help="the cgroup's memory limit (1.5G to 4G)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=3, help="N of the blind runs")
    parser.add_argument("--heavy", type=int, default=3)
    parser.add_argument("--light", type=int, default=6)
    parser.add_argument("--venv", default=str(ROOT / ".cache" / "venv-frameworks"))
    parser.add_argument("--tools", default="",
                        help="only the tools whose names contain one of these comma-separated "
                             "words (e.g. 'auto' for smoke -j auto's warm runs alone); the cold "
                             "run always runs first")
    args = parser.parse_args()
    units = {"G": 1024 * MiB, "M": MiB}
    limit = int(float(args.limit[:-1]) * units[args.limit[-1].upper()])
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kwd-scheduling-bench-"))
    env = dict(os.environ, TMPDIR=str(folder), JUPYTER_RUNTIME_DIR=str(folder / "runtime"))
    names = make_suite(folder, limit, args.heavy, args.light)
    history = folder / "history.json"
    smoke = [args.watchdog, "smoke", "--output-dir", str(folder / "out")]
    python = pathlib.Path(args.venv) / "bin" / "python"
    tools = {
        "smoke -j 1": smoke + ["-j", "1", *names],
        f"smoke -j {args.jobs}": smoke + ["-j", str(args.jobs), *names],
        "smoke -j auto (warm)": smoke + ["-j", "auto", "--durations", str(history), *names],
    }
    envs = {}
    if python.exists():
        pytest_n = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbmake", "-n",
                    str(args.jobs)]
        tools[f"pytest --nbmake -n {args.jobs}"] = [*pytest_n, *names]
        plugin_env = dict(env, PYTHONPATH=str(install_package(folder, python)),
                          KERNEL_WATCHDOG_BINARY=args.watchdog,
                          KERNEL_WATCHDOG_REPORT_DIR=str(folder / "pytest-reports"))
        for name, history_args in ((" (warm)", ["--kernel-watchdog-history", str(history)]),
                                   (" (no history)", [])):
            tool = f"pytest -n {args.jobs} --kernel-watchdog{name}"
            tools[tool] = [*pytest_n, "--kernel-watchdog", *history_args, *names]
            envs[tool] = plugin_env
    else:
        print(f"scheduling_bench: no {python}: pytest --nbmake left out", file=sys.stderr)

    if args.tools:
        words = [w.strip() for w in args.tools.split(",") if w.strip()]
        tools = {name: argv for name, argv in tools.items() if any(w in name for w in words)}
        if not tools:
            sys.exit(f"scheduling_bench: no tool's name contains any of {words}")
    print(f"suite: {args.heavy} heavy notebooks of ~{int(limit * 0.45 / MiB)} MiB, {args.light} "
          f"light; cgroup limit {args.limit}; {args.rounds} rounds, the tools in turn")
    cold = run_in_cgroup(smoke + ["-j", "auto", "--durations", str(history), "--store-durations",
                                  *names], limit, folder, env)
    stops = len(re.findall(r"runs again alone", cold["stderr"]))
    print(f"smoke -j auto (cold): {cold['seconds']:.1f} s, exit {cold['rc']}, "
          f"{cold['oom_kills']} OOM kills, {stops} stopped or OOM-killed and run again")
    results = {name: [] for name in tools}
    lower_bound = None
    for round_ in range(args.rounds):
        for name, argv in tools.items():
            r = run_in_cgroup(argv, limit, folder, envs.get(name, env))
            results[name].append(r)
            found = re.search(r"lower bound of (\d+) s", r["stderr"])
            if found:
                lower_bound = float(found.group(1))
            print(f"  round {round_ + 1} {name}: {r['seconds']:.1f} s, exit {r['rc']}, "
                  f"{r['oom_kills']} OOM kills", file=sys.stderr, flush=True)
    print(f"\n{'tool':<44} {'runs':>4} {'OOM kills':>10} {'failed':>7} {'median s':>9} "
          f"{'x bound':>8} {'x -j 1':>7}")
    serial = statistics.median(r["seconds"] for r in results["smoke -j 1"]) \
        if "smoke -j 1" in results else None
    for name, runs in results.items():
        median = statistics.median(r["seconds"] for r in runs)
        failed = sum(1 for r in runs if r["rc"] != 0)
        ooms = sum(r["oom_kills"] for r in runs)
        bound = f"{median / lower_bound:.2f}" if lower_bound else "-"
        versus_serial = f"{median / serial:.2f}" if serial else "-"
        print(f"{name:<44} {len(runs):>4} {ooms:>10} {failed:>7} {median:>9.1f} {bound:>8} "
              f"{versus_serial:>7}")
    print(f"lower bound (smoke's, from the cold run's times): {lower_bound} s")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
