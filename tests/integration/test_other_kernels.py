"""Kernels that are not IPython: Debian's IRkernel (R) and xeus-python (PyPI, in
.cache/venv-xeus; scripts/setup.sh makes it), under `run` (a wrapped kernelspec started by
Debian's jupyter_client), the daemon and `smoke`: a segfault, a cgroup OOM kill and a clean
shutdown each.

What the reports must hold there: the signal (xeus-python's own handler turns a segfault into
exit code 1: the report says what it was), the cell's code from IOPub, memory, the kernel's
language and R's packages, what cannot be known (no faulthandler in R), and remedies for the
kernel's language."""
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import nbformat
import psutil
import pytest

from conftest import KWD_BINARY, REPO_ROOT, Watched, kwd, load_reports, private_jupyter

XEUS_PYTHON = REPO_ROOT / ".cache" / "venv-xeus" / "bin" / "python3"
IR_ARGV = ["R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"]

KERNELS = {
    "ir": {
        "argv": IR_ARGV,
        "language": "R",
        # A SIGSEGV, caught by R's handler ("*** caught segfault ***"), which a non-interactive
        # R (a kernel) then ends with by the same signal. Sent with kill: a fault made in native
        # code from R (memset through .C) also wrecks the heap first, and R's handler then
        # aborts in malloc about as often as it re-raises (both seen here); the recorded
        # fixture tests/fixtures/diagnosis/recorded_r_segfault.json is such a real fault.
        "crash": "Sys.sleep(0.5)\ntools::pskill(Sys.getpid(), 11L)",
        "crash_marker": "tools::pskill(Sys.getpid(), 11L)",
        # Each rnorm(2e6) is 16 MB of pages written.
        "grow": "held <- list()\nrepeat held[[length(held) + 1]] <- rnorm(2e6)",
        "cell": "cat(6 * 7)",
    },
    "xpython": {
        "argv": [str(XEUS_PYTHON), "-m", "xpython_launcher", "-f", "{connection_file}"],
        "language": "python",
        "crash": "import ctypes, time\ntime.sleep(0.5)\nctypes.string_at(0)",
        "crash_marker": "ctypes.string_at(0)",
        "grow": "held = []\nwhile True:\n    held.append(b'x' * (16 * 1024 * 1024))\n",
        "cell": "print(6 * 7)",
    },
}
# Advice that only fits a Python kernel.
PYTHON_ADVICE = re.compile(r"faulthandler|python -X|pandas|numpy|sys\.exit|\bpip\b|torch|tf\.",
                           re.I)


@pytest.fixture(scope="module", autouse=True)
def kernels_present():
    missing = []
    if not pathlib.Path("/usr/share/jupyter/kernels/ir/kernel.json").exists():
        missing.append("Debian's r-cran-irkernel")
    if not XEUS_PYTHON.exists():
        missing.append(f"{XEUS_PYTHON}")
    assert not missing, f"{', '.join(missing)} missing: scripts/setup.sh installs them"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A private Jupyter path with each kernel's spec ("ir", "xpython"), its wrapped copy
    ("<name>-watched") and a wrapped copy with a 250 MB memory limit ("<name>-limited")."""
    _, env = private_jupyter(tmp_path, monkeypatch, {
        name: (kernel["argv"], kernel["language"]) for name, kernel in KERNELS.items()})
    for name in KERNELS:
        kwd("kernelspec", "wrap", name, "--prefix", tmp_path / "prefix", "--name",
            f"{name}-watched", env=env)
        kwd("kernelspec", "wrap", name, "--prefix", tmp_path / "prefix", "--name",
            f"{name}-limited", "--run-option=--memory-limit=250M", env=env)
    started = []

    def start(kernel_name, stderr=None):
        k = Watched(kernel_name, env, {"stderr": stderr} if stderr is not None else None)
        started.append(k)
        return k

    yield {"start": start, "env": env, "tmp": tmp_path, "reports": tmp_path / "reports",
           "runtime": tmp_path / "runtime"}
    for k in started:
        k.close()


def only_report(reports):
    found = load_reports(reports)
    assert len(found) == 1, [r["diagnosis"]["headline"] for r in found]
    return found[0]


def assert_advice_fits(report, language):
    remedies = " ".join(r["text"] + " " + r["why"] for r in report["diagnosis"]["remedies"])
    if language == "R":
        assert not PYTHON_ADVICE.search(remedies), report["diagnosis"]["remedies"]


def r_version():
    return subprocess.run(["Rscript", "-e", "cat(as.character(getRversion()))"],
                          capture_output=True, text=True, check=True).stdout.strip()


# --- under `run` -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_clean_shutdown_writes_no_report_and_leaves_stderr_as_it_was(world, name):
    texts = {}
    for kernel_name in (name, f"{name}-watched"):
        path = world["tmp"] / f"stderr-{kernel_name}.txt"
        with open(path, "wb") as sink:
            k = world["start"](kernel_name, stderr=sink)
            reply, outputs = k.execute(KERNELS[name]["cell"])
            assert reply["status"] == "ok", reply
            assert any(m["msg_type"] == "stream" and "42" in m["content"]["text"]
                       for m in outputs), outputs
            k.km.shutdown_kernel()
            k.close()
        # xeus-python prints its connection file's path, which differs from run to run.
        texts[kernel_name] = re.sub(r"\S+\.json", "<connection file>",
                                    path.read_text(errors="replace"))
    assert "kernel-watchdog" not in texts[f"{name}-watched"], texts
    assert texts[f"{name}-watched"] == texts[name]
    assert not load_reports(world["reports"])


def test_an_r_segfault_is_named_with_rs_message_its_cell_and_memory(world):
    k = world["start"]("ir-watched")
    reply, _ = k.execute("x <- 1")
    assert reply["status"] == "ok"
    assert k.execute_until_death(KERNELS["ir"]["crash"]) == -signal.SIGSEGV
    report = only_report(world["reports"])
    d = report["diagnosis"]
    assert d["cause"] == "native_crash", d
    assert d["headline"].startswith("Native crash: SIGSEGV") and "cell [2]" in d["headline"], d
    # R's own crash message is the evidence it is (address and cause).
    facts = " ".join(e["fact"] for e in d["evidence"])
    assert "r.caught_fatal_signal" in facts and "r.fault_address" in facts, facts
    # The cell, from IOPub (IRkernel announces it there; there is no shim in R).
    cell = report["execution"]["cell_in_flight"]
    assert cell and KERNELS["ir"]["crash_marker"] in cell["code"], report["execution"]
    assert report["memory"]["peak"]["rss"] > 20 * 1024 * 1024
    # What it cannot know, said as such; no Python stack guessed at.
    assert report["python_traceback"] is None
    [missing] = [m for m in d["missing"] if m.startswith("python_traceback")]
    assert "an R kernel" in missing, missing
    fp = report["fingerprint"]
    assert fp["language"] == "R" and fp["python"] is None, fp
    assert fp["r"]["version"] == r_version() and fp["r"]["home"] == "/usr/lib/R", fp["r"]
    assert fp["r"]["executable"].endswith("/bin/exec/R"), fp["r"]
    packages = {p["name"]: p for p in fp["r"]["packages_with_native_code"]}
    # IRkernel's ZeroMQ binding, with its version from its DESCRIPTION.
    assert "pbdZMQ" in packages and re.match(r"\d+\.\d+", packages["pbdZMQ"]["version"]), packages
    assert_advice_fits(report, "R")
    ids = [r["id"] for r in d["remedies"]]
    assert "native.traceback" in ids and "native.matching_builds" in ids, ids
    [builds] = [r for r in d["remedies"] if r["id"] == "native.matching_builds"]
    assert "pbdZMQ" in builds["why"] and "update.packages" in builds["text"], builds


def test_a_xeus_python_segfault_its_handler_turns_into_an_exit_is_named_as_one(world):
    k = world["start"]("xpython-watched")
    assert k.execute_until_death(KERNELS["xpython"]["crash"]) == 1
    report = only_report(world["reports"])
    assert report["termination"]["exit_code"] == 1
    d = report["diagnosis"]
    assert d["cause"] == "native_crash", d
    assert d["headline"].startswith("Native crash: SIGSEGV"), d["headline"]
    assert "caught by the kernel's own handler, which exited with code 1" in d["headline"], d
    # The first frame of its native stack outside libc and the interpreter: ctypes' module.
    assert " in _ctypes" in d["headline"], d["headline"]
    assert "cell [1]" in d["headline"], d["headline"]
    cell = report["execution"]["cell_in_flight"]
    assert cell and KERNELS["xpython"]["crash_marker"] in cell["code"], report["execution"]
    # The shim ran (xeus-python is a CPython), but xeus-python's handler replaced
    # faulthandler's: said, not guessed.
    assert report["watchdog"]["python_shim"]["ran"] is True
    assert any("replaced faulthandler" in m for m in d["missing"]), d["missing"]
    assert report["fingerprint"]["language"] == "python"
    assert "exit.error_before_exit" not in [r["id"] for r in d["remedies"]], d["remedies"]


def test_a_long_r_cell_is_no_hang_but_a_stopped_r_kernel_is_one(world):
    """IRkernel answers heartbeats from R's one thread, between cells: eight seconds of a
    running cell are eight missed heartbeats, and no hang. Stopped (SIGSTOP) while a cell
    runs, it is one: a stopped process answers nothing, busy or not."""
    k = world["start"]("ir-watched")
    reply, _ = k.execute("Sys.sleep(8)\ncat('slept')", timeout=60)
    assert reply["status"] == "ok"
    assert not load_reports(world["reports"])
    k.kc.execute("Sys.sleep(60)")
    [kernel] = psutil.Process(k.launcher_pid).children()
    time.sleep(1)
    kernel.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        while not load_reports(world["reports"]):
            assert time.monotonic() < deadline, "no hang report for a stopped kernel"
            time.sleep(0.2)
    finally:
        kernel.send_signal(signal.SIGCONT)
    report = only_report(world["reports"])
    assert report["kind"] == "hang" and report["diagnosis"]["cause"] == "hang", report["diagnosis"]
    assert report["heartbeat"]["answered_while_busy"] is False
    assert report["hang"]["process_state"].startswith("T"), report["hang"]
    assert report["execution"]["cell_in_flight"]["code"] == "Sys.sleep(60)"


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_cgroup_oom_kill_is_named_with_advice_for_the_language(world, name):
    k = world["start"](f"{name}-limited")
    assert k.execute_until_death(KERNELS[name]["grow"], timeout=120) == -signal.SIGKILL
    report = only_report(world["reports"])
    d = report["diagnosis"]
    assert d["cause"] == "oom_killed_cgroup", d["headline"]
    assert "250.0 MiB" in d["headline"], d["headline"]
    assert report["memory"]["peak"]["rss"] > 150 * 1024 * 1024
    assert_advice_fits(report, KERNELS[name]["language"])
    if name == "ir":
        [working_set] = [r for r in d["remedies"] if r["id"] == "oom.smaller_working_set"]
        assert "rm()" in working_set["text"], working_set


# --- under the daemon ------------------------------------------------------------------------

def start_daemon(world):
    """The daemon over the world's runtime dir, and a function that waits until it watches a
    kernel."""
    socket_path = world["tmp"] / "d.sock"
    daemon = subprocess.Popen(
        [KWD_BINARY, "daemon", "--runtime-dir", str(world["runtime"]), "--report-dir",
         str(world["reports"]), "--status-socket", str(socket_path), "--sample-rate", "10"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def watched(k):
        deadline = time.monotonic() + 15
        while True:
            rows = []
            if socket_path.exists():
                rows = json.loads(kwd("status", "--json", "--status-socket",
                                      socket_path).stdout)["kernels"]
            if any(r["connection_file"] == k.km.connection_file for r in rows):
                return
            assert daemon.poll() is None and time.monotonic() < deadline, rows
            time.sleep(0.1)

    return daemon, watched


def stop_daemon(daemon):
    """Stops the daemon; returns its log, also printed (pytest shows it when the test fails)."""
    daemon.send_signal(signal.SIGTERM)
    log = daemon.communicate(timeout=10)[0]
    print(log)
    return log


def a_watched_kernel_that_ran_a_cell(world, watched, name):
    """A kernel the daemon watches, once it has run the language's plain cell."""
    k = world["start"](name)
    watched(k)
    reply, _ = k.execute(KERNELS[name]["cell"])
    assert reply["status"] == "ok"
    return k


def reports_of(world, k):
    """The daemon's reports on kernel k. The daemon watches every kernel on the machine, and
    other tests' kernels run and die beside this test's: only k's are this test's business."""
    kernel_id = pathlib.Path(k.km.connection_file).stem.removeprefix("kernel-")
    return [r for r in load_reports(world["reports"])
            if r.get("kernel", {}).get("kernel_id") == kernel_id]


def the_report_of(world, k, not_of=None):
    """The one report on kernel k, and none on kernel not_of."""
    deadline = time.monotonic() + 15
    while not reports_of(world, k):
        assert time.monotonic() < deadline, "no report from the daemon"
        time.sleep(0.1)
    # A second report, were one due, would be in by now (the daemon waits 1.5 s at most for a
    # manager's clean-up before it reports a death by a signal).
    time.sleep(2)
    assert not_of is None or not reports_of(world, not_of), \
        [r["diagnosis"]["headline"] for r in reports_of(world, not_of)]
    (report,) = reports_of(world, k)
    return report


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_daemon_finds_the_kernel_reports_its_death_and_not_a_clean_shutdown(world, name):
    daemon, watched = start_daemon(world)
    try:
        # One shut down as a front end does: no report.
        calm = a_watched_kernel_that_ran_a_cell(world, watched, name)
        calm.km.shutdown_kernel()
        k = a_watched_kernel_that_ran_a_cell(world, watched, name)
        k.execute_until_death(KERNELS[name]["crash"])
        report = the_report_of(world, k, not_of=calm)
    finally:
        log = stop_daemon(daemon)
    assert report["watchdog"]["mode"] == "daemon", log
    d = report["diagnosis"]
    if name == "xpython":
        # The daemon is not the kernel's parent and never sees its stderr, where xeus-python's
        # handler told of the signal: what it knows is an exit with code 1 during the cell.
        assert d["cause"] == "exited_with_error" and "code 1" in d["headline"], d
        assert "cell [2]" in d["headline"], d
    else:
        assert d["cause"] == "native_crash" and "cell [2]" in d["headline"], d
    assert KERNELS[name]["crash_marker"] in report["execution"]["cell_in_flight"]["code"]
    assert report["fingerprint"]["language"] == KERNELS[name]["language"]
    assert_advice_fits(report, KERNELS[name]["language"])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_daemon_takes_a_managers_kill_for_a_shutdown_and_an_outsiders_for_a_death(world,
                                                                                     name):
    """jupyter_client kills a kernel that is slow to stop (SIGTERM, then SIGKILL), or at once
    (shutdown_kernel(now=True)); IRkernel publishes no shutdown_reply, and the daemon, outside
    the kernel's process group, sees no signal sent. The manager deleting the connection file
    with the process is what tells it from a kill by anyone else, which is a death to report."""
    daemon, watched = start_daemon(world)
    try:
        stopped = a_watched_kernel_that_ran_a_cell(world, watched, name)
        stopped.km.shutdown_kernel(now=True)
        assert not pathlib.Path(stopped.km.connection_file).exists()
        killed = a_watched_kernel_that_ran_a_cell(world, watched, name)
        os.kill(killed.launcher_pid, signal.SIGKILL)
        killed.wait_for_death()
        report = the_report_of(world, killed, not_of=stopped)
    finally:
        log = stop_daemon(daemon)
    assert report["termination"]["signal_name"] == "SIGKILL", (report["termination"], log)
    # The stopped kernel ended without a report: by its manager's signal, or of itself (an
    # exit of 0) when the interrupt before the kill did that first.
    # Other tests' kernels run beside this one, and the daemon watches them too: the stopped
    # kernel's line is the one with its id.
    stopped_id = pathlib.Path(stopped.km.connection_file).stem.removeprefix("kernel-")
    stopped_pid = re.search(rf"watching kernel {re.escape(stopped_id)} \(pid (\d+)", log).group(1)
    assert re.search(rf"\(pid {stopped_pid}\) .*\((stopped by its manager: its connection file "
                     rf"went with it|requested)\); no report", log), log


def test_a_death_whose_report_waits_is_reported_when_the_daemon_stops(world):
    """A death by SIGKILL waits for the manager's clean-up before its report; a daemon stopped
    meanwhile reports it on its way out."""
    daemon, watched = start_daemon(world)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(daemon.stdout), daemon=True)
    reader.start()
    try:
        killed = world["start"]("ir")
        watched(killed)
        os.kill(killed.launcher_pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while not any("waits up to" in line for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.02)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
        reader.join(timeout=10)
    (report,) = reports_of(world, killed)
    assert report["termination"]["signal_name"] == "SIGKILL", "".join(lines)


# --- under smoke -----------------------------------------------------------------------------

def write_notebook(path, kernel, language, cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": language}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))
    return path


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_smoke_runs_the_kernel_and_names_its_crash(world, name):
    kernel = KERNELS[name]
    passes = write_notebook(world["tmp"] / f"{name}-passes.ipynb", name, kernel["language"],
                            [kernel["cell"]])
    crashes = write_notebook(world["tmp"] / f"{name}-crashes.ipynb", name, kernel["language"],
                             [kernel["cell"], kernel["crash"]])
    grows = write_notebook(world["tmp"] / f"{name}-grows.ipynb", name, kernel["language"],
                           [kernel["cell"], kernel["grow"]])
    out = world["tmp"] / "out"
    proc = subprocess.run([KWD_BINARY, "smoke", "--memory-limit", "250M", "--output-dir",
                           str(out), str(passes), str(crashes), str(grows)],
                          capture_output=True, text=True, timeout=240, cwd=world["tmp"],
                          env=world["env"])
    # 2: a kernel died (1 would be a cell's error).
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(r"(?m)^PASS .*-passes\.ipynb", proc.stdout), proc.stdout
    assert re.search(r"(?m)^ *DIED .*-crashes\.ipynb", proc.stdout), proc.stdout
    executed = nbformat.read(str(out / f"{name}-passes.ipynb"), as_version=4)
    assert "42" in json.dumps(executed.cells[0].outputs), executed.cells[0].outputs
    printed = proc.stdout + proc.stderr
    assert "Native crash: SIGSEGV" in printed, printed
    assert re.search(r"(?m)^ *DIED .*-grows\.ipynb", proc.stdout), proc.stdout
    reports = {r["diagnosis"]["cause"]: r for r in load_reports(out / "reports")}
    assert sorted(reports) == ["native_crash", "oom_killed_cgroup"], sorted(reports)
    for report in reports.values():
        assert report["watchdog"]["mode"] == "smoke"
        assert_advice_fits(report, kernel["language"])
    assert kernel["crash_marker"] in reports["native_crash"]["execution"]["cell_in_flight"]["code"]
    oom = reports["oom_killed_cgroup"]
    assert oom["cgroup"]["created_by_watchdog"] is True, oom["cgroup"]
    left = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
            if any(str(world["tmp"]) in a for a in (p.info["cmdline"] or []))]
    assert not left, left
