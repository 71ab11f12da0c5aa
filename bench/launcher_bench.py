"""Launcher-mode benchmarks (issue: launcher), printed as ratios measured in one run.

1. Death to report: a real ipykernel under the watchdog is killed (SIGSEGV from outside)
   N times. For each death we time (a) the report appearing in the store and (b) the
   moment jupyter_client's KernelRestarter (the thing that makes the front end say "the
   kernel appears to have died") notices, on the same death. (a) is split in two: the
   kernel dying (faulthandler's dump, its threads ending, its address space torn down) and
   what follows (SIGCHLD, the watchdog's work, inotify to this bench); the watchdog's own
   share (from the death it saw to the report visible, by its clock) is printed too. The bench waits in poll() on a pidfd and an inotify watch of
   the store: a waiter that polled in a loop would take one of this machine's two cores from
   the dying kernel and the watchdog, and measure itself.
2. Start-up: kernel start to kernel_info_reply, through the watchdog and directly,
   alternating which goes first, N times each. One kernel_info_request, timed to its reply:
   jupyter_client's wait_for_ready() also waits for IOPub traffic and then for 0.2 s of
   quiet on it. The client's sockets retry their connection every 5 ms, not libzmq's default
   100 ms: a connect refused before the kernel has bound would otherwise add 0 to ~190 ms to
   a start (both ways alike), noise over an effect of a few ms. Also the watchdog's delay
   before the kernel's exec, on its own.

Usage: /usr/bin/python3 bench/launcher_bench.py --watchdog build/kernel-watchdog [--kills 20]
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import time

import sandbox
import zmq
from jupyter_client import KernelManager
from jupyter_client.restarter import KernelRestarter


def pct(values, p):
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def kernel_pid_under(launcher_pid):
    """The ipykernel below the watchdog (whose own argv names it too), from /proc: no psutil
    needed on the GPU machine."""
    pending = [launcher_pid]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if pid != launcher_pid and b"ipykernel_launcher" in f.read():
                    return pid
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    pending.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return None


class StoreWatch:
    """New reports in the store, announced by inotify (Python's standard library has no
    binding; libc's is called through ctypes)."""
    IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x8, 0x80, 0x100

    def __init__(self, directory):
        self.directory = directory
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(
                self.fd, os.fsencode(directory),
                self.IN_CLOSE_WRITE | self.IN_MOVED_TO | self.IN_CREATE) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def reports(self):
        return {e.path for e in os.scandir(self.directory) if e.name.endswith(".json")}

    def drain(self):
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass


def wait_for_death_and_report(pidfd, store, before, timeout=60):
    """(kernel ended, the new reports' paths), the first as perf_counter time: the process has
    ended when its pidfd turns readable, the moment its parent, the watchdog, is told."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(store.fd, select.POLLIN)
    ended, deadline = None, time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for fd, _ in poller.poll(1000):
            if fd == pidfd and ended is None:
                ended = time.perf_counter()
                poller.unregister(pidfd)
            elif fd == store.fd:
                store.drain()
                if new := store.reports() - before:
                    return ended, new
    raise TimeoutError("no report")


def bench_death_to_report(kills, report_dir):
    """Each kill: a fresh KernelRestarter (jupyter_client's own class, default settings) is
    polled on its own schedule, every time_to_dead seconds, as its periodic callback would;
    the kill lands at a random phase of that schedule."""
    km = KernelManager(kernel_name="python3-watched")
    km.start_kernel()
    store = StoreWatch(report_dir)
    report_ms, restarter_ms, watchdog_ms, dying_ms = [], [], [], []
    for i in range(kills):
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        kc.stop_channels()
        pid = kernel_pid_under(km.provisioner.process.pid)
        if pid is None:
            sys.exit("no ipykernel under the watchdog: did the kernel start?")
        restarter = KernelRestarter(kernel_manager=km)
        noticed = {}
        restarter.add_callback(lambda: noticed.setdefault("t", time.perf_counter()), "restart")
        before = store.reports()
        pidfd = os.pidfd_open(pid)
        poll_start = time.perf_counter()
        time.sleep(random.uniform(0, restarter.time_to_dead))
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGSEGV)
        try:
            gone, new = wait_for_death_and_report(pidfd, store, before)
        finally:
            os.close(pidfd)
        report_ms.append((time.perf_counter() - t0) * 1000)
        dying_ms.append((gone - t0) * 1000 if gone is not None else None)  # None: not seen
        seen_wall_ms = time.time() * 1000
        # The watchdog's own share: from the moment it saw the death (the report's died_at_ms,
        # its wall clock) to the report visible here (fsync and rename included). Not the
        # file's mtime: the kernel stamps that from a clock that moves in 4 ms ticks.
        path = max(new, key=os.path.getmtime)
        with open(path) as f:
            doc = json.load(f)
        watchdog_ms.append(seen_wall_ms - doc["kernel"]["died_at_ms"])
        next_poll = poll_start + restarter.time_to_dead
        while "t" not in noticed:
            time.sleep(max(0.0, next_poll - time.perf_counter()))
            restarter.poll()  # restarts the kernel once it has noticed
            next_poll += restarter.time_to_dead
        restarter_ms.append((noticed["t"] - t0) * 1000)
        print(f"  kill {i + 1:2d}: report on disk {report_ms[-1]:7.2f} ms "
              f"(kernel ended {dying_ms[-1] if dying_ms[-1] is not None else float('nan'):5.1f} ms, "
              f"watchdog's share {watchdog_ms[-1]:5.1f} ms), "
              f"restarter noticed {restarter_ms[-1]:8.1f} ms", flush=True)
    km.shutdown_kernel(now=True)
    os.close(store.fd)
    return report_ms, restarter_ms, watchdog_ms, dying_ms


def bench_startup(runs):
    def start_once(name):
        km = KernelManager(kernel_name=name)
        t0 = time.perf_counter()
        km.start_kernel()
        kc = km.client()
        kc.context.setsockopt(zmq.RECONNECT_IVL, 5)  # for the sockets made from here on
        kc.start_channels()
        # Queued until the kernel's shell socket is bound, answered once it can.
        msg_id = kc.kernel_info()
        while kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") != msg_id:
            pass
        elapsed = time.perf_counter() - t0
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        return elapsed * 1000

    times = {"python3-watched": [], "python3": []}
    start_once("python3")  # warm the page cache
    for i in range(runs):
        for name in (list(times) if i % 2 else reversed(list(times))):
            times[name].append(start_once(name))
    return times["python3-watched"], times["python3"]


def launch_delay(watchdog, report_dir, runs):
    """Milliseconds from spawning a command to it running, directly and under `run`: the
    watchdog's own start before the kernel's exec. /bin/date says when it ran."""
    def once(argv):
        t0 = time.time()
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        return (float(out) - t0) * 1000

    command = ["/bin/date", "+%s.%N"]
    direct, watched = [], []
    for _ in range(runs):
        direct.append(once(command))
        watched.append(once([watchdog, "run", "--report-dir", str(report_dir), "--", *command]))
    return statistics.median(watched), statistics.median(direct)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchdog", required=True)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--starts", type=int, default=30)
    args = ap.parse_args()
    _, report_dir = sandbox.wrapped_python3(args.watchdog, "kwd-bench-")
    report_dir.mkdir(mode=0o700)

    print(f"Death to report, {args.kills} SIGSEGV kills of a real ipykernel under the watchdog:")
    report_ms, restarter_ms, watchdog_ms, dying_ms = bench_death_to_report(args.kills, report_dir)
    print(f"\nStart-up, {args.starts} starts each (start_kernel to kernel_info_reply):")
    watched, direct = bench_startup(args.starts)
    delay_watched, delay_direct = launch_delay(args.watchdog, report_dir, 50)

    rm, rp = statistics.median(report_ms), pct(report_ms, 99)
    sm, sp = statistics.median(restarter_ms), pct(restarter_ms, 99)
    wm, dm = statistics.median(watched), statistics.median(direct)
    print("\n== results ==")
    print(f"report on disk after death      median {rm:8.2f} ms   p99 {rp:8.2f} ms   (target p99 <= 20 ms)")
    print(f"  of which the watchdog's work   median {statistics.median(watchdog_ms):8.2f} ms   "
          f"p99 {pct(watchdog_ms, 99):8.2f} ms   (death seen -> report visible, fsync and rename included; the rest is "
          "the kernel dying, faulthandler's dump included)")
    split = [(r, d) for r, d in zip(report_ms, dying_ms) if d is not None]
    dying_ms = [d for _, d in split]
    after_ms = [r - d for r, d in split]
    print(f"  kill -> kernel ended          median {statistics.median(dying_ms):8.2f} ms   "
          f"p99 {pct(dying_ms, 99):8.2f} ms   (faulthandler's dump, its threads ended, its memory "
          f"freed: its pidfd readable; {len(dying_ms)} of {len(report_ms)} kills)")
    print(f"  kernel ended -> report seen   median {statistics.median(after_ms):8.2f} ms   "
          f"p99 {pct(after_ms, 99):8.2f} ms   (SIGCHLD, the watchdog's wake-up and work, "
          "inotify to this bench)")
    print(f"jupyter_client restarter notices median {sm:8.1f} ms   p99 {sp:8.1f} ms")
    print(f"ratio restarter/report           median {sm / rm:8.0f}x")
    mean_w, mean_d = statistics.mean(watched), statistics.mean(direct)
    paired = [w - d for w, d in zip(watched, direct)]
    spread = statistics.stdev(paired) if len(paired) > 1 else float("nan")
    print(f"start to kernel_info_reply       watched {wm:7.1f} ms   direct {dm:7.1f} ms   "
          f"overhead {100 * (wm - dm) / dm:+.1f} %   (target <= +2 %; medians of {len(watched)})")
    print(f"  means                          watched {mean_w:7.1f} ms   direct {mean_d:7.1f} ms   "
          f"overhead {100 * (mean_w - mean_d) / mean_d:+.1f} %   (+-"
          f"{200 * spread / mean_d / len(paired) ** 0.5:.1f} %: twice the "
          "standard error of the paired differences)")
    print(f"  the watchdog's start before the kernel's exec: {delay_watched - delay_direct:5.2f} ms "
          f"(spawn to running: {delay_watched:.2f} ms under run, {delay_direct:.2f} ms direct, "
          f"medians of 50) = {100 * (delay_watched - delay_direct) / dm:.1f} % of a direct start")


if __name__ == "__main__":
    main()
