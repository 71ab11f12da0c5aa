"""Memory-probe benchmarks (issue: memory), measured side by side in one run.

1. Sample cost. A real ipykernel with 4 multiprocessing workers (64 MiB each). The
   watchdog's probes (kwd-sample-bench: make_probes, exactly as `run` makes them) sample
   the tree; next to them, a psutil sampler of the same tree, the way jupyter-resource-usage
   does it (Process.memory_info() over [root] + children(recursive=True)). Printed: the
   median cost of each and their ratio, for the watchdog's steady tick, for its average
   tick over 10 s at 10 Hz with every slow reading at its own rate (tree rescans, swap,
   PSS, cgroup limits, meminfo), and a forced full sample (the worst case).
2. Idle cost. `kernel-watchdog run` with a real ipykernel, idle, default rates, for
   --idle-seconds (60): its CPU time as a share of one core, and its RSS; beside it, over the
   same window, a plain kernel: the watched kernel's own CPU and RSS against it (what the
   shim costs the kernel while nothing happens).
3. --flat-seconds N (600 for the issue's 10-minute session; 0 skips it): the watchdog's RSS
   through a busy session (short-lived subprocesses, memory up and down, output), as the
   integration test checks over a shorter window.

Usage: /usr/bin/python3 bench/memory_bench.py --build-dir build-mem [--idle-seconds 60]
                                                 [--flat-seconds 600]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import psutil
from jupyter_client import KernelManager

# The busy session is the one tests/integration/test_memory.py checks over a shorter window.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "integration"))
from workloads import BUSY_SESSION_IMPORTS, busy_session_cell  # noqa: E402

MiB = 1024 * 1024


def run_cell(kc, code, timeout=120):
    msg_id = kc.execute(code)
    result = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "execute_result":
            result = msg["content"]["data"]["text/plain"]
        if msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return result
    raise RuntimeError("cell timed out")


def start(kernel_name):
    km = KernelManager(kernel_name=kernel_name)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def kernel_pid_under(pid):
    for child in psutil.Process(pid).children(recursive=True):
        if "ipykernel_launcher" in child.cmdline():
            return child.pid
    return pid


def psutil_sample(root):
    total = root.memory_info().rss
    for child in root.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def cpu_ns(pid):
    """CPU time of every thread of `pid` so far, in ns (schedstat: finer than clock ticks)."""
    total = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total


def rss(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def bench_sample_cost(sample_bench, iterations):
    km, kc = start("python3")
    try:
        child_pids = run_cell(kc, (
            "import multiprocessing as mp, numpy as np, os, time\n"
            "def hold(q):\n"
            "    a = np.ones(64 * 1024 * 1024 // 8)\n"
            "    q.put(os.getpid())\n"
            "    time.sleep(3600)\n"
            "q = mp.Queue()\n"
            "workers = [mp.Process(target=hold, args=(q,)) for _ in range(4)]\n"
            "for w in workers: w.start()\n"
            "sorted(q.get(timeout=60) for _ in workers)\n"))
        root_pid = km.provisioner.process.pid
        root = psutil.Process(root_pid)
        tree = [root_pid] + [c.pid for c in root.children(recursive=True)]
        time.sleep(1)

        costs = []
        for _ in range(iterations):
            t = time.perf_counter()
            psutil_sample(root)
            costs.append((time.perf_counter() - t) * 1e6)
        psutil_us = statistics.median(costs)

        out = subprocess.run([sample_bench, str(root_pid), str(iterations), "20"], check=True,
                             capture_output=True, text=True).stdout
        kwd = json.loads(out)
        tick = kwd["realtime_cpu_per_tick_us"]
        print(f"sample cost, kernel + 4 workers ({len(tree)} processes; workers {child_pids}):")
        print(f"  psutil sampler, one sample (memory_info over children(recursive=True)), "
              f"median of {iterations}: {psutil_us:8.1f} us")
        print(f"  watchdog, one tick at steady state (RSS of all, cgroup usage), median:      "
              f"{kwd['steady_median_us']:8.1f} us   psutil/watchdog = "
              f"{psutil_us / kwd['steady_median_us']:.0f}x")
        print(f"  watchdog, average tick over {kwd['realtime_seconds']:.0f} s at 10 Hz, slow readings "
              f"at their own rates: {tick:8.1f} us   psutil/watchdog = {psutil_us / tick:.0f}x")
        print(f"  watchdog, forced full sample (rescan of /proc, PSS+swap of all), median:    "
              f"{kwd['full_median_us']:8.1f} us   (psutil reads no PSS; at most once a second)")
        print(f"  steady tick by probe (us): {kwd['steady_by_probe_us']}")
        print(f"  average tick by probe (us): {kwd['realtime_per_tick_by_probe_us']}")
        print(f"  the watchdog covered {kwd['processes']} processes; at 10 Hz it spends "
              f"{kwd['realtime_cpu_per_second_us'] / 1e4:.3f} % of one core on them, psutil would "
              f"spend {psutil_us * 10 / 1e4:.3f} %")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def wrapped_kernelspec(watchdog, prefix):
    subprocess.run([watchdog, "kernelspec", "wrap", "python3", "--prefix", str(prefix),
                    "--name", "python3-bench"], check=True, capture_output=True)
    os.environ["JUPYTER_PATH"] = str(prefix / "share" / "jupyter")
    return "python3-bench"


def bench_idle(watchdog, prefix, seconds):
    """A watched and a plain kernel, idle side by side over the same window: the watchdog's own
    cost, and what being watched costs the kernel itself (its shim: faulthandler, the crash
    handler, the stacks dump's signal, the cell hooks), against the plain kernel."""
    watched_km, watched_kc = start(wrapped_kernelspec(watchdog, prefix))
    plain_km, plain_kc = start("python3")
    try:
        launcher = watched_km.provisioner.process.pid
        kernels = {"watched": kernel_pid_under(launcher),
                   "plain": plain_km.provisioner.process.pid}
        for kc in (watched_kc, plain_kc):
            run_cell(kc, "import numpy as np")
        time.sleep(5)  # start-up settles
        pids = {"watchdog": launcher, **kernels}
        cpu0, t0 = {k: cpu_ns(p) for k, p in pids.items()}, time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = {k: cpu_ns(p) for k, p in pids.items()}, time.monotonic()

        def share(k):
            return (cpu1[k] - cpu0[k]) / ((t1 - t0) * 1e9) * 100
        print(f"idle kernel under the watchdog for {t1 - t0:.0f} s at default rates "
              f"(10 Hz memory, 2 Hz GPU), beside a plain kernel over the same window:")
        print(f"  watchdog CPU: {(cpu1['watchdog'] - cpu0['watchdog']) / 1e6:.1f} ms = "
              f"{share('watchdog'):.4f} % of one core (target < 0.1 %)")
        print(f"  watchdog RSS: {rss(launcher) / MiB:.2f} MiB (target < 8 MiB)")
        print(f"  kernel CPU:   watched {(cpu1['watched'] - cpu0['watched']) / 1e6:.1f} ms, plain "
              f"{(cpu1['plain'] - cpu0['plain']) / 1e6:.1f} ms "
              f"({share('watched'):.4f} % against {share('plain'):.4f} % of one core)")
        watched_rss, plain_rss = rss(kernels["watched"]), rss(kernels["plain"])
        print(f"  kernel RSS:   watched {watched_rss / MiB:.2f} MiB, plain {plain_rss / MiB:.2f} MiB "
              f"({(watched_rss - plain_rss) / MiB:+.2f} MiB: the shim, its crash handler and "
              f"dump registration)")
    finally:
        for km, kc in ((watched_km, watched_kc), (plain_km, plain_kc)):
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def bench_flat(watchdog, prefix, seconds):
    km, kc = start(wrapped_kernelspec(watchdog, prefix))
    try:
        launcher = km.provisioner.process.pid
        run_cell(kc, BUSY_SESSION_IMPORTS)
        time.sleep(3)
        baseline = rss(launcher)
        msg_id = kc.execute(busy_session_cell(seconds))
        readings = []
        start_t = time.monotonic()
        while True:
            readings.append((time.monotonic() - start_t, rss(launcher)))
            try:
                reply = kc.get_shell_msg(timeout=1.0)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            except Exception:
                pass
        peak = max(v for _, v in readings)
        print(f"busy session of {seconds:.0f} s under the watchdog:")
        print(f"  watchdog RSS: baseline {baseline / MiB:.2f} MiB, peak {peak / MiB:.2f} MiB, "
              f"end {readings[-1][1] / MiB:.2f} MiB; growth {(peak - baseline) / MiB:.3f} MiB "
              f"(target <= 1 MiB)")
        for minute in range(1, int(seconds // 60) + 1):
            at = [v for t, v in readings if t <= minute * 60]
            if at:
                print(f"    after {minute:2d} min: {at[-1] / MiB:.2f} MiB")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--flat-seconds", type=float, default=0)
    args = ap.parse_args()
    build = pathlib.Path(args.build_dir).resolve()
    watchdog = str(build / "kernel-watchdog")
    sample_bench = str(build / "bench" / "kwd-sample-bench")
    with tempfile.TemporaryDirectory(prefix="kwd-memory-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        os.environ["KERNEL_WATCHDOG_REPORT_DIR"] = str(tmp / "reports")
        os.environ["JUPYTER_RUNTIME_DIR"] = str(tmp / "runtime")
        bench_sample_cost(sample_bench, args.iterations)
        if args.idle_seconds > 0:
            bench_idle(watchdog, tmp / "prefix", args.idle_seconds)
        if args.flat_seconds > 0:
            bench_flat(watchdog, tmp / "prefix", args.flat_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
