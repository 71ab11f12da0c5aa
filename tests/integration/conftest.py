"""Shared fixtures for the integration tests.

Everything here is real: the kernel-watchdog binary under test, Debian's ipykernel,
jupyter_client's KernelManager launching a wrapped kernelspec from a temporary Jupyter
path, real signals. The binary comes from $KWD_BINARY (set by ctest).
"""
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
from jupyter_client import KernelManager

KWD_BINARY = os.environ.get("KWD_BINARY") or str(
    pathlib.Path(__file__).resolve().parents[2] / "build" / "kernel-watchdog")
KWD_BUILD_DIR = os.environ.get("KWD_BUILD_DIR") or str(pathlib.Path(KWD_BINARY).parent)
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
WRAPPED = "python3-watched"
PLAIN = "python3"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "quiet_machine: asserts what only a machine with nothing else running gives "
        "(the watchdog's own RSS, samples a starved core would miss); tests/CMakeLists.txt runs "
        "a file's such tests as an entry of their own, alone")


def sanitizer_build():
    """Whether the binary under test was built with sanitizers (scripts/sanitize.sh's
    build-asan): its memory is then the sanitizer runtime's as much as its own."""
    cache = pathlib.Path(KWD_BUILD_DIR) / "CMakeCache.txt"
    return cache.exists() and re.search(r"^KWD_SANITIZE:STRING=.+$", cache.read_text(), re.M)


def kwd(*args, env=None, check=True, **kw):
    """Runs the kernel-watchdog CLI and returns the CompletedProcess."""
    proc = subprocess.run([KWD_BINARY, *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=60, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"kernel-watchdog {args} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def load_reports(report_dir):
    """Every finished report in a store, oldest first. Temporaries never count. Each is
    checked against the documented schema when the repo has one."""
    report_dir = pathlib.Path(report_dir)
    if not report_dir.is_dir():
        return []
    docs = []
    for p in sorted(report_dir.glob("*.json")):
        doc = json.loads(p.read_text())
        validate_report(doc)
        docs.append(doc)
    return docs


def validate_report(doc):
    schema_path = REPO_ROOT / "docs" / "report.schema.json"
    if not schema_path.exists():
        return
    import jsonschema
    jsonschema.validate(doc, json.loads(schema_path.read_text()))


class Watched:
    """A kernel started through jupyter_client with a (possibly wrapped) kernelspec."""

    def __init__(self, kernel_name, env, start_kwargs=None, manager_kwargs=None):
        reports = pathlib.Path(env["KERNEL_WATCHDOG_REPORT_DIR"]) \
            if env.get("KERNEL_WATCHDOG_REPORT_DIR") else None
        # A kernel's stderr goes to a file of ours unless the test gives one: where no watchdog
        # writes a report, it is what tells a lost port from a failed start (below). close()
        # passes it on to this test's stderr, where pytest shows it as it would have.
        self._own_stderr = None
        if "stderr" not in (start_kwargs or {}):
            self._own_stderr = tempfile.NamedTemporaryFile(prefix="kernel-stderr-")
            start_kwargs = {**(start_kwargs or {}), "stderr": self._own_stderr}
        sink = (start_kwargs or {}).get("stderr")
        for attempt in range(3):
            before = set(reports.glob("*")) if reports and reports.is_dir() else set()
            self.km = KernelManager(kernel_name=kernel_name, **(manager_kwargs or {}))
            self.km.start_kernel(env=env, **(start_kwargs or {}))
            self.kc = self.km.client()
            self.kc.start_channels()
            try:
                self._wait_until_ready(lambda: self._lost_a_port(reports, before, sink))
                # A kernel that lost only its heartbeat port answers all the same: ipykernel's
                # heartbeat thread dies of the error and the rest runs on (seen in CI: a SIGSTOP
                # test that then waited for a hang its watchdog could not see). Started again.
                if self._lost_a_port(reports, before, sink)[0]:
                    raise RuntimeError("the kernel lost a port at its start")
                break
            except RuntimeError:
                # jupyter_client picks free TCP ports and closes them before the kernel binds
                # them; under parallel tests another process can take one first, and the
                # kernel fails at start with "Address already in use". Its own restarter
                # starts again on new ports (random_ports_until_alive) when the kernel dies of
                # it; so does this, and also when the kernel lives on after the error (ipykernel
                # 6 and 7 wait for ever in their exit when the lost port was not the first they
                # bound), once it is ended and the failed start's crash report (written before
                # the test did anything) is set aside. Anything else, or a third failure, is
                # the test's failure.
                self.kc.stop_channels()
                lost_a_port, new = self._lost_a_port(reports, before, sink)
                if attempt == 2 or not lost_a_port:
                    if self._own_stderr is not None:
                        self._own_stderr.seek(0)
                        sys.stderr.write(self._own_stderr.read().decode(errors="replace"))
                    raise
                if self.km.is_alive():
                    self.km.shutdown_kernel(now=True)
                else:
                    self.km.cleanup_resources()
                for path in new:
                    path.unlink(missing_ok=True)
                # A test's own stderr file held the lost start's traceback: emptied, so that
                # the test sees the stderr of the start it runs on.
                if hasattr(sink, "truncate"):
                    sink.seek(0)
                    sink.truncate()
        # wait_for_ready re-sends kernel_info_request every second until one is answered; on a
        # slow start the extra replies arrive later and would pass for the next request's.
        while True:
            try:
                self.kc.get_shell_msg(timeout=0.3)
            except queue.Empty:
                break

    def _wait_until_ready(self, lost_a_port):
        """wait_for_ready for up to 60 s, giving up early on a kernel that lost a port."""
        deadline = time.monotonic() + 60
        while True:
            try:
                self.kc.wait_for_ready(timeout=min(5, max(deadline - time.monotonic(), 1)))
                return
            except RuntimeError:
                if time.monotonic() >= deadline or not self.km.is_alive() or lost_a_port()[0]:
                    raise

    @staticmethod
    def _lost_a_port(reports, before, sink):
        """Whether this start failed with "Address already in use", told by the crash
        reports written since `before` or by the kernel's stderr file (the only sign where no
        watchdog writes a report); and those new reports."""
        new = sorted(set(reports.glob("*")) - before) if reports and reports.is_dir() else []
        lost = any("Address already in use" in p.read_text(errors="replace")
                   for p in new if p.suffix == ".json")
        if hasattr(sink, "name") and hasattr(sink, "flush"):
            sink.flush()
            lost = lost or "Address already in use" in pathlib.Path(sink.name).read_text(
                errors="replace")
        return lost, new

    @property
    def launcher_pid(self):
        """The pid the kernel manager knows (the watchdog's when wrapped)."""
        return self.km.provisioner.process.pid

    @property
    def kernel_pid(self):
        """The ipykernel process itself."""
        launcher = psutil.Process(self.launcher_pid)
        # The watchdog's own argv names ipykernel_launcher too: look below it first.
        for p in [*launcher.children(recursive=True), launcher]:
            cmd = p.cmdline()
            if "ipykernel_launcher" in cmd and "run" not in cmd[:3]:
                return p.pid
        raise AssertionError("no ipykernel process under the launcher")

    def execute(self, code, timeout=60, **request):
        """Runs a cell; returns (reply content, list of iopub messages for it). `request`
        goes to the execute_request (e.g. stop_on_error=False)."""
        return self._execute(code, timeout, False, request)

    def execute_unless_death(self, code, timeout=60, **request):
        """As execute, or (None, messages so far) once the manager sees the kernel dead."""
        return self._execute(code, timeout, True, request)

    def _execute(self, code, timeout, death_ends, request):
        msg_id = self.kc.execute(code, **request)
        outputs = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"cell did not finish in {timeout}s: {code!r}")
            if death_ends and not self.km.is_alive():
                return None, outputs
            try:
                msg = self.kc.get_iopub_msg(timeout=min(left, 0.5) if death_ends else left)
            except queue.Empty:
                continue
            # A kernel may publish with no parent at all (xeus-python, seen in CI): not the cell's.
            if (msg["parent_header"] or {}).get("msg_id") != msg_id:
                continue
            outputs.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        # Skip replies to other requests (wait_for_ready can leave a kernel_info_reply behind).
        while True:
            reply = self.kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 1))
            if (reply["parent_header"] or {}).get("msg_id") == msg_id:
                return reply["content"], outputs

    def execute_until_death(self, code, timeout=60):
        """Sends a cell that kills the kernel and waits until the manager sees it dead.
        Returns the launcher's return code as the manager sees it."""
        self.kc.execute(code)
        return self.wait_for_death(timeout)

    def wait_for_death(self, timeout=60):
        deadline = time.monotonic() + timeout
        while self.km.is_alive():
            if time.monotonic() > deadline:
                raise AssertionError("kernel did not die")
            time.sleep(0.02)
        return self.km.provisioner.process.returncode

    def close(self):
        try:
            self.kc.stop_channels()
        except Exception:
            pass
        try:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=True)
        except Exception:
            pass
        try:
            self.km.cleanup_resources()
        except Exception:
            pass
        if self._own_stderr is not None and not self._own_stderr.closed:
            self._own_stderr.seek(0)
            sys.stderr.write(self._own_stderr.read().decode(errors="replace"))
            self._own_stderr.close()


def private_jupyter(tmp_path, monkeypatch, specs):
    """A Jupyter path of the test's own holding `specs` ({name: (argv, language)}) as
    kernelspecs, with private data, runtime and report directories set in this process's
    environment. Returns (kernels folder, the environment for kernels: that of this process,
    less pytest's PYTEST_CURRENT_TEST, which ipykernel would otherwise inherit)."""
    kernels = tmp_path / "prefix" / "share" / "jupyter" / "kernels"
    for name, (argv, language) in specs.items():
        (kernels / name).mkdir(parents=True)
        (kernels / name / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": name, "language": language}))
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    for name, value in dict(
            JUPYTER_PATH=str(kernels.parent), JUPYTER_DATA_DIR=str(tmp_path / "data"),
            JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), XDG_RUNTIME_DIR=str(runtime),
            TMPDIR=str(tmp_path), KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "reports")).items():
        monkeypatch.setenv(name, value)
    return kernels, {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    """A private Jupyter path holding a wrapped copy of Debian's python3 kernelspec, a
    private report store, and an environment for kernels that uses them."""
    prefix = tmp_path / "prefix"
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    # The watchdog's private runtime files (shim, death notices) stay in the test's own dir.
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    report_dir = tmp_path / "reports"
    monkeypatch.setenv("KERNEL_WATCHDOG_REPORT_DIR", str(report_dir))
    if sys.executable != "/usr/bin/python3":
        # Another Jupyter stack (PyPI's, in the framework virtualenv): its own interpreter is
        # the python3 kernel, as jupyter_client's native kernelspec says, for the wrapped copy too.
        spec = prefix / "share" / "jupyter" / "kernels" / PLAIN
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}))
    kwd("kernelspec", "wrap", PLAIN, "--prefix", prefix, "--name", WRAPPED)
    env = dict(os.environ)
    return {"tmp": tmp_path, "prefix": prefix, "report_dir": report_dir, "env": env}


@pytest.fixture
def start_kernel(jupyter_env):
    """start_kernel(name=WRAPPED, env_overrides=None, manager_kwargs=None, **start_kwargs)
    -> Watched; shut down at teardown. manager_kwargs go to KernelManager (transport="ipc")."""
    started = []

    def _start(name=WRAPPED, env_overrides=None, manager_kwargs=None, **start_kwargs):
        env = dict(jupyter_env["env"])
        env.update(env_overrides or {})
        k = Watched(name, env, start_kwargs, manager_kwargs)
        started.append(k)
        return k

    yield _start
    for k in started:
        k.close()


def wrap_kernelspec(jupyter_env, name, *run_options):
    """Another wrapped copy of Debian's python3 kernelspec in the test's Jupyter path, whose
    argv passes `run_options` to `kernel-watchdog run` (e.g. "--memory-limit=300M")."""
    kwd("kernelspec", "wrap", PLAIN, "--prefix", jupyter_env["prefix"], "--name", name,
        *[f"--run-option={o}" for o in run_options])
    return name


def own_memory_cgroup_dir():
    """The test process's own cgroup v1 memory directory; None without a v1 memory hierarchy."""
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return pathlib.Path("/sys/fs/cgroup/memory" + path)
    return None


def process_rss(pid):
    """Resident set size of one process, in bytes, from /proc (what `ps` shows)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def intervals(log):
    """{notebook: (start, end)} from a log of "NAME start T" and "NAME end T" lines, of the
    runs that reached their end (a stopped run has none)."""
    starts, out = {}, {}
    for line in pathlib.Path(log).read_text().splitlines():
        name, what, t = line.split()
        if what == "start":
            starts[name] = float(t)
        else:
            out[name] = (starts[name], float(t))
    return out


def overlaps(a, b):
    """Whether two (start, end) intervals share a moment."""
    return a[0] < b[1] and b[0] < a[1]
