"""The daemon under load (issue: background service), measured side by side in one run.

--kernels N real idle ipykernels (50), started by jupyter_client's KernelManager from the
unwrapped python3 kernelspec into a private runtime dir, and --synthetic M connection files
(500), each named by the argv of a sleeping process (`tail -f FILE`: a process whose argv
carries `-f <connection file>`, as a kernel's does) whose ports nobody listens on. Printed:

- discovery latency, connection file written -> the daemon's "watching kernel" log line
  (its JSON log's time), p50 / p99 (target p99 <= 100 ms): for all of them started in one
  stampede, and for the real kernels from their process's start (a plain KernelManager
  writes its file to the temp dir, found by the 1 s process scan); then for --one-by-one
  more (half real kernels, half synthetic), their files written into the runtime dir one at
  a time on the settled machine, as a user starts kernels;
- the daemon's CPU over --idle-seconds with everything watched, as a share of one core
  (target < 1 % in total), next to a psutil poll of the same real kernels' process trees
  the way jupyter-resource-usage reads them (memory_info of the kernel and its children),
  at 1 Hz: the cost of today's per-kernel memory readout for the same kernels;
- the daemon's RSS before any kernel and with all watched: per watched kernel (target
  < 1 MiB each plus a fixed base);
- death -> report on disk for --deaths real kernels killed by SIGSEGV, p50 / p99 (target
  p99 <= 50 ms).

Usage: /usr/bin/python3 bench/daemon_bench.py --watchdog build/kernel-watchdog
           [--kernels 50] [--synthetic 500] [--idle-seconds 30] [--deaths 10] [--one-by-one 20]
"""
import argparse
import calendar
import json
import os
import pathlib
import secrets
import signal
import socket
import statistics
import subprocess
import tempfile
import time

import psutil
from jupyter_client import KernelManager

MiB = 1024 * 1024


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def daemon_status(watchdog, sock):
    out = subprocess.run([watchdog, "status", "--json", "--status-socket", str(sock)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def wait_watched(watchdog, sock, files, timeout):
    deadline = time.monotonic() + timeout
    wanted = {str(f) for f in files}
    while True:
        seen = {r["connection_file"] for r in daemon_status(watchdog, sock)["kernels"]
                if r.get("watched_by") == "daemon"}
        if wanted <= seen:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(wanted & seen)} of {len(wanted)} watched")
        time.sleep(0.2)


def unused_ports(count):
    """Ports that nothing listens on (bound and closed again: free now)."""
    ports = []
    for _ in range(count):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return ports


def synthetic_connection_file(path):
    shell, iopub, stdin, control, hb = unused_ports(5)
    path.write_text(json.dumps({
        "shell_port": shell, "iopub_port": iopub, "stdin_port": stdin, "control_port": control,
        "hb_port": hb, "ip": "127.0.0.1", "key": secrets.token_hex(16), "transport": "tcp",
        "signature_scheme": "hmac-sha256", "kernel_name": "python3"}))


def watched_at(log_path):
    """kernel id -> when the daemon logged that it watches it (epoch seconds)."""
    out = {}
    for line in log_path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("kernel_id") and record["message"].startswith("watching kernel"):
            t = time.strptime(record["time"][:19], "%Y-%m-%dT%H:%M:%S")
            out[record["kernel_id"]] = calendar.timegm(t) + int(record["time"][20:23]) / 1000
    return out


def psutil_poll(pids):
    """One readout of every kernel's tree, as jupyter-resource-usage makes it."""
    total = 0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in [root] + root.children(recursive=True):
                total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def cpu_seconds(proc):
    t = proc.cpu_times()
    return t.user + t.system


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchdog", required=True)
    ap.add_argument("--kernels", type=int, default=50)
    ap.add_argument("--synthetic", type=int, default=500)
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--deaths", type=int, default=10)
    ap.add_argument("--one-by-one", type=int, default=20,
                    help="kernels started one at a time on the settled machine (half real)")
    args = ap.parse_args()
    watchdog = str(pathlib.Path(args.watchdog).resolve())

    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-daemon-bench-"))
    runtime, reports, sock, log = work / "runtime", work / "reports", work / "d.sock", work / "log"
    runtime.mkdir()
    os.environ.update(JUPYTER_RUNTIME_DIR=str(runtime), PYDEVD_DISABLE_FILE_VALIDATION="1",
                      KERNEL_WATCHDOG_REPORT_DIR=str(reports))
    with open(log, "w") as log_file:
        daemon = subprocess.Popen(
            [watchdog, "--log-format", "json", "daemon", "--runtime-dir", str(runtime),
             "--report-dir", str(reports), "--status-socket", str(sock)],
            stdout=log_file, stderr=log_file)
    managers, sleepers = [], []
    try:
        while not sock.exists():
            assert daemon.poll() is None, log.read_text()
            time.sleep(0.05)
        time.sleep(1)
        dproc = psutil.Process(daemon.pid)
        base_rss = dproc.memory_info().rss

        written = {}  # kernel id -> when its connection file was written
        # Real kernel id -> when start_kernel returned: its process exists from then on (the
        # manager writes the file first, then spawns, and the daemon can only watch a
        # process; the process's own create_time counts from a boot time /proc gives in
        # whole seconds, too coarse for this).
        spawned = {}
        for _ in range(args.kernels):
            km = KernelManager(kernel_name="python3")
            km.start_kernel()
            cf = pathlib.Path(km.connection_file)
            written[cf.stem.removeprefix("kernel-")] = cf.stat().st_mtime_ns / 1e9
            spawned[cf.stem.removeprefix("kernel-")] = time.time()  # its process exists now
            managers.append(km)
        for i in range(args.synthetic):
            cf = runtime / f"kernel-synthetic-{i:04d}.json"
            synthetic_connection_file(cf)
            written[cf.stem.removeprefix("kernel-")] = time.time()
            sleepers.append(subprocess.Popen(["tail", "-f", str(cf)], stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL))
        # A kernel that could not start (jupyter_client's port choice raced another bind) is
        # left out, not waited for.
        managers = [km for km in managers if km.is_alive()]
        initial_kernels = len(managers)
        files = [m.connection_file for m in managers] + [s.args[2] for s in sleepers]
        wait_watched(watchdog, sock, files, timeout=120)
        for km in managers:  # every real kernel up and idle before the idle window
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=120)
            kc.stop_channels()
        time.sleep(6)  # past the first seconds' fast look for ports that never open

        seen = watched_at(log)
        latencies = [(seen[k] - t) * 1000 for k, t in written.items() if k in seen]
        real_latencies = [(seen[k] - t) * 1000 for k, t in spawned.items() if k in seen]
        # Where the tail is: a real kernel's file is written before its process exists (the
        # manager spawns it after), a synthetic one's just before its `tail -f` starts.
        slowest = sorted(((seen[k] - t) * 1000, k) for k, t in written.items() if k in seen)[-6:]
        tail = [{"ms": round(ms, 1), "kind": "real" if k in spawned else "synthetic",
                 "after_start_kernel_returned_ms": round((seen[k] - spawned[k]) * 1000, 1)
                 if k in spawned else None} for ms, k in reversed(slowest)]
        synthetic_latencies = [(seen[k] - t) * 1000 for k, t in written.items()
                               if k in seen and k not in spawned]

        watched_rss = dproc.memory_info().rss
        before = cpu_seconds(dproc)
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        daemon_share = (cpu_seconds(dproc) - before) / (time.monotonic() - t0)

        pids = [km.provisioner.process.pid for km in managers]
        me = psutil.Process()
        before = cpu_seconds(me)
        polls = max(1, int(min(args.idle_seconds, 10)))
        for _ in range(polls):
            psutil_poll(pids)
        psutil_per_poll = (cpu_seconds(me) - before) / polls  # at 1 Hz: this share of a core

        # Discovery on a settled machine, one kernel at a time, as a user starts them: the
        # stampede above (fifty kernels importing ipykernel at once on a few cores) measures
        # the machine's run queue as much as the daemon. Each connection file is written into
        # the runtime dir before its process starts, as jupyter_server's managers do.
        one_by_one = {}
        for i in range(args.one_by_one):
            if i % 2 == 0:
                kid = f"one-by-one-{i:03d}"
                km = KernelManager(kernel_name="python3",
                                   connection_file=str(runtime / f"kernel-{kid}.json"))
                km.start_kernel()
                one_by_one[kid] = pathlib.Path(km.connection_file).stat().st_mtime_ns / 1e9
                managers.append(km)
            else:
                cf = runtime / f"kernel-one-by-one-{i:03d}.json"
                synthetic_connection_file(cf)
                one_by_one[cf.stem.removeprefix("kernel-")] = time.time()
                sleepers.append(subprocess.Popen(["tail", "-f", str(cf)],
                                                 stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL))
            time.sleep(2)
        seen = watched_at(log)
        settled_latencies = [(seen[k] - t) * 1000 for k, t in one_by_one.items() if k in seen]

        death_ms = []
        for km in managers[:args.deaths]:
            kid = pathlib.Path(km.connection_file).stem.removeprefix("kernel-")
            pid = km.provisioner.process.pid
            t = time.monotonic()
            os.kill(pid, signal.SIGSEGV)
            deadline = t + 10
            while not any(kid[:8] in p.name for p in reports.glob("*.json")):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.0005)
            else:
                death_ms.append((time.monotonic() - t) * 1000)

        watched = initial_kernels + args.synthetic
        print(json.dumps({
            "kernels": initial_kernels, "synthetic": args.synthetic,
            "discovery_ms_p50": round(statistics.median(latencies), 1),
            "discovery_ms_p99": round(percentile(latencies, 99), 1),
            "discovery_real_kernels_after_start_kernel_returned_ms_p50":
                round(statistics.median(real_latencies), 1) if real_latencies else None,
            "discovery_real_kernels_after_start_kernel_returned_ms_p99":
                round(percentile(real_latencies, 99), 1) if real_latencies else None,
            "discovered": len(latencies),
            "discovery_synthetic_ms_p99": round(percentile(synthetic_latencies, 99), 1)
            if synthetic_latencies else None,
            "discovery_slowest": tail,
            "discovery_one_at_a_time_ms_p50":
                round(statistics.median(settled_latencies), 1) if settled_latencies else None,
            "discovery_one_at_a_time_ms_p99":
                round(percentile(settled_latencies, 99), 1) if settled_latencies else None,
            "discovered_one_at_a_time": f"{len(settled_latencies)} of {args.one_by_one}",
            "daemon_cpu_percent_of_core": round(daemon_share * 100, 3),
            "psutil_poll_cpu_percent_of_core_at_1hz": round(psutil_per_poll * 100, 3),
            "ratio_daemon_to_psutil_poll": round(daemon_share / psutil_per_poll, 2)
            if psutil_per_poll > 0 else None,
            "daemon_rss_base_mib": round(base_rss / MiB, 1),
            "daemon_rss_watching_mib": round(watched_rss / MiB, 1),
            "daemon_rss_per_kernel_kib": round((watched_rss - base_rss) / watched / 1024, 1),
            "death_to_report_ms_p50": round(statistics.median(death_ms), 1) if death_ms else None,
            "death_to_report_ms_p99": round(percentile(death_ms, 99), 1) if death_ms else None,
            "deaths_reported": len(death_ms),
        }, indent=2))
    finally:
        # The daemon first: the kernels' deaths below are the bench's, not worth reports.
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        for s in sleepers:
            s.kill()
        for km in managers:
            try:
                km.shutdown_kernel(now=True)
            except Exception:
                pass


if __name__ == "__main__":
    main()
