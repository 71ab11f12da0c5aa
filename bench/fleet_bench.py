"""The node daemon (`daemon --all-users`, issue 32) on a simulated Kubernetes node: --containers
pods (50), each a container made as a runtime makes one (its own mount, PID and network
namespaces, its own tmpfs /tmp, a v1 memory cgroup named as kubelet names a burstable pod's
container, below this process's own cgroup, and kubelet records naming it), each holding
--per-container kernels (4: 200 in all).

The kernels are light stand-ins, not ipykernels (200 ipykernels would need ~20 GiB and minutes
of CPU to start on this machine's two cores): each is its own Python process with pyzmq, named
like a kernel (`python3 fake_kernel.py -f /tmp/runtime/kernel-ID.json`), that writes its
connection file into the container's /tmp, binds IOPub (PUB, publishing a signed 'idle' status
every 10 s) and heartbeat (an echoing REP) on the container's loopback: the daemon finds it in
the host's process table, reads its file through its root, connects from inside its network
namespace and pings it, as it does a real kernel.

Printed (as daemon_bench prints), with the issue's targets:
- discovery: the daemon's "watching kernel" log line (its JSON log's time) after the later of
  the kernel's fork (/proc start time, 10 ms steps) and its connection file's write (its
  mtime, read through its root), p50 / p99 (target p99 <= 1 s): over all kernels with all
  containers started in one stampede (200 Pythons starting on two cores: the daemon waits
  its turn for the CPU), and over --new-kernels kernels started one at a time, each in a new
  pod, once the others are watched and idle (a user starting a kernel on a busy node);
- the daemon's CPU over --idle-seconds with everything watched, as a share of one core
  (target < 1 %);
- the daemon's RSS before any container and with all watched: per kernel (target < 1 MiB
  each plus a fixed base);
- death -> report on disk for --deaths kernels killed by SIGSEGV, one at a time, the report
  found in its pod's directory of the node store, p50 / p99 (target p99 <= 50 ms).

Usage (root, cgroup v1 memory hierarchy, unshare):
  /usr/bin/python3 bench/fleet_bench.py --watchdog build/kernel-watchdog
      [--containers 50] [--per-container 4] [--idle-seconds 30] [--deaths 20]
"""
import argparse
import calendar
import json
import os
import pathlib
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

MiB = 1024 * 1024

FAKE_KERNEL = textwrap.dedent("""\
    import hashlib, hmac, json, os, secrets, sys, time, uuid, zmq
    path = sys.argv[sys.argv.index("-f") + 1]
    ctx = zmq.Context()
    iopub, hb = ctx.socket(zmq.PUB), ctx.socket(zmq.REP)
    iopub_port = iopub.bind_to_random_port("tcp://127.0.0.1")
    hb_port = hb.bind_to_random_port("tcp://127.0.0.1")
    key = secrets.token_hex(16)
    info = {"shell_port": 0, "iopub_port": iopub_port, "stdin_port": 0, "control_port": 0,
            "hb_port": hb_port, "ip": "127.0.0.1", "key": key, "transport": "tcp",
            "signature_scheme": "hmac-sha256", "kernel_name": "python3"}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.chmod(tmp, 0o600)
    os.rename(tmp, path)
    session = uuid.uuid4().hex
    def status(state):
        header = json.dumps({"msg_id": uuid.uuid4().hex, "msg_type": "status", "session": session,
                             "username": "jovyan", "date": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
                             "version": "5.3"}).encode()
        parts = [header, b"{}", b"{}", json.dumps({"execution_state": state}).encode()]
        sig = hmac.new(key.encode(), b"".join(parts), hashlib.sha256).hexdigest().encode()
        iopub.send_multipart([b"kernel.status", b"<IDS|MSG>", sig] + parts)
    poller = zmq.Poller()
    poller.register(hb, zmq.POLLIN)
    last = 0
    while True:
        if time.monotonic() - last > 10:
            status("idle")
            last = time.monotonic()
        if poller.poll(1000):
            hb.send(hb.recv())
""")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def own_memory_cgroup_dir():
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return pathlib.Path("/sys/fs/cgroup/memory" + path)
    raise SystemExit("needs a cgroup v1 memory hierarchy")


def forked_at(pid):
    ticks = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - since_boot


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid):
    return int(pathlib.Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def watched_at(log_path):
    """kernel id -> when the daemon logged that it watches it (epoch seconds)."""
    out = {}
    for line in log_path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("kernel_id") and record.get("message", "").startswith("watching kernel"):
            t = time.strptime(record["time"][:19], "%Y-%m-%dT%H:%M:%S")
            out[record["kernel_id"]] = calendar.timegm(t) + int(record["time"][20:23]) / 1000
    return out


def kill_all_in(cgroup_dir):
    procs = cgroup_dir / "cgroup.procs"
    for _ in range(200):
        pids = [int(p) for p in procs.read_text().split()] if procs.exists() else []
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


class Pod:
    def __init__(self, work, cgroup_base, kubelet, index, kernels):
        self.name = f"jupyter-user{index:03d}"
        self.uid = str(uuid.uuid4())
        self.cid = secrets.token_hex(32)
        self.pod_cgroup = cgroup_base / "kubepods" / "burstable" / f"pod{self.uid}"
        self.cgroup = self.pod_cgroup / self.cid
        self.cgroup.mkdir(parents=True)
        pod_dir = kubelet / "pods" / self.uid
        (pod_dir / "containers" / "notebook").mkdir(parents=True)
        (pod_dir / "etc-hosts").write_text(
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
            f"10.244.{index // 250}.{index % 250 + 2}\t{self.name}\n")
        ns_dir = pod_dir / "volumes" / "kubernetes.io~projected" / "kube-api-access-bench"
        ns_dir.mkdir(parents=True)
        (ns_dir / "namespace").write_text("jhub")
        self.kernel_ids = [str(uuid.uuid4()) for _ in range(kernels)]
        starts = "\n".join(
            f"{sys.executable} {work / 'fake_kernel.py'} -f /tmp/runtime/kernel-{k}.json &"
            for k in self.kernel_ids)
        inner = textwrap.dedent(f"""\
            set -e
            echo 0 > {self.cgroup}/cgroup.procs
            ip link set lo up
            mount -t tmpfs -o mode=1777 tmpfs /tmp
            mkdir /tmp/runtime
            {starts}
            trap '' TERM
            while :; do sleep 3600; done
            """)
        procs = self.pod_cgroup / "cgroup.procs"
        self.outer = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--net", "--fork", "--mount-proc", "sh", "-c", inner],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: procs.write_text(str(os.getpid())))

    def kernel_pids(self):
        """kernel id -> host pid, for the kernels running now."""
        out = {}
        for pid in (int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()):
            try:
                argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            for k in self.kernel_ids:
                if f"/tmp/runtime/kernel-{k}.json".encode() in argv:
                    out[k] = pid
        return out

    def close(self):
        kill_all_in(self.cgroup)
        if self.outer.poll() is None:
            self.outer.kill()
        self.outer.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchdog", default="build/kernel-watchdog")
    ap.add_argument("--containers", type=int, default=50)
    ap.add_argument("--per-container", type=int, default=4)
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--deaths", type=int, default=20)
    ap.add_argument("--new-kernels", type=int, default=20,
                    help="kernels started one at a time once the others are watched and idle")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fleet_bench needs root (cgroups, namespaces, --all-users)")
    watchdog = str(pathlib.Path(args.watchdog).resolve())
    # Not under /tmp: each container mounts its own /tmp, and its kernels run the script.
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-fleet-", dir="/var/tmp"))
    (work / "fake_kernel.py").write_text(FAKE_KERNEL)
    kubelet, reports, runtime = work / "kubelet", work / "reports", work / "runtime"
    runtime.mkdir()
    cgroup_base = own_memory_cgroup_dir() / f"kwd-fleet-{os.getpid()}"
    cgroup_base.mkdir()
    log = work / "daemon.log"
    daemon = subprocess.Popen(
        [watchdog, "daemon", "--all-users", "--kubelet-root", str(kubelet),
         "--report-dir", str(reports), "--status-socket", str(work / "d.sock"),
         "--runtime-dir", str(runtime), "--log-format", "json"],
        stdout=open(work / "daemon.stdout", "w"), stderr=open(log, "w"))
    pods = []
    try:
        time.sleep(1.0)
        base_rss = rss_bytes(daemon.pid)
        for i in range(args.containers):
            pods.append(Pod(work, cgroup_base, kubelet, i, args.per_container))
        total = args.containers * args.per_container
        deadline = time.monotonic() + 300
        while len(watched_at(log)) < total:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(watched_at(log))} of {total} watched")
            time.sleep(0.5)
        seen = watched_at(log)
        latencies = []
        pids = {}
        for pod in pods:
            for k, pid in pod.kernel_pids().items():
                pids[k] = (pod, pid)
                written = os.stat(f"/proc/{pid}/root/tmp/runtime/kernel-{k}.json").st_mtime
                latencies.append((seen[k] - max(forked_at(pid), written)) * 1000)

        time.sleep(5)  # every kernel connected and pinged once
        watched_rss = rss_bytes(daemon.pid)
        before = cpu_seconds(daemon.pid)
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        share = (cpu_seconds(daemon.pid) - before) / (time.monotonic() - t0)

        # A new kernel on a node already watching the others (a user starting one while the
        # rest sit idle): one new pod at a time, each waited for before the next.
        steady = []
        for i in range(args.new_kernels):
            pod = Pod(work, cgroup_base, kubelet, args.containers + i, 1)
            pods.append(pod)
            (k,) = pod.kernel_ids
            deadline = time.monotonic() + 60
            while k not in watched_at(log):
                if time.monotonic() > deadline:
                    raise SystemExit(f"new kernel {k} not watched in 60 s")
                time.sleep(0.1)
            (pid,) = pod.kernel_pids().values()
            written = os.stat(f"/proc/{pid}/root/tmp/runtime/kernel-{k}.json").st_mtime
            steady.append((watched_at(log)[k] - max(forked_at(pid), written)) * 1000)

        death_ms = []
        for k, (pod, pid) in list(pids.items())[:args.deaths]:
            store = reports / "jhub" / pod.name
            t = time.monotonic()
            os.kill(pid, signal.SIGSEGV)
            deadline = t + 10
            while not (store.is_dir() and any(k[:8] in p.name for p in store.glob("*.json"))):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.0005)
            else:
                death_ms.append((time.monotonic() - t) * 1000)
        lines = [json.loads(l) for l in (work / "daemon.stdout").read_text().splitlines() if l]

        print(json.dumps({
            "cores": os.cpu_count(), "containers": args.containers, "kernels": total,
            "kernel": "light stand-in (pyzmq: IOPub PUB + heartbeat REP), not ipykernel",
            "discovery_ms_p50": round(statistics.median(latencies), 1),
            "discovery_ms_p99": round(percentile(latencies, 99), 1),
            "discovered": len(latencies),
            "discovery_new_kernel_ms_p50": round(statistics.median(steady), 1) if steady else None,
            "discovery_new_kernel_ms_p99": round(percentile(steady, 99), 1) if steady else None,
            "daemon_cpu_percent_of_core": round(share * 100, 3),
            "daemon_rss_base_mib": round(base_rss / MiB, 1),
            "daemon_rss_watching_mib": round(watched_rss / MiB, 1),
            "daemon_rss_per_kernel_kib": round((watched_rss - base_rss) / total / 1024, 1),
            "death_to_report_ms_p50": round(statistics.median(death_ms), 1) if death_ms else None,
            "death_to_report_ms_p99": round(percentile(death_ms, 99), 1) if death_ms else None,
            "deaths_reported": len(death_ms),
            "stdout_lines": len(lines),
            "daemon_alive": daemon.poll() is None,
        }, indent=2))
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        for pod in pods:
            pod.close()
        for d in sorted(cgroup_base.rglob("*"), key=lambda p: -len(p.parts)):
            if d.is_dir():
                try:
                    d.rmdir()
                except OSError:
                    pass
        try:
            cgroup_base.rmdir()
        except OSError:
            pass
        if args.keep or sys.exc_info()[0] is not None:
            print(f"kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
