"""`kernel-watchdog daemon --all-users`: the node's daemon of a Kubernetes node, without a
cluster but with the real things a node has.

Each "container" here is made the way a runtime makes one: its own mount, PID and network
namespaces (`unshare`), its own tmpfs /tmp (the kernel's connection file and runtime dir are
there, invisible from the host), its own /dev with the kubelet's termination-log file bound at
/dev/termination-log, its own loopback (the kernel's ports are not reachable from the host's),
and a memory cgroup named the way kubelet and the runtime name one (cgroupfs and systemd
drivers), made below this test's own cgroup in the machine's v1 memory hierarchy. The
kubelet's records that name pods are a directory of the same shape as /var/lib/kubelet/pods
(--kubelet-root). The kernels are Debian's ipykernel; the test's client reaches them from
inside their network namespace (nsenter). A segfault, a container-limit OOM kill and a clean
shutdown each give the right report (or none), with pod and container named, in the node's
store, on the daemon's stdout and in its metrics; the daemon outlives every container."""
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid

import pytest

from conftest import KWD_BINARY, own_memory_cgroup_dir, validate_report

MiB = 1 << 20
LIMIT = 256 * MiB
HERE = pathlib.Path(__file__).resolve().parent
# A package installed in the container alone (on its private /tmp): its native module is a
# copy of a small host library, which ctypes can load.
POD_SITE = "/tmp/env/lib/python3/site-packages"
POD_MODULE = f"{POD_SITE}/podpkg/_native.so"
HOST_LIBZ = next((str(p) for pattern in ("/usr/lib/*-linux-gnu/libz.so.1", "/lib/*-linux-gnu/libz.so.1",
                                           "/usr/lib64/libz.so.1", "/lib64/libz.so.1")
                  for p in sorted(pathlib.Path("/").glob(pattern.lstrip("/")))), None)


def can_make_containers():
    if HOST_LIBZ is None:
        return "needs a libz.so.1 to stand for a package's native module"
    base = own_memory_cgroup_dir()
    if os.geteuid() != 0 or base is None or not base.is_dir():
        return "needs root and a cgroup v1 memory hierarchy"
    for tool in ("unshare", "nsenter", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


pytestmark = pytest.mark.skipif(can_make_containers() is not None,
                                reason=str(can_make_containers()))


def cgroup_names(driver, qos, uid, cid):
    """The pod's and the container's cgroup paths, as kubelet and the runtime name them."""
    if driver == "cgroupfs":
        pod = ["kubepods"] + ([qos] if qos != "guaranteed" else []) + [f"pod{uid}"]
        return pod, pod + [cid]
    under = uid.replace("-", "_")
    if qos == "guaranteed":
        pod = ["kubepods.slice", f"kubepods-pod{under}.slice"]
    else:
        pod = ["kubepods.slice", f"kubepods-{qos}.slice", f"kubepods-{qos}-pod{under}.slice"]
    return pod, pod + [f"cri-containerd-{cid}.scope"]


class Node:
    """This test's piece of a node: its cgroup subtree, kubelet records and report store."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.kubelet = tmp / "kubelet"
        self.reports = tmp / "reports"
        self.cgroup_base = own_memory_cgroup_dir() / f"kwd-node-test-{os.getpid()}-{secrets.token_hex(3)}"
        self.cgroup_base.mkdir()
        self.containers = []

    def container(self, **kw):
        c = Container(self, **kw)
        self.containers.append(c)
        return c

    def close(self):
        for c in self.containers:
            c.close()
        # Leaves first: a cgroup is removed once empty and childless.
        for d in sorted(self.cgroup_base.rglob("*"), key=lambda p: -len(p.parts)):
            if d.is_dir():
                kill_all_in(d)
                try:
                    d.rmdir()
                except OSError:
                    pass
        try:
            self.cgroup_base.rmdir()
        except OSError:
            pass


def kill_all_in(cgroup_dir):
    procs = cgroup_dir / "cgroup.procs"
    for _ in range(100):
        pids = [int(p) for p in procs.read_text().split()] if procs.exists() else []
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


class Container:
    """A pod's container with one ipykernel in it, started the way a runtime would."""

    def __init__(self, node, namespace="jhub", pod="jupyter-alice", name="notebook",
                 driver="cgroupfs", qos="burstable", kernel_is_init=True, limit=None,
                 token_volume=True):
        self.node = node
        self.namespace, self.pod, self.name = namespace, pod, name
        self.uid = str(uuid.uuid4())
        self.cid = secrets.token_hex(32)
        pod_parts, container_parts = cgroup_names(driver, qos, self.uid, self.cid)
        self.pod_cgroup = node.cgroup_base.joinpath(*pod_parts)
        self.cgroup = node.cgroup_base.joinpath(*container_parts)
        self.cgroup.mkdir(parents=True)
        if limit:
            (self.pod_cgroup / "memory.limit_in_bytes").write_text(str(limit + 64 * MiB))
            (self.cgroup / "memory.limit_in_bytes").write_text(str(limit))
            memsw = self.cgroup / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # swap counted too: an OOM kill, not a thrashing kernel
                memsw.write_text(str(limit))
        self.kubelet_records(token_volume)
        self.kernel_id = str(uuid.uuid4())
        self.connection_path = f"/tmp/runtime/kernel-{self.kernel_id}.json"
        self.connection = {
            "shell_port": 50001, "iopub_port": 50002, "stdin_port": 50003,
            "control_port": 50004, "hb_port": 50005, "ip": "127.0.0.1",
            "key": secrets.token_hex(16), "transport": "tcp",
            "signature_scheme": "hmac-sha256", "kernel_name": "python3",
            "jupyter_session": f"/home/jovyan/{pod}.ipynb"}
        self.start(kernel_is_init)

    def kubelet_records(self, token_volume):
        pod_dir = self.node.kubelet / "pods" / self.uid
        (pod_dir / "containers" / self.name).mkdir(parents=True)
        self.termination_log = pod_dir / "containers" / self.name / secrets.token_hex(4)
        self.termination_log.write_text("")
        (pod_dir / "etc-hosts").write_text(
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
            "::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
            f"fe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.244.1.7\t{self.pod}\n")
        if token_volume:
            # The service-account volume's files are links into its current ..data.
            volume = pod_dir / "volumes" / "kubernetes.io~projected" / "kube-api-access-x7k2p"
            data = volume / "..2026_11_28_00_00_00.000000001"
            data.mkdir(parents=True)
            (data / "namespace").write_text(self.namespace)
            (volume / "..data").symlink_to(data.name)
            (volume / "namespace").symlink_to("..data/namespace")

    def start(self, kernel_is_init):
        kernel = (f"exec {sys.executable} -m ipykernel_launcher -f {self.connection_path}"
                  if kernel_is_init else
                  f"{sys.executable} -m ipykernel_launcher -f {self.connection_path} & "
                  "trap '' TERM; while :; do sleep 1; done")
        # What a runtime does before the container's process runs: its cgroup, its /tmp, its
        # /dev (with the termination log bound in), its loopback.
        inner = textwrap.dedent(f"""\
            set -e
            echo 0 > {self.cgroup}/cgroup.procs
            ip link set lo up
            mount -t tmpfs tmpfs /mnt
            mkdir /mnt/hostdev
            mount --bind /dev /mnt/hostdev
            mount -t tmpfs -o mode=755 tmpfs /dev
            for d in null zero random urandom; do
              touch /dev/$d; mount --bind /mnt/hostdev/$d /dev/$d
            done
            umount -l /mnt/hostdev
            mkdir /dev/shm; mount -t tmpfs tmpfs /dev/shm
            ln -s /proc/self/fd /dev/fd
            touch /dev/termination-log
            mount --bind {self.termination_log} /dev/termination-log
            umount -l /mnt
            mount -t tmpfs -o mode=1777 tmpfs /tmp
            mkdir /tmp/runtime
            mkdir -p {POD_SITE}/podpkg {POD_SITE}/podpkg-7.7.7.dist-info
            cp {HOST_LIBZ} {POD_MODULE}
            printf 'Metadata-Version: 2.1\nName: podpkg\nVersion: 7.7.7\n' \
              > {POD_SITE}/podpkg-7.7.7.dist-info/METADATA
            printf '%s' "$KWD_CONNECTION" > {self.connection_path}
            unset KWD_CONNECTION
            export HOME=/tmp JUPYTER_RUNTIME_DIR=/tmp/runtime
            {kernel}
            """)
        env = dict(os.environ, KWD_CONNECTION=json.dumps(self.connection))
        # The runtime's shim stays outside the container's cgroup, in the pod's.
        procs = self.pod_cgroup / "cgroup.procs"
        self.outer = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--net", "--fork", "--mount-proc",
             "sh", "-c", inner],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: procs.write_text(str(os.getpid())))
        self.kernel_pid = self.wait_for_kernel()

    def wait_for_kernel(self, timeout=60):
        """The kernel's pid in the host's table, once its ports answer inside the pod. 60 s, as
        every kernel start of the suite waits (conftest.Watched): a loaded CI machine has
        taken over 30 s; each readiness check ends with the deadline."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            assert self.outer.poll() is None, f"container ended: {self.outer.stderr.read()}"
            for pid in (int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()):
                try:
                    argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if argv[1:3] != [b"-m", b"ipykernel_launcher"]:
                    continue
                seen = pid
                left = max(1.0, min(20.0, deadline - time.monotonic()))
                if self.client(None, pid, timeout=left).get("status") == "ok":
                    return pid
            time.sleep(0.2)
        # Where the kernel was, for whoever reads the failure.
        where = subprocess.run([KWD_BINARY, "stacks", str(seen)], capture_output=True,
                               text=True, timeout=60).stdout if seen else \
            "no ipykernel process in the container's cgroup"
        raise AssertionError(f"the kernel did not start in its container in {timeout} s:\n{where}")

    def client(self, code, pid=None, shutdown=False, timeout=20):
        """Runs `code` in the kernel from inside its network namespace (None: waits until
        it answers); the reply, or {'died': ...} when the kernel died before replying."""
        script = textwrap.dedent("""\
            import json, os, sys, time
            from jupyter_client import BlockingKernelClient
            info = json.loads(sys.stdin.read())
            code, mode, timeout, pid = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
            c = BlockingKernelClient()
            c.load_connection_info(info)
            c.start_channels()
            try:
                if mode == "ready":
                    c.wait_for_ready(timeout=timeout)
                    print(json.dumps({"status": "ok"}))
                elif mode == "shutdown":
                    c.shutdown()
                    reply = c.get_control_msg(timeout=timeout)
                    print(json.dumps({"status": reply["content"].get("status", "sent")}))
                else:
                    msg_id = c.execute(code)
                    deadline = time.monotonic() + timeout
                    out = {"died": "no reply in time"}
                    while time.monotonic() < deadline:
                        if not os.path.exists(f"/proc/{pid}"):
                            out = {"died": "the kernel's process is gone"}
                            break
                        try:
                            reply = c.get_shell_msg(timeout=0.2)
                        except Exception:
                            continue
                        if reply["parent_header"].get("msg_id") == msg_id:
                            out = {"status": reply["content"]["status"]}
                            break
                    print(json.dumps(out))
            except Exception as e:
                print(json.dumps({"died": repr(e)}))
            finally:
                c.stop_channels()
            """)
        pid = pid or self.kernel_pid
        mode = "shutdown" if shutdown else "ready" if code is None else "run"
        proc = subprocess.run(
            ["nsenter", "-t", str(pid), "-n", sys.executable, "-c", script,
             code or "", mode, str(timeout), str(pid)],
            input=json.dumps(self.connection), capture_output=True, text=True,
            timeout=timeout + 20)
        lines = proc.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else {"died": proc.stderr[-2000:]}

    def pod_store(self):
        return self.node.reports / self.namespace / self.pod

    def reports(self):
        store = self.pod_store()
        docs = [json.loads(p.read_text()) for p in sorted(store.glob("*.json"))] \
            if store.is_dir() else []
        for d in docs:
            validate_report(d)
        return [d for d in docs if d["kernel"]["kernel_id"] == self.kernel_id]

    def close(self):
        kill_all_in(self.cgroup)
        if self.outer.poll() is None:
            self.outer.kill()
        self.outer.wait(timeout=10)


class NodeDaemon:
    def __init__(self, node):
        self.node = node
        self.socket = node.tmp / "d.sock"
        runtime = node.tmp / "runtime"  # empty: the node's kernels are found in the table
        runtime.mkdir()
        self.stdout_path = node.tmp / "daemon.stdout"
        self.stderr_path = node.tmp / "daemon.stderr"
        self.proc = subprocess.Popen(
            [KWD_BINARY, "daemon", "--all-users", "--kubelet-root", str(node.kubelet),
             "--report-dir", str(node.reports), "--status-socket", str(self.socket),
             "--runtime-dir", str(runtime), "--metrics-address", "127.0.0.1:0",
             "--scan-interval", "0.5"],
            stdout=open(self.stdout_path, "w"), stderr=open(self.stderr_path, "w"))
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            assert self.proc.poll() is None, self.stderr_path.read_text()
            assert time.monotonic() < deadline, "daemon did not open its socket"
            time.sleep(0.05)

    def status(self):
        out = subprocess.run([KWD_BINARY, "status", "--json", "--status-socket", str(self.socket)],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return json.loads(out)

    def row(self, container, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            for row in self.status()["kernels"]:
                if row["pid"] == container.kernel_pid:
                    return row
            assert time.monotonic() < deadline, \
                f"kernel {container.kernel_pid} not watched: {self.status()}\n" + \
                self.stderr_path.read_text()[-3000:]
            time.sleep(0.1)

    def listening(self, container, timeout=30):
        """The status row once the daemon hears the kernel: a cell run after the daemon
        connected to IOPub (from inside the pod's network namespace) says idle."""
        deadline = time.monotonic() + timeout
        while True:
            row = self.row(container)
            if row["state"] == "idle":
                return row
            container.client("pass")
            assert time.monotonic() < deadline, f"never heard the kernel: {row}\n" + \
                self.stderr_path.read_text()[-3000:]
            time.sleep(0.1)

    def lines(self):
        return [json.loads(l) for l in self.stdout_path.read_text().splitlines() if l.strip()]

    def metrics(self):
        url = self.status()["daemon"]["metrics_url"]
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.close()


@pytest.fixture
def daemon(node):
    d = NodeDaemon(node)
    yield d
    d.stop()


def wait_for(what, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def line_of(daemon, container):
    return wait_for(lambda: next((l for l in daemon.lines()
                                  if l.get("kernel_id") == container.kernel_id), None))


def test_segfault_in_a_pod_is_reported_under_its_pod(node, daemon):
    c = node.container(kernel_is_init=False)  # a container that lives on (its server)
    row = daemon.listening(c)
    k8s = row["kubernetes"]
    assert (k8s["namespace"], k8s["pod"], k8s["container"]) == ("jhub", "jupyter-alice", "notebook")
    assert k8s["pod_uid"] == c.uid and k8s["container_id"] == c.cid
    assert k8s["cgroup_driver"] == "cgroupfs" and k8s["qos_class"] == "Burstable"
    # The path in the kernel's argv is the container's own: the host has no such file.
    assert row["connection_file"] == c.connection_path
    assert not pathlib.Path(c.connection_path).exists()

    # A package of the container's own is loaded, then, after more than a sample interval
    # (the fingerprint reads the kernel's maps at a sample, and IOPub carries the cell out
    # meanwhile), the kernel dies mid-way.
    reply = c.client(f"import ctypes, time\nctypes.CDLL({POD_MODULE!r})\ntime.sleep(1.5)\n"
                     "ctypes.string_at(0)")
    assert "died" in reply
    [report] = wait_for(c.reports)
    assert report["termination"]["signal_name"] == "SIGSEGV"
    assert report["diagnosis"]["cause"] != "oom_killed_cgroup"
    # Heard through the pod's own loopback: the cell that died is known.
    assert "ctypes.string_at(0)" in json.dumps(report.get("execution"))
    assert report["kernel"]["notebook"] == "/home/jovyan/jupyter-alice.ipynb"
    # Its versions come from the container's file system, which the node does not see.
    assert not pathlib.Path(POD_MODULE).exists()
    assert {"name": "podpkg", "version": "7.7.7"} in report["fingerprint"]["other_packages"], \
        report["fingerprint"]
    k8s = report["kubernetes"]
    assert (k8s["namespace"], k8s["pod"], k8s["container"]) == ("jhub", "jupyter-alice", "notebook")
    assert k8s["memory"]["processes_left"] >= 1 and not k8s["memory"]["container_emptied"]
    # The node's store: one private directory per namespace and pod.
    store = c.pod_store()
    assert (store.stat().st_mode & 0o777) == 0o700 and store.stat().st_uid == 0
    assert (store.parent.stat().st_mode & 0o777) == 0o700
    # One JSON line on stdout, with no secret in it.
    line = line_of(daemon, c)
    assert line["event"] == "kernel_death" and line["signal"] == "SIGSEGV"
    assert (line["namespace"], line["pod"], line["container"]) == ("jhub", "jupyter-alice", "notebook")
    assert line["report"].startswith(str(store))
    raw = daemon.stdout_path.read_text()
    assert c.connection["key"] not in raw
    assert all(len(l) < 8192 for l in raw.splitlines())
    # Metrics: the death counted by cause and namespace.
    cause = report["diagnosis"]["cause"]
    wait_for(lambda: f'kernel_watchdog_kernel_deaths_total{{cause="{cause}",namespace="jhub"}} 1'
             in daemon.metrics())
    # The daemon lives on.
    assert daemon.proc.poll() is None


def test_container_oom_kill_names_the_limits_and_the_whole_container(node, daemon):
    c = node.container(namespace="research", pod="jupyter-bob", name="notebook",
                       driver="systemd", qos="burstable", limit=LIMIT)
    row = daemon.listening(c)
    assert row["kubernetes"]["cgroup_driver"] == "systemd"
    assert row["kubernetes"]["pod"] == "jupyter-bob"
    # The kernel's gauges carry its pod (published every 5 s).
    wait_for(lambda: 'namespace="research",pod="jupyter-bob",container="notebook"}' in
             daemon.metrics())

    reply = c.client("blocks = []\nwhile True: blocks.append(bytearray(16 << 20))", timeout=60)
    assert "died" in reply
    [report] = wait_for(c.reports)
    assert report["termination"]["signal_name"] == "SIGKILL"
    assert report["diagnosis"]["cause"] == "oom_killed_cgroup", report["diagnosis"]
    memory = report["kubernetes"]["memory"]
    assert memory["container_limit"] == LIMIT
    assert memory["pod_limit"] == LIMIT + 64 * MiB
    assert memory["oom_kills_after"] > memory["oom_kills_before"]
    assert memory["oom_group"] is None  # cgroup v1 has no group kill...
    # ...but the kernel was the container's first process: with it, everything in it ended.
    assert memory["processes_left"] == 0 and memory["container_emptied"]
    evidence = " | ".join(e["fact"] for e in report["diagnosis"]["evidence"])
    assert "container notebook of pod research/jupyter-bob has a memory limit of 256" in evidence
    assert "the pod's memory limit" in evidence
    assert "no process of the container was left" in evidence
    assert "container notebook of pod research/jupyter-bob" in report["diagnosis"]["headline"]
    line = line_of(daemon, c)
    assert line["cause"] == "oom_killed_cgroup" and line["memory_container_limit"] == LIMIT
    assert line["memory_container_emptied"] is True
    wait_for(lambda: 'kernel_watchdog_kernel_deaths_total{cause="oom_killed_cgroup",'
             'namespace="research"} 1' in daemon.metrics())
    assert daemon.proc.poll() is None


def test_clean_shutdown_gives_no_report_and_names_come_from_the_records_there_are(node, daemon):
    # A pod without a service-account token: no namespace on record; the pod still named.
    quiet = node.container(pod="jupyter-carol", name="notebook", qos="besteffort",
                           driver="systemd", token_volume=False)
    row = daemon.listening(quiet)
    assert row["kubernetes"]["namespace"] is None
    assert row["kubernetes"]["pod"] == "jupyter-carol"
    assert row["kubernetes"]["qos_class"] == "BestEffort"
    reply = quiet.client("", shutdown=True)
    assert reply.get("status") == "ok", reply
    quiet.outer.wait(timeout=20)
    # Its death was handled (gone from the status), and it was asked for: no report, no line.
    wait_for(lambda: all(r["pid"] != quiet.kernel_pid for r in daemon.status()["kernels"]))
    time.sleep(0.5)
    assert quiet.reports() == []
    assert not (node.reports / "_unknown-namespace").exists() or \
        not any((node.reports / "_unknown-namespace").rglob("*.json"))
    assert all(l.get("kernel_id") != quiet.kernel_id for l in daemon.lines())
    # Then a kernel killed outright in a guaranteed pod: reported, the daemon still serving.
    other = node.container(namespace="jhub", pod="jupyter-dave", qos="guaranteed")
    daemon.listening(other)
    os.kill(other.kernel_pid, signal.SIGKILL)
    [report] = wait_for(other.reports)
    assert report["kubernetes"]["qos_class"] == "Guaranteed"
    assert daemon.proc.poll() is None
    assert daemon.status()["daemon"]["pid"] == daemon.proc.pid
