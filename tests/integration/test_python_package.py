"""The Python package (python/kernel_watchdog): the shim that execs the program, the kernel
provisioner under real notebook runners (nbclient, papermill, nbmake, nbval, pytest-xdist
from PyPI) and the pytest plugin, with real kernels dying: a segfault, an abort and an OOM
kill under `--memory-limit`, beside a notebook that passes.

The package is built here as a wheel without its C++ (scikit-build-core's wheel.cmake=false:
the program under test is $KWD_BINARY, named by KERNEL_WATCHDOG_BINARY) and installed with
`pip --target` into the test's own folder, so its entry points are found as an installed
wheel's are. With $KWD_WHEEL (a wheel `pip wheel .` built, program inside) that wheel is
installed instead, and the package finds its own program. The runners are the framework virtualenv's (scripts/setup.sh); without it these
tests fail: run scripts/setup.sh."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

from conftest import KWD_BINARY, REPO_ROOT, load_reports
from framework_corpus import VENV_PYTHON

PROVISIONER = "kernel-watchdog-provisioner"
WHEEL = os.environ.get("KWD_WHEEL")

# What each notebook's kernel does, and the cause its report must state (None: it passes).
NOTEBOOKS = {
    "passes": (["x = 21", "assert x * 2 == 42"], None),
    "segfault": (["x = 1", "import ctypes\nctypes.string_at(0)"], "native_crash"),
    "abort": (["import os", "os.abort()"], "abort"),
    "oom": (["held = []", "while True:\n    held.append(bytearray(32 * 1024 * 1024))"],
            "oom_killed_cgroup"),
}
DEATHS = sorted(name for name, (_, cause) in NOTEBOOKS.items() if cause)
# Every kernel of a runner gets this limit: far above what a passing kernel uses.
RUN_OPTIONS = "--memory-limit=300M"


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """The package installed into a folder of its own; returns that folder."""
    if WHEEL:
        wheel = WHEEL
    else:
        wheels = tmp_path_factory.mktemp("wheel")
        subprocess.run([str(VENV_PYTHON), "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "--config-settings=wheel.cmake=false",
                        "-w", str(wheels), str(REPO_ROOT)], check=True, timeout=300)
        [wheel] = wheels.glob("kernel_watchdog-*.whl")
    site = tmp_path_factory.mktemp("site")
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(site), str(wheel)], check=True, timeout=300)
    return site


@pytest.fixture
def env(tmp_path, package):
    """An environment for the runners: the package importable, a private Jupyter path whose
    python3 kernel is the virtualenv's interpreter, a private report store."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(VENV_PYTHON), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    e = dict(os.environ)
    for name in ("GITHUB_ACTIONS", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER",
                 "JUPYTER_DEFAULT_PROVISIONER_NAME", "KERNEL_WATCHDOG_RUN_OPTIONS"):
        e.pop(name, None)
    e.pop("KERNEL_WATCHDOG_BINARY", None)
    if not WHEEL:
        e["KERNEL_WATCHDOG_BINARY"] = KWD_BINARY
    e.update(PYTHONPATH=str(package),
             JUPYTER_PATH=str(tmp_path / "jupyter"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
             JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), XDG_RUNTIME_DIR=str(runtime),
             TMPDIR=str(tmp_path), KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "reports"))
    return e


def write_notebooks(folder, names=NOTEBOOKS):
    folder.mkdir(exist_ok=True)
    for name in names:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(code) for code in NOTEBOOKS[name][0]]
        nbformat.write(nb, str(folder / f"{name}.ipynb"))
    return folder


def run(argv, env, cwd, timeout=300):
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def reports_under(folder):
    """Every report in a folder and the folders below it (the plugin makes one per file)."""
    return [doc for sub in [folder, *[p for p in folder.rglob("*") if p.is_dir()]]
            for doc in load_reports(sub)] if folder.exists() else []


def program(env):
    """The program under test: $KWD_BINARY, or the one $KWD_WHEEL carries, which pip --target
    puts in TARGET/bin (the scripts scheme)."""
    return str(Path(env["PYTHONPATH"]) / "bin" / "kernel-watchdog") if WHEEL else KWD_BINARY


# --- the shim -------------------------------------------------------------------------


def test_python_m_runs_the_program_in_its_place(env, tmp_path):
    version = run([str(VENV_PYTHON), "-m", "kernel_watchdog", "--version"], env, tmp_path)
    assert version.returncode == 0 and version.stdout == run([program(env), "--version"], env,
                                                             tmp_path).stdout
    # exec, not a child: the program's own end (here a mirrored SIGKILL) is the caller's.
    killed = run([str(VENV_PYTHON), "-m", "kernel_watchdog", "run", "--", sys.executable, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], env, tmp_path)
    assert killed.returncode == -9, killed.stderr
    usage = run([str(VENV_PYTHON), "-m", "kernel_watchdog", "no-such-command"], env, tmp_path)
    assert usage.returncode == run([program(env), "no-such-command"], env, tmp_path).returncode != 0


def foreign_program(folder):
    """An executable this machine cannot run (as a wheel for another architecture would be)."""
    foreign = folder / "kernel-watchdog"
    foreign.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 57)
    foreign.chmod(0o755)
    return foreign


def test_a_program_that_cannot_run_is_said_in_one_line(env, tmp_path):
    foreign = foreign_program(tmp_path)
    for binary, words in ((str(foreign), "cannot run on this machine"),
                          (str(tmp_path / "missing"), "not an executable file")):
        proc = run([str(VENV_PYTHON), "-m", "kernel_watchdog", "--version"],
                   {**env, "KERNEL_WATCHDOG_BINARY": binary}, tmp_path)
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr


# --- the provisioner ------------------------------------------------------------------

NBCLIENT_SCRIPT = """
import sys, nbformat, nbclient
nb = nbformat.read(sys.argv[1], as_version=4)
try:
    nbclient.NotebookClient(nb, timeout=120).execute()
except nbclient.exceptions.DeadKernelError as e:
    print("runner: dead kernel:", e); sys.exit(3)
print("runner: passed")
"""


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_nbclient_with_the_provisioner_as_default(env, tmp_path, name):
    notebooks = write_notebooks(tmp_path / "nb", [name])
    proc = run([str(VENV_PYTHON), "-c", NBCLIENT_SCRIPT, str(notebooks / f"{name}.ipynb")],
               {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER,
                "KERNEL_WATCHDOG_RUN_OPTIONS": RUN_OPTIONS}, tmp_path)
    reports = load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])
    cause = NOTEBOOKS[name][1]
    if cause is None:
        assert proc.returncode == 0 and not reports, proc.stdout + proc.stderr
        return
    assert proc.returncode == 3, proc.stdout + proc.stderr
    [report] = reports
    assert report["diagnosis"]["cause"] == cause
    [line] = [l for l in proc.stderr.splitlines() if l.startswith("kernel-watchdog: the kernel died")]
    assert report["diagnosis"]["headline"] in line and report["id"] in line


def test_papermill_log_names_the_cause_and_report(env, tmp_path):
    notebooks = write_notebooks(tmp_path / "nb", ["oom", "passes"])
    e = {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER,
         "KERNEL_WATCHDOG_RUN_OPTIONS": RUN_OPTIONS}
    papermill = [str(VENV_PYTHON), "-m", "papermill", "--no-progress-bar"]
    passed = run([*papermill, str(notebooks / "passes.ipynb"), str(tmp_path / "p.ipynb")], e,
                 tmp_path)
    assert passed.returncode == 0, passed.stderr
    died = run([*papermill, str(notebooks / "oom.ipynb"), str(tmp_path / "o.ipynb")], e, tmp_path)
    assert died.returncode != 0
    [report] = load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])
    assert report["diagnosis"]["cause"] == "oom_killed_cgroup"
    assert f"the kernel died: {report['diagnosis']['headline']}" in died.stderr
    assert report["id"] in died.stderr


LIFECYCLE_SCRIPT = """
import queue, sys, time
from jupyter_client import KernelManager
km = KernelManager(kernel_name="python3")
km.start_kernel()
print("argv", km.provisioner.process.args[:2], flush=True)
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)
def run(code, timeout=60):
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]
msg_id = kc.execute("import time; time.sleep(60)")
time.sleep(1)
km.interrupt_kernel()
while True:
    reply = kc.get_shell_msg(timeout=30)
    if reply["parent_header"].get("msg_id") == msg_id:
        break
print("interrupted", reply["content"].get("ename"), flush=True)
km.restart_kernel(now=False)
kc.wait_for_ready(timeout=60)
print("after restart", run("print(1)")["status"], km.is_alive(), flush=True)
km.restart_kernel(now=True)
kc.wait_for_ready(timeout=60)
print("after kill-restart", run("print(2)")["status"], flush=True)
kc.stop_channels()
km.shutdown_kernel(now=False)
print("after shutdown", km.is_alive(), flush=True)
"""


def test_interrupt_restart_shutdown_as_local_provisioner(env, tmp_path):
    proc = run([str(VENV_PYTHON), "-c", LIFECYCLE_SCRIPT],
               {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER}, tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert f"argv ['{program(env)}', 'run']" in out
    assert "interrupted KeyboardInterrupt" in out
    assert "after restart ok True" in out and "after kill-restart ok" in out
    assert "after shutdown False" in out
    # Every end here was asked for: no report, and no death line.
    assert not load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])
    assert "the kernel died" not in proc.stderr


@pytest.mark.parametrize("program", ["missing", "foreign"])
def test_without_a_program_that_runs_the_kernel_starts_unwatched(env, tmp_path, program):
    notebooks = write_notebooks(tmp_path / "nb", ["passes"])
    binary = tmp_path / "gone" if program == "missing" else foreign_program(tmp_path)
    proc = run([str(VENV_PYTHON), "-c", NBCLIENT_SCRIPT, str(notebooks / "passes.ipynb")],
               {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER,
                "KERNEL_WATCHDOG_BINARY": str(binary)}, tmp_path)
    assert proc.returncode == 0 and "runner: passed" in proc.stdout, proc.stderr
    assert "kernel-watchdog: starting the kernel unwatched" in proc.stderr


# --- the pytest plugin ----------------------------------------------------------------


def pytest_run(env, cwd, *args):
    return run([str(VENV_PYTHON), "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                "--kernel-watchdog", f"--kernel-watchdog-run-options={RUN_OPTIONS}",
                f"--kernel-watchdog-report-dir={cwd / 'reports'}", "--junitxml=junit.xml",
                *args], env, cwd, timeout=600)


def junit_cases(path):
    """JUnit's test cases by "classname::name" (nbmake: "NB.ipynb::NB.ipynb"; nbval: "NB.ipynb::Cell N")."""
    return {f"{case.get('classname')}::{case.get('name')}": case
            for case in ET.parse(path).iter("testcase")}


def check_notebook_failures(proc, cwd, case_name):
    """Each death failed its test with cause, cell, peak memory and report path, in the text
    and in JUnit; the passing notebook passed; one report per death, each in its test's own
    folder."""
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "PASSED passes.ipynb" in output or "passed" in output.splitlines()[-1]
    cases = junit_cases(cwd / "junit.xml")
    reports = reports_under(cwd / "reports")
    assert sorted(r["diagnosis"]["cause"] for r in reports) == sorted(
        NOTEBOOKS[n][1] for n in DEATHS)
    for name in DEATHS:
        case = cases[case_name(name)]
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["kernel_watchdog_cause"] == NOTEBOOKS[name][1], props
        report_path = props["kernel_watchdog_report"]
        assert f"{name}.ipynb" in report_path  # the notebook's own folder
        # The second cell dies (nbval runs cells outside the history: its count may differ).
        assert props["kernel_watchdog_cell"].endswith(NOTEBOOKS[name][0][1].splitlines()[0])
        assert int(props["kernel_watchdog_peak_memory_bytes"]) > 0
        failure = case.find("failure")
        assert failure.get("message") == f"kernel died: {props['kernel_watchdog_headline']}"
        assert report_path in failure.text and "peak memory:" in failure.text
        assert report_path in output
    return output


@pytest.mark.parametrize("workers", [None, "2"], ids=["serial", "xdist"])
def test_nbmake_failures_carry_the_cause(env, tmp_path, workers):
    write_notebooks(tmp_path)
    proc = pytest_run(env, tmp_path, "--nbmake", *(["-n", workers] if workers else []),
                      *(f"{n}.ipynb" for n in NOTEBOOKS))
    output = check_notebook_failures(proc, tmp_path, lambda name: f"{name}.ipynb::{name}.ipynb")
    for name in DEATHS:
        assert f"FAILED {name}.ipynb::{name}.ipynb - kernel died:" in output


def test_nbval_failures_carry_the_cause(env, tmp_path):
    write_notebooks(tmp_path)
    proc = pytest_run(env, tmp_path, "--nbval-lax", "--nbval-current-env",
                      *(f"{n}.ipynb" for n in NOTEBOOKS))
    # nbval: one test a cell; the second cell is the one that dies, at once (not after its
    # cell timeout) and with the cause.
    cases = junit_cases(tmp_path / "junit.xml")
    assert all(case.find("failure") is None for n, case in cases.items() if n.endswith("Cell 0"))
    check_notebook_failures(proc, tmp_path, lambda name: f"{name}.ipynb::Cell 1")


def test_github_annotations(env, tmp_path):
    write_notebooks(tmp_path, ["segfault", "passes"])
    proc = pytest_run({**env, "GITHUB_ACTIONS": "true"}, tmp_path, "--nbmake",
                      "segfault.ipynb", "passes.ipynb")
    [report] = reports_under(tmp_path / "reports")
    [annotation] = [l for l in proc.stdout.splitlines() if l.startswith("::error ")]
    assert annotation.startswith("::error file=segfault.ipynb,title=kernel died::")
    assert report["diagnosis"]["headline"] in annotation and report["id"] in annotation


def test_off_unless_asked(env, tmp_path):
    write_notebooks(tmp_path, ["segfault"])
    proc = run([str(VENV_PYTHON), "-m", "pytest", "-p", "no:cacheprovider", "--nbmake",
                "segfault.ipynb"], env, tmp_path)
    assert proc.returncode == 1
    assert "the kernel died" not in proc.stdout + proc.stderr
    assert not reports_under(tmp_path / "reports")
    assert not load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])
