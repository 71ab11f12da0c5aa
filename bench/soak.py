"""Soak (issue 40): what months of kernels do to the daemon and to `run`, compressed.

The daemon part: --lifecycles real ipykernels (1,000 in the long form), --concurrency at a time,
each started by jupyter_client's KernelManager into the daemon's runtime dir (over IPC:
jupyter_client's TCP ports race each other in a stampede, which is not what this measures),
watched, and ended one of five ways in turn:
  clean    shut down by its manager;
  restart  restarted by its manager (its first process ends cleanly), the second one shut down;
  segv     SIGSEGV;
  kill     SIGKILL;
  oom      OOM-killed: it starts in a 200 MiB memory cgroup of its own and a cell fills it.
Printed, as JSON:
  - reports for the abnormal ends (segv, kill, oom) against how many there were (must be
    equal), reports for clean ends (must be none), kernels reported twice (must be none);
  - the daemon's RSS, descriptors and threads after the warm-up (the first tenth of the
    lifecycles) and at the end: growth (targets: under 1 MiB, no descriptor or thread; the
    read pool's idle threads are counted apart), and the anonymous part of the RSS (the heap
    and the stacks) apart from the pages of the program and its libraries;
  - death -> report on disk, p99 over the first and the last 100 abnormal deaths (the halves
    when there are fewer);
  - the causes the reports gave.
The stand-in part: --stand-ins lifecycles (10,000 in the long form) of the fleet bench's stand-in
kernels under a daemon of their own: a sleeping process (`tail -f FILE`) named by its argv as
the kernel of a connection file (IPC transport, nothing listening), --stand-in-concurrency at a
time, ended in turn cleanly (SIGTERM, then its file removed 100 ms after its exit, as
jupyter_client does), by SIGSEGV and by SIGKILL. The daemon watches each as it would a kernel
(its process, its file, pings that nobody answers), so thousands of lifecycles take minutes,
not hours. The same figures are printed for them.
The `run` part: one kernel under `kernel-watchdog run` for --cells cells (a compressed day, 10,000
in the long form), each printing and allocating a little, then SIGSEGV: the watchdog's RSS after
the first tenth of the cells and at the end, and how much of the day its report keeps (cells,
memory samples, bytes).

Exit status 1 when a count is wrong (a lost, extra or doubled report; a descriptor or thread
the daemon kept): CI's short form (tests/integration/test_soak.py) holds that. Times are only
printed.

Usage (root, a cgroup v1 memory hierarchy; nothing else watched by this user's daemons meanwhile
is counted, but other kernels of the user are seen by the daemon: run it on a quiet machine):
  /usr/bin/python3 bench/soak.py --watchdog build/kernel-watchdog
      [--lifecycles 1000] [--concurrency 4] [--stand-ins 10000] [--stand-in-concurrency 50]
      [--cells 10000] [--keep]
"""
import argparse
import collections
import errno
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from jupyter_client import KernelManager

MiB = 1024 * 1024
ENDS = ("clean", "restart", "segv", "kill", "oom")
STAND_IN_ENDS = ("clean", "segv", "kill")
ABNORMAL = {"segv", "kill", "oom"}
OOM_LIMIT = 200 * MiB


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def process_counts(pid):
    """RSS (bytes), open descriptors and threads of one process, from /proc."""
    counts = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                counts[key] = int(value.split()[0]) * 1024
            elif key == "Threads":
                counts[key] = int(value)
    # RssAnon is the heap and the stacks; RssFile the program's and its libraries' pages, which
    # grow as code first run late (an OOM kill's path, say) is paged in, and are not a leak.
    # The read pool's idle threads (each ends after 3 s idle) are how many reads ran at once
    # a moment ago, not something kept: they are counted apart.
    idle_pool = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                idle_pool += f.read().strip() == "kwd-read-pool"
        except FileNotFoundError:
            pass
    return {"rss": counts.get("VmRSS", 0), "rss_anon": counts.get("RssAnon", 0),
            "rss_file": counts.get("RssFile", 0),
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": counts.get("Threads", 0) - idle_pool, "idle_read_threads": idle_pool}


class MemoryCgroups:
    """Child memory cgroups of this process's own (cgroup v1), one per OOM lifecycle, removed
    after. (Under cgroup v2 a child with a memory limit needs the parent's subtree_control,
    which a process's own non-leaf scope cannot give: not done here.)"""

    def __init__(self, tag):
        self.base = None
        for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                self.base = pathlib.Path("/sys/fs/cgroup/memory" + path)
        if self.base is None:
            raise SystemExit("soak: needs a cgroup v1 memory hierarchy for its OOM lifecycles")
        self.tag = tag
        self.made = []

    def make(self, index):
        cg = self.base / f"{self.tag}-{index}"
        cg.mkdir()
        self.made.append(cg)
        (cg / "memory.limit_in_bytes").write_text(str(OOM_LIMIT))
        (cg / "memory.swappiness").write_text("0")
        return cg

    def remove_empty(self):
        for cg in list(self.made):
            try:
                cg.rmdir()
                self.made.remove(cg)
            except OSError:
                pass


class KernelLog:
    """When the OOM killer killed each pid, from the kernel log (/dev/kmsg): an OOM death's own
    time, on the wall clock. (Its parent's wait returns later than the daemon's report.)"""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.killed_at = {}

    def poll(self):
        while True:
            try:
                record = os.read(self.fd, 8192).decode(errors="replace")
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.EPIPE:  # records overwritten before this read: go on
                    continue
                raise
            head, _, text = record.partition(";")
            killed = re.search(r"Killed process (\d+)", text)
            if killed:
                # The record's time is microseconds on the kernel's monotonic clock.
                since = time.clock_gettime(time.CLOCK_MONOTONIC) - int(head.split(",")[2]) / 1e6
                self.killed_at[int(killed[1])] = time.time() - since

    def close(self):
        os.close(self.fd)


class Store:
    """The report store, read incrementally: each new report file parsed once."""

    def __init__(self, folder, remove_read=False):
        self.folder = folder
        self.remove_read = remove_read  # thousands of reports: each removed once read
        self.seen = set()
        self.by_kernel = collections.defaultdict(list)  # kernel id -> [(seen at, report)]

    def poll(self):
        for path in self.folder.glob("*.json"):
            if path.name in self.seen:
                continue
            try:
                report = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a report is renamed into place whole; anything else is not one
            self.seen.add(path.name)
            kid = (report.get("kernel") or {}).get("kernel_id")
            # When it was written: the file's own time, whenever this poll came by.
            self.by_kernel[kid].append((path.stat().st_mtime_ns / 1e9, {
                "diagnosis": {"cause": (report.get("diagnosis") or {}).get("cause")}}))
            if self.remove_read:
                path.unlink()


def watched_kernels(watchdog, sock):
    """The daemon's status rows of the kernels it watches itself (not those a `run` watches,
    which it only lists); None when it does not answer."""
    out = subprocess.run([watchdog, "status", "--json", "--status-socket", str(sock)],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        return None
    return [row for row in json.loads(out.stdout)["kernels"]
            if row.get("watched_by", "daemon") == "daemon"]


def status_pids(watchdog, sock):
    return {row["connection_file"]: row["pid"] for row in watched_kernels(watchdog, sock) or []}


def kernel_id(km):
    return pathlib.Path(km.connection_file).stem.removeprefix("kernel-")


def wait_watched(watchdog, sock, wanted, seconds=60):
    """Until the daemon watches each connection file's kernel by its pid: a death the daemon
    never saw is not what is soaked."""
    deadline = time.monotonic() + seconds
    while True:
        watched = status_pids(watchdog, sock)
        if all(watched.get(cf) == pid for cf, pid in wanted.items()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: kernels not watched within {seconds} s: {wanted}")
        time.sleep(0.1)


def settled_counts(watchdog, sock, daemon_pid, seconds=20):
    """The daemon's counts once it watches no kernel at all (other users of the machine's
    kernels come and go): comparable from one moment to another. None when it never is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if watched_kernels(watchdog, sock) == []:
            # What a kernel's end released is released: the daemon gives freed memory back
            # to the system a second after a kernel's end.
            time.sleep(1.5)
            if watched_kernels(watchdog, sock) == []:
                return process_counts(daemon_pid)
        time.sleep(0.2)
    return None


def shut_down(wave):
    for _, km in wave:
        try:
            km.shutdown_kernel(now=True)
        except Exception:
            pass
        km.cleanup_resources()


def soak_daemon(args, watchdog, work):
    # The OOM lifecycles' kernels enter their cgroup before they exec, so the daemon finds
    # them there; the others start as the plain python3 kernelspec starts them.
    spec = work / "share" / "jupyter" / "kernels" / "python3-soak-limited"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/bin/sh", "-c", 'echo $$ > "$KWD_SOAK_CGROUP/cgroup.procs" && exec "$0" "$@"',
                 sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "python3 (200 MiB)", "language": "python"}))
    cgroups = MemoryCgroups(f"kwd-soak-{os.getpid()}")
    daemon, log, runtime, reports, sock = start_daemon(watchdog, work, "kernels")
    os.environ.update(JUPYTER_RUNTIME_DIR=str(runtime), PYDEVD_DISABLE_FILE_VALIDATION="1",
                      JUPYTER_PATH=str(work / "share" / "jupyter"))
    store = Store(reports)
    kernel_log = KernelLog()
    ends = collections.Counter()
    abnormal = {}    # kernel id -> its end
    clean_ids = set()
    # Death -> report on disk, in the order of the deaths: from the signal (segv, kill), or
    # from the OOM killer's line in the kernel log (oom).
    death_ms = []
    by_end = collections.defaultdict(list)
    warm = None
    done = 0
    wave = []
    # The warm-up: the first whole waves that end a kernel every way (and a tenth of the run).
    per_wave = max(1, args.concurrency)
    warm_after = min(args.lifecycles, -(-max(args.lifecycles // 10, len(ENDS)) // per_wave) * per_wave)
    try:
        index = 0
        while done < args.lifecycles:
            wave = []
            for _ in range(min(args.concurrency, args.lifecycles - done)):
                end = ENDS[index % len(ENDS)]
                env = dict(os.environ)
                if end == "oom":
                    km = KernelManager(kernel_name="python3-soak-limited", transport="ipc",
                                       ip=str(work / f"ipc-{index}"))
                    env["KWD_SOAK_CGROUP"] = str(cgroups.make(index))
                else:
                    km = KernelManager(kernel_name="python3", transport="ipc",
                                       ip=str(work / f"ipc-{index}"))
                km.start_kernel(env=env)
                wave.append((end, km))
                index += 1
            clients = []
            for end, km in wave:
                kc = km.client()
                kc.start_channels()
                kc.wait_for_ready(timeout=120)
                clients.append(kc)
            wait_watched(watchdog, sock,
                         {km.connection_file: km.provisioner.process.pid for _, km in wave})
            killed_at = {}
            for (end, km), kc in zip(wave, clients):
                kid = kernel_id(km)
                ends[end] += 1
                if end == "clean":
                    kc.stop_channels()
                    km.shutdown_kernel(now=False)
                    clean_ids.add(kid)
                elif end == "restart":
                    kc.stop_channels()
                    km.restart_kernel(now=False)
                    # The second process too is watched, and ready to be shut down cleanly
                    # (one still starting would be killed after the manager's wait).
                    second = km.client()
                    second.start_channels()
                    second.wait_for_ready(timeout=120)
                    wait_watched(watchdog, sock, {km.connection_file: km.provisioner.process.pid})
                    second.stop_channels()
                    km.shutdown_kernel(now=False)
                    clean_ids.add(kid)
                elif end == "oom":
                    abnormal[kid] = end
                    kc.execute("filler = bytearray(400 * 1024 * 1024)")
                    km.provisioner.process.wait(timeout=60)
                    kernel_log.poll()
                    pid = km.provisioner.process.pid
                    if pid not in kernel_log.killed_at:
                        raise SystemExit(f"soak: no OOM kill of pid {pid} in the kernel log")
                    killed_at[kid] = kernel_log.killed_at[pid]
                    kc.stop_channels()
                else:
                    abnormal[kid] = end
                    killed_at[kid] = time.time()
                    os.kill(km.provisioner.process.pid,
                            signal.SIGSEGV if end == "segv" else signal.SIGKILL)
                    kc.stop_channels()
            time_reports(store, killed_at, abnormal, death_ms, by_end)
            shut_down(wave)
            done += len(wave)
            wave = []
            cgroups.remove_empty()
            if warm is None and done >= warm_after:
                warm = settled_counts(watchdog, sock, daemon.pid)
        time.sleep(2)  # a late or second report would come now
        store.poll()
        last = settled_counts(watchdog, sock, daemon.pid)
    finally:
        shut_down(wave)  # a wave cut short by a failure leaves no kernel behind
        stop_daemon(daemon, log)
        cgroups.remove_empty()
        kernel_log.close()

    return tally(store, ends, abnormal, clean_ids, death_ms, by_end, warm, last, done)


def time_reports(store, killed_at, abnormal, death_ms, by_end):
    """Waits (30 s at most) for the report of each kernel in `killed_at` (kernel id -> when it
    died), and adds each death -> report time to death_ms and to its end's by_end."""
    deadline = time.monotonic() + 30
    while killed_at and time.monotonic() < deadline:
        store.poll()
        for kid in [k for k in killed_at if store.by_kernel.get(k)]:
            written, _ = store.by_kernel[kid][0]
            took_ms = (written - killed_at.pop(kid)) * 1000
            death_ms.append(took_ms)
            by_end[abnormal[kid]].append(took_ms)
        time.sleep(0.002)


def tally(store, ends, abnormal, clean_ids, death_ms, by_end, warm, last, done):
    """What a daemon's churn came to: reports against ends, its growth, its times."""
    reported_abnormal = [k for k in abnormal if store.by_kernel.get(k)]
    mine = set(abnormal) | clean_ids  # the daemon sees the user's other kernels too
    doubled = [k for k, rows in store.by_kernel.items() if k in mine and len(rows) > 1]
    clean_reported = [k for k in clean_ids if store.by_kernel.get(k)]
    causes = collections.Counter(rows[0][1].get("diagnosis", {}).get("cause")
                                 for k, rows in store.by_kernel.items() if k in abnormal)
    window = min(100, max(1, len(death_ms) // 2))
    return {
        "lifecycles": done,
        "ends": dict(ends),
        "abnormal_ends": len(abnormal),
        "abnormal_reported": len(reported_abnormal),
        "abnormal_not_reported": sorted(set(abnormal) - set(reported_abnormal)),
        "clean_ends": len(clean_ids),
        "clean_reported": sorted(clean_reported),
        "reported_twice": sorted(doubled),
        "causes": dict(causes),
        # Taken when the daemon watched no kernel at all; None when it never was so (others'
        # kernels kept it busy): then growth is not measured.
        "daemon_after_warmup": warm,
        "daemon_at_end": last,
        "daemon_rss_growth_mib": round((last["rss"] - warm["rss"]) / MiB, 2)
        if warm and last else None,
        "daemon_rss_anon_growth_mib": round((last["rss_anon"] - warm["rss_anon"]) / MiB, 2)
        if warm and last else None,
        "daemon_fd_growth": last["fds"] - warm["fds"] if warm and last else None,
        "daemon_thread_growth": last["threads"] - warm["threads"] if warm and last else None,
        "death_to_report_ms_p99_first": round(percentile(death_ms[:window], 99), 1)
        if death_ms else None,
        "death_to_report_ms_p99_last": round(percentile(death_ms[-window:], 99), 1)
        if death_ms else None,
        "death_to_report_ms_p50": round(statistics.median(death_ms), 1) if death_ms else None,
        "deaths_timed_per_window": window,
        "death_to_report_ms_p50_by_end": {end: round(statistics.median(ms), 1)
                                          for end, ms in sorted(by_end.items())},
        "death_to_report_ms_p99_by_end": {end: round(percentile(ms, 99), 1)
                                          for end, ms in sorted(by_end.items())},
    }


def start_daemon(watchdog, work, name):
    """A daemon of its own (runtime dir, store, socket, log) under `work/name`."""
    base = work / name
    runtime, reports, sock = base / "runtime", base / "reports", base / "d.sock"
    runtime.mkdir(parents=True)
    reports.mkdir(mode=0o700)
    log = open(base / "daemon.log", "w")
    daemon = subprocess.Popen(
        [watchdog, "--log-format", "json", "daemon", "--runtime-dir", str(runtime),
         "--report-dir", str(reports), "--status-socket", str(sock)],
        stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 20
    while not sock.exists():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("soak: the daemon did not start: " +
                             (base / "daemon.log").read_text())
        time.sleep(0.05)
    return daemon, log, runtime, reports, sock


def stop_daemon(daemon, log):
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        daemon.kill()
    log.close()


def stand_in_connection_file(path, ipc_base):
    """A kernel's connection file whose sockets nobody binds (IPC: no port to race for)."""
    path.write_text(json.dumps({
        "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
        "ip": str(ipc_base), "key": secrets.token_hex(16), "transport": "ipc",
        "signature_scheme": "hmac-sha256", "kernel_name": "python3"}))


def soak_stand_ins(args, watchdog, work):
    daemon, log, runtime, reports, sock = start_daemon(watchdog, work, "stand-ins")
    store = Store(reports, remove_read=True)
    ends = collections.Counter()
    abnormal, clean_ids = {}, set()
    death_ms, by_end = [], collections.defaultdict(list)
    warm = None
    done = 0
    wave = []
    per_wave = max(1, args.stand_in_concurrency)
    warm_after = min(args.stand_ins,
                     -(-max(args.stand_ins // 10, len(STAND_IN_ENDS)) // per_wave) * per_wave)
    try:
        index = 0
        while done < args.stand_ins:
            wave = []
            for _ in range(min(per_wave, args.stand_ins - done)):
                cf = runtime / f"kernel-standin-{index:05d}.json"
                stand_in_connection_file(cf, work / "stand-ins" / f"ipc-{index}")
                proc = subprocess.Popen(["tail", "-f", str(cf)], stdout=subprocess.DEVNULL)
                wave.append((STAND_IN_ENDS[index % len(STAND_IN_ENDS)], cf, proc))
                index += 1
            wait_watched(watchdog, sock, {str(cf): proc.pid for _, cf, proc in wave})
            killed_at = {}
            for end, cf, proc in wave:
                kid = cf.stem.removeprefix("kernel-")
                ends[end] += 1
                if end == "clean":
                    clean_ids.add(kid)
                    proc.terminate()
                else:
                    abnormal[kid] = end
                    killed_at[kid] = time.time()
                    proc.send_signal(signal.SIGSEGV if end == "segv" else signal.SIGKILL)
            # A manager's clean-up: the file removed once it has seen its kernel gone.
            for end, cf, proc in wave:
                proc.wait(timeout=30)
            time.sleep(0.1)
            for end, cf, proc in wave:
                if end == "clean":
                    cf.unlink()
            time_reports(store, killed_at, abnormal, death_ms, by_end)
            for end, cf, proc in wave:
                cf.unlink(missing_ok=True)
            done += len(wave)
            wave = []
            if warm is None and done >= warm_after:
                warm = settled_counts(watchdog, sock, daemon.pid)
        time.sleep(2)  # a late or second report would come now
        store.poll()
        last = settled_counts(watchdog, sock, daemon.pid)
    finally:
        for _, cf, proc in wave:  # a wave cut short by a failure leaves no process behind
            proc.kill()
            proc.wait()
        stop_daemon(daemon, log)
    return tally(store, ends, abnormal, clean_ids, death_ms, by_end, warm, last, done)


def soak_run(args, watchdog, work):
    prefix, reports = work / "prefix", work / "run-reports"
    os.environ.update(KERNEL_WATCHDOG_REPORT_DIR=str(reports),
                      JUPYTER_PATH=f"{prefix / 'share' / 'jupyter'}:{work / 'share' / 'jupyter'}")
    wrapped = subprocess.run([watchdog, "kernelspec", "wrap", "python3", "--prefix", str(prefix),
                              "--name", "python3-soak-watched"], capture_output=True, text=True)
    if wrapped.returncode != 0:
        raise SystemExit(f"soak: kernelspec wrap failed: {wrapped.stderr}")
    km = KernelManager(kernel_name="python3-soak-watched")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        run_pid = km.provisioner.process.pid
        early = None
        started = time.monotonic()
        for i in range(args.cells):
            # A day's cells, small: some output, some memory that comes and goes.
            kc.execute_interactive(f"print({i}); scratch = [0] * {1000 + i % 50_000}",
                                   timeout=60, output_hook=lambda msg: None)
            if i + 1 == max(1, args.cells // 10):
                early = process_counts(run_pid)
        late = process_counts(run_pid)
        cells_s = time.monotonic() - started
        children = pathlib.Path(f"/proc/{run_pid}/task/{run_pid}/children").read_text().split()
        if not children:
            raise SystemExit("soak: run's kernel is not running")
        kernel_pid = int(children[0])
        os.kill(kernel_pid, signal.SIGSEGV)
        km.provisioner.process.wait(timeout=60)
        deadline = time.monotonic() + 30
        while not list(reports.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        files = list(reports.glob("*.json"))
        report = json.loads(files[0].read_text()) if files else {}
    finally:
        kc.stop_channels()
        try:
            km.shutdown_kernel(now=True)
        except Exception:
            pass
        km.cleanup_resources()
    execution, memory = report.get("execution", {}), report.get("memory", {})
    return {
        "cells": args.cells,
        "cells_per_second": round(args.cells / cells_s, 1),
        "watchdog_after_first_tenth": early,
        "watchdog_at_end": late,
        "watchdog_rss_growth_mib": round((late["rss"] - early["rss"]) / MiB, 2),
        "watchdog_fd_growth": late["fds"] - early["fds"],
        "report_written": bool(files),
        "report_bytes": files[0].stat().st_size if files else None,
        "report_cells_kept": len(execution.get("last_cells") or [])
        if isinstance(execution, dict) else None,
        # The samples are columns: their count is a column's length.
        "report_memory_samples": sum(len((memory.get(part) or {}).get("t_ms") or [])
                                     for part in ("samples", "older_samples"))
        if isinstance(memory, dict) else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watchdog", required=True)
    ap.add_argument("--lifecycles", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--stand-ins", type=int, default=10_000)
    ap.add_argument("--stand-in-concurrency", type=int, default=50)
    ap.add_argument("--cells", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (daemon log, reports) instead of removing it")
    args = ap.parse_args()
    watchdog = str(pathlib.Path(args.watchdog).resolve())
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-soak-"))
    failed = True
    try:
        daemon = soak_daemon(args, watchdog, work) if args.lifecycles > 0 else None
        stand_ins = soak_stand_ins(args, watchdog, work) if args.stand_ins > 0 else None
        run = soak_run(args, watchdog, work) if args.cells > 0 else None
        problems = []
        for name, part in (("kernels", daemon), ("stand-ins", stand_ins)):
            if part is None:
                continue
            if part["abnormal_reported"] != part["abnormal_ends"]:
                problems.append(f"{name}: an abnormal end was not reported")
            if part["clean_reported"]:
                problems.append(f"{name}: a clean end was reported")
            if part["reported_twice"]:
                problems.append(f"{name}: a kernel was reported twice")
            if (part["daemon_fd_growth"] or 0) > 0 or (part["daemon_thread_growth"] or 0) > 0:
                problems.append(f"{name}: the daemon kept descriptors or threads")
        if run is not None and not run["report_written"]:
            problems.append("run wrote no report for its kernel's SIGSEGV")
        print(json.dumps({"cores": os.cpu_count(), "daemon": daemon, "stand_ins": stand_ins,
                          "run": run,
                          "problems": problems}, indent=2))
        failed = bool(problems)
    finally:
        if args.keep or failed:
            print(f"soak: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
