"""Death -> report on disk, per cause of death, for the three front ends (issue 29), side by
side with jupyter_client's KernelRestarter noticing the same death.

Causes: a SIGKILL from outside, a cgroup OOM kill (the kernel allocates past a 300 MiB
limit), a SIGSEGV and a SIGABRT from outside, an exit code (os._exit(3) in a cell). Front ends:
- run:    a real ipykernel started by KernelManager from a kernelspec wrapped with
          `run --memory-limit=300M` (sandbox.py);
- daemon: `kernel-watchdog daemon` watching the runtime dir, the kernel started unwrapped by
          KernelManager into a memory cgroup this bench made (300 MiB);
- smoke:  `kernel-watchdog smoke --memory-limit 300M` of a one-cell notebook (a new smoke run
          per death).
For each death: from the kernel's end (its pidfd turns readable: the moment its parent or a
pidfd watcher is told) to a new report in the store (inotify), and the watchdog's own share
(the report's died_at_ms, its wall clock at the reap, to the report visible here). The
restarter (run and daemon; smoke has none): a fresh KernelRestarter with its default
time_to_dead, polled on its own schedule at a random phase, as its periodic callback would,
from the kernel's end to its "restart" callback, which is when a front end says "the kernel
appears to have died". Also counted: reports whose diagnosis is the expected cause, and OOM
reports whose evidence has the victim's line (the kernel log naming the kernel's pid).

Usage: /usr/bin/python3 bench/death_bench.py --watchdog build/kernel-watchdog
           [--deaths 10] [--modes run,daemon,smoke] [--causes sigkill,oom,sigsegv,sigabrt,exit]
"""
import argparse
import json
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import sandbox
from daemon_bench import wait_watched
from jupyter_client import KernelManager
from jupyter_client.restarter import KernelRestarter
from launcher_bench import StoreWatch, kernel_pid_under, pct, wait_for_death_and_report

LIMIT = 300 * 1024 * 1024
CAUSES = {  # name -> (how, the code a cell runs or the signal sent, the expected cause)
    "sigkill": ("signal", signal.SIGKILL, "killed"),
    "oom": ("cell", "held = 'x' * (1 << 30)", "oom_killed_cgroup"),
    "sigsegv": ("signal", signal.SIGSEGV, "native_crash"),
    "sigabrt": ("signal", signal.SIGABRT, "abort"),
    "exit": ("cell", "import os; os._exit(3)", "exited_with_error"),
}


class Deaths:
    """The figures of one front end and cause."""

    def __init__(self):
        self.after_end, self.watchdog, self.restarter, self.causes = [], [], [], {}
        self.victim_line = 0

    def add(self, ended, seen, seen_wall_ms, new_reports, kernel_pid):
        self.after_end.append((seen - ended) * 1000)
        with open(max(new_reports, key=os.path.getmtime)) as f:
            doc = json.load(f)
        self.watchdog.append(seen_wall_ms - doc["kernel"]["died_at_ms"])
        cause = doc["diagnosis"]["cause"]
        self.causes[cause] = self.causes.get(cause, 0) + 1
        evidence = doc.get("oom_evidence") or {}
        if kernel_pid in evidence.get("matched_pids", []) and any(
                f"Killed process {kernel_pid} " in line for line in evidence.get("kernel_log", [])):
            self.victim_line += 1


def kill_and_time(pid, kill, store, restarter=None):
    """Kills the kernel (`kill()`), returns (kernel ended, report seen, report seen by the wall
    clock in ms, new reports, restarter noticed or None), perf_counter times but the third."""
    before = store.reports()
    pidfd = os.pidfd_open(pid)
    noticed = {}
    if restarter is not None:
        restarter.add_callback(lambda: noticed.setdefault("t", time.perf_counter()), "restart")
        poll_start = time.perf_counter()
        time.sleep(random.uniform(0, restarter.time_to_dead))
    try:
        kill()
        ended, new = wait_for_death_and_report(pidfd, store, before)
        seen, seen_wall_ms = time.perf_counter(), time.time() * 1000
        ended = seen if ended is None else ended  # its pidfd unseen: counted as 0 ms
    finally:
        os.close(pidfd)
    if restarter is not None:
        next_poll = poll_start + restarter.time_to_dead
        while next_poll < ended:
            next_poll += restarter.time_to_dead
        while "t" not in noticed:
            time.sleep(max(0.0, next_poll - time.perf_counter()))
            restarter.poll()  # restarts the kernel once it has noticed
            next_poll += restarter.time_to_dead
    return ended, seen, seen_wall_ms, new, noticed.get("t")


def killer(cause, pid, kc):
    how, what, _ = CAUSES[cause]
    if how == "signal":
        return lambda: os.kill(pid, what)
    return lambda: kc.execute(what)


def managed_deaths(km, pid_of, store, causes, deaths, before_kill=lambda pid: None):
    """run and daemon: one KernelManager whose kernel its restarter restarts after each death."""
    results = {c: Deaths() for c in causes}
    order = [c for _ in range(deaths) for c in causes]
    for i, cause in enumerate(order):
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        pid = pid_of(km)
        before_kill(pid)
        restarter = KernelRestarter(kernel_manager=km)
        ended, *seen, noticed = kill_and_time(pid, killer(cause, pid, kc), store, restarter)
        kc.stop_channels()
        results[cause].add(ended, *seen, pid)
        results[cause].restarter.append((noticed - ended) * 1000)
        print(f"  {i + 1:3d}/{len(order)} {cause:8s} report {results[cause].after_end[-1]:7.2f} ms "
              f"after the kernel's end, restarter {results[cause].restarter[-1]:7.1f} ms",
              flush=True)
    return results


def bench_run(watchdog, causes, deaths):
    _, reports = sandbox.wrapped_python3(watchdog, "kwd-death-bench-",
                                         run_options=(f"--memory-limit={LIMIT}",))
    reports.mkdir(mode=0o700)
    store = StoreWatch(reports)
    km = KernelManager(kernel_name="python3-watched")
    km.start_kernel()
    try:
        return managed_deaths(km, lambda km: kernel_pid_under(km.provisioner.process.pid), store,
                              causes, deaths)
    finally:
        km.shutdown_kernel(now=True)
        os.close(store.fd)


def memory_cgroup(name):
    """A memory cgroup of its own with LIMIT and no swap; returns its cgroup.procs path."""
    v1 = pathlib.Path("/sys/fs/cgroup/memory")
    if v1.is_dir():
        cg = v1 / name
        cg.mkdir()
        (cg / "memory.limit_in_bytes").write_text(str(LIMIT))
        (cg / "memory.swappiness").write_text("0")
    else:
        cg = pathlib.Path("/sys/fs/cgroup") / name
        cg.mkdir()
        (cg / "memory.max").write_text(str(LIMIT))
        if (cg / "memory.swap.max").exists():
            (cg / "memory.swap.max").write_text("0")
    return cg


def bench_daemon(watchdog, causes, deaths):
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-death-bench-daemon-"))
    runtime, reports, sock = work / "runtime", work / "reports", work / "d.sock"
    runtime.mkdir()
    reports.mkdir(mode=0o700)
    cg = memory_cgroup(f"kwd-death-bench-{os.getpid()}")
    # The kernel enters the cgroup before it execs, so the daemon finds it there.
    spec = work / "share" / "jupyter" / "kernels" / "python3-limited"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/bin/sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" "$@"',
                 sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "python3 (300 MiB)", "language": "python"}))
    os.environ.update(JUPYTER_RUNTIME_DIR=str(runtime), PYDEVD_DISABLE_FILE_VALIDATION="1",
                      JUPYTER_PATH=str(work / "share" / "jupyter"))
    daemon = subprocess.Popen(
        [watchdog, "daemon", "--runtime-dir", str(runtime), "--report-dir", str(reports),
         "--status-socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=open(work / "log", "w"), start_new_session=True)
    store = StoreWatch(reports)
    km = KernelManager(kernel_name="python3-limited")
    try:
        while not sock.exists():
            assert daemon.poll() is None, (work / "log").read_text()
            time.sleep(0.05)
        km.start_kernel()
        return managed_deaths(
            km, lambda km: km.provisioner.process.pid, store, causes, deaths,
            before_kill=lambda pid: wait_watched(watchdog, sock, [km.connection_file], 30))
    finally:
        km.shutdown_kernel(now=True)
        daemon.terminate()
        daemon.wait()
        os.close(store.fd)
        cg.rmdir()


def bench_smoke(watchdog, causes, deaths):
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-death-bench-smoke-"))
    out, go = work / "out", work / "go"
    (out / "reports").mkdir(parents=True, mode=0o700)
    store = StoreWatch(out / "reports")
    results = {c: Deaths() for c in causes}
    order = [c for _ in range(deaths) for c in causes]
    for i, cause in enumerate(order):
        how, what, _ = CAUSES[cause]
        go.unlink(missing_ok=True)
        # The cell waits for the bench's word, then dies (or sleeps, to be killed from outside).
        code = (f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
                + (what if how == "cell" else "time.sleep(60)"))
        nb = work / f"{cause}.ipynb"
        nb.write_text(json.dumps({
            "cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                       "outputs": [], "source": code}],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}))
        smoke = subprocess.Popen([watchdog, "smoke", "--memory-limit", str(LIMIT),
                                  "--output-dir", str(out), str(nb)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = None
        while pid is None:
            assert smoke.poll() is None, "smoke ended before its kernel started"
            time.sleep(0.02)
            pid = kernel_pid_under(smoke.pid)
        time.sleep(0.5)  # the cell is running: its kernel has answered by now
        kill = (lambda: go.touch()) if how == "cell" else (
            lambda: (go.touch(), os.kill(pid, what)))
        ended, *seen, _ = kill_and_time(pid, kill, store)
        smoke.wait()
        results[cause].add(ended, *seen, pid)
        print(f"  {i + 1:3d}/{len(order)} {cause:8s} report {results[cause].after_end[-1]:7.2f} ms "
              f"after the kernel's end", flush=True)
    os.close(store.fd)
    return results


def line(label, values, unit="ms"):
    if not values:
        return f"{label} {'-':>8s}"
    return f"{label} p50 {statistics.median(values):7.2f} p99 {pct(values, 99):7.2f} {unit}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchdog", required=True)
    ap.add_argument("--deaths", type=int, default=10, help="per cause and front end")
    ap.add_argument("--modes", default="run,daemon,smoke")
    ap.add_argument("--causes", default=",".join(CAUSES))
    args = ap.parse_args()
    watchdog = str(pathlib.Path(args.watchdog).resolve())
    causes = args.causes.split(",")
    benches = {"run": bench_run, "daemon": bench_daemon, "smoke": bench_smoke}
    results = {}
    for mode in args.modes.split(","):
        print(f"{mode}: {args.deaths} deaths per cause", flush=True)
        results[mode] = benches[mode](watchdog, causes, args.deaths)

    print("\n== death -> report on disk (ms from the kernel's end; targets p99: 5 ms for a "
          "death the OOM killer did not cause, 20 ms for one it did) ==")
    for mode, by_cause in results.items():
        for cause, d in by_cause.items():
            expected = CAUSES[cause][2]
            ratio = (f"restarter/report {statistics.median(d.restarter) / statistics.median(d.after_end):6.0f}x"
                     if d.restarter else "")
            oom = f", victim's line in {d.victim_line}/{len(d.after_end)}" if cause == "oom" else ""
            print(f"{mode:6s} {cause:8s} n={len(d.after_end):3d} {line('report', d.after_end)}  "
                  f"{line('watchdog share', d.watchdog)}  {line('restarter', d.restarter)}  "
                  f"{ratio}  [{d.causes.get(expected, 0)}/{len(d.after_end)} {expected}{oom}]")
            others = {c: n for c, n in d.causes.items() if c != expected}
            if others:
                print(f"{'':16s}other diagnoses: {others}")


if __name__ == "__main__":
    main()
