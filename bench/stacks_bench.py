"""`kernel-watchdog stacks` against `py-spy dump --native` on the same process with 100 threads
(issue 38: not slower, and the threads frozen at most 10 ms), side by side in one run.

The process is a Python interpreter under `kernel-watchdog run` with 100 threads, each blocked in a lock wait a few Python
frames deep, and a main thread asleep: what a stuck kernel with a thread pool looks like. Each
tool is run `--repeat` times, alternating; the wall time of each run is measured here, and
`kernel-watchdog stacks --json` also says how long it kept the threads stopped (`frozen_us`).
py-spy is PyPI's, in the framework virtualenv that scripts/setup.sh makes.

Usage: /usr/bin/python3 bench/stacks_bench.py --watchdog build/kernel-watchdog [--repeat 10]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import time

from launcher_bench import pct

ROOT = pathlib.Path(__file__).resolve().parent.parent
PY_SPY = ROOT / ".cache" / "venv-frameworks" / "bin" / "py-spy"

TARGET = """
import os, threading, time
gate = threading.Lock()
gate.acquire()
def level3(): gate.acquire()
def level2(): level3()
def level1(): level2()
for i in range(100):
    threading.Thread(target=level1, daemon=True, name=f"pool-{i}").start()
print("ready", os.getpid(), flush=True)
time.sleep(3600)
"""


def py_spy():
    if not PY_SPY.exists():
        sys.exit(f"{PY_SPY} is missing: scripts/setup.sh installs it")
    return str(PY_SPY)


def timed(argv):
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {proc.stderr[-500:]}")
    return elapsed, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchdog", required=True)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    spy = py_spy()
    # Under `run`, as a kernel is: its shim answers the Python half of the dump.
    target = subprocess.Popen([args.watchdog, "run", "--", sys.executable, "-c", TARGET],
                              stdout=subprocess.PIPE, text=True)
    try:
        word, pid = target.stdout.readline().split()
        assert word == "ready"
        time.sleep(0.5)
        ours, theirs, frozen, threads_seen = [], [], [], 0
        for _ in range(args.repeat):
            ms, out = timed([args.watchdog, "stacks", pid, "--json"])
            doc = json.loads(out)
            ours.append(ms)
            frozen.append(doc["frozen_us"] / 1000)
            threads_seen = sum(1 for t in doc["threads"] if t["native"] and t["python"])
            ms, out = timed([spy, "dump", "--native", "--pid", pid])
            theirs.append(ms)
        print(f"stacks of a process with 101 threads, {args.repeat} runs each (ms)")
        print(f"  {'':<34} {'p50':>8} {'p95':>8}")
        print(f"  {'kernel-watchdog stacks --json':<34} {pct(ours, 50):8.1f} {pct(ours, 95):8.1f}")
        print(f"  {'py-spy dump --native':<34} {pct(theirs, 50):8.1f} {pct(theirs, 95):8.1f}")
        print(f"  ratio (p50): {pct(ours, 50) / pct(theirs, 50):.2f}x")
        print(f"  threads frozen by kernel-watchdog: p50 {pct(frozen, 50):.1f} ms, "
              f"p95 {pct(frozen, 95):.1f} ms (target: at most 10 ms)")
        print(f"  threads with native and Python frames joined: {threads_seen} of 101")
    finally:
        target.kill()
        target.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
