"""The Python package (python/kernel_watchdog): the shim that execs the program, the kernel
provisioner under real notebook runners (nbclient, papermill, nbmake, nbval, pytest-xdist,
Jupyter Server from PyPI) and the pytest plugin, with real kernels dying: a segfault, an abort
and an OOM kill under `--memory-limit`, beside a notebook that passes.

Two ways to get the package:
- $KWD_WHEEL (what scripts/test.sh sets: the manylinux wheel scripts/wheel.sh made from the
  build under test): a fresh virtualenv, made here with no compiler on PATH, gets that wheel
  and the runners from PyPI, as a user's would; runners, kernels and the program are that
  virtualenv's.
- otherwise the package is built as a wheel without its C++ (scikit-build-core's
  wheel.cmake=false), installed with `pip --target` into the test's own folder so that its
  entry points are found as an installed wheel's are, and the program under test is
  $KWD_BINARY (named by KERNEL_WATCHDOG_BINARY); runners and kernels are the framework
  virtualenv's (scripts/setup.sh; without it these tests fail: run scripts/setup.sh)."""
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import psutil
import pytest

from conftest import (KWD_BINARY, REPO_ROOT, intervals, load_reports, overlaps,
                      own_memory_cgroup_dir)
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


# What a user installs beside the wheel to run notebooks (the fresh virtualenv's runners).
RUNNERS = ["ipykernel", "jupyter_client", "jupyter_server", "nbclient", "nbformat", "nbmake",
           "nbval", "papermill", "pytest", "pytest-xdist"]
COMPILERS = ["cc", "gcc", "g++", "c++", "clang", "clang++"]


def without_compilers(folder):
    """A PATH folder with the few tools a runner may ask for by name, and no compiler."""
    folder.mkdir()
    for tool in ("sh", "env", "uname"):
        (folder / tool).symlink_to(shutil.which(tool))
    return folder


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """The package installed: {"python": the runners' interpreter, "program": the program
    its provisioner starts, "site": a folder for PYTHONPATH or None}."""
    if WHEEL:
        root = tmp_path_factory.mktemp("fresh")
        venv = root / "venv"
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
        path = f"{venv / 'bin'}:{without_compilers(root / 'tools')}"
        assert not any(shutil.which(c, path=path) for c in COMPILERS)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", WHEEL, *RUNNERS],
                       check=True, timeout=600, env={**os.environ, "PATH": path})
        [program] = venv.glob("lib/python3*/site-packages/kernel_watchdog/_bin/kernel-watchdog")
        # The crash handler the shim loads into kernels (native frames at a crash) is beside it.
        assert (program.parent / "kernel-watchdog-crash.so").is_file()
        return {"python": venv / "bin" / "python", "program": str(program), "site": None,
                "path": path}
    return {"python": VENV_PYTHON, "program": KWD_BINARY, "site": install_target(tmp_path_factory),
            "path": os.environ["PATH"]}


def install_target(tmp_path_factory):
    """The package's Python side as a wheel without its C++, installed with `pip --target`
    into a folder of its own (its data under share/ and etc/ there); returns that folder."""
    wheels = tmp_path_factory.mktemp("wheel")
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--config-settings=wheel.cmake=false",
                    "-w", str(wheels), str(REPO_ROOT)], check=True, timeout=300)
    [wheel] = wheels.glob("kernel_watchdog-*.whl")
    site = tmp_path_factory.mktemp("site")
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(site), str(wheel)], check=True, timeout=300)
    return site


@pytest.fixture(scope="module")
def target_package(tmp_path_factory):
    """The package installed with `pip --target` (install_target), whatever $KWD_WHEEL says:
    for tests that run the framework virtualenv's JupyterLab with it on PYTHONPATH."""
    return install_target(tmp_path_factory)


@pytest.fixture
def env(tmp_path, package):
    """An environment for the runners: the package importable, a private Jupyter path whose
    python3 kernel is the runners' interpreter, a private report store."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(package["python"]), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    e = dict(os.environ)
    for name in ("GITHUB_ACTIONS", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTHONPATH",
                 "JUPYTER_DEFAULT_PROVISIONER_NAME", "KERNEL_WATCHDOG_RUN_OPTIONS",
                 "KERNEL_WATCHDOG_BINARY"):
        e.pop(name, None)
    if package["site"] is not None:
        e.update(PYTHONPATH=str(package["site"]), KERNEL_WATCHDOG_BINARY=KWD_BINARY)
    e.update(PATH=package["path"], KWD_TEST_PYTHON=str(package["python"]),
             KWD_TEST_PROGRAM=package["program"],
             JUPYTER_PATH=str(tmp_path / "jupyter"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
             JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), XDG_RUNTIME_DIR=str(runtime),
             TMPDIR=str(tmp_path), KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "reports"))
    return e


def python(env):
    """The runners' interpreter (the fresh virtualenv's, or the framework virtualenv's)."""
    return env["KWD_TEST_PYTHON"]


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
    """The program under test: $KWD_BINARY, or the one the wheel carries."""
    return env["KWD_TEST_PROGRAM"]


# --- the shim -------------------------------------------------------------------------


def test_python_m_runs_the_program_in_its_place(env, tmp_path):
    version = run([python(env), "-m", "kernel_watchdog", "--version"], env, tmp_path)
    assert version.returncode == 0 and version.stdout == run([program(env), "--version"], env,
                                                             tmp_path).stdout
    # exec, not a child: the program's own end (here a mirrored SIGKILL) is the caller's.
    killed = run([python(env), "-m", "kernel_watchdog", "run", "--", sys.executable, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], env, tmp_path)
    assert killed.returncode == -9, killed.stderr
    usage = run([python(env), "-m", "kernel_watchdog", "no-such-command"], env, tmp_path)
    assert usage.returncode == run([program(env), "no-such-command"], env, tmp_path).returncode != 0


def test_the_command_on_path_execs_the_program(env, tmp_path):
    """`kernel-watchdog` on PATH is the package's console script (pip writes it into the
    environment's scripts folder); it hands the process over to the program."""
    scripts = Path(package_scripts(env))
    command = scripts / "kernel-watchdog"
    assert command.read_bytes().startswith(b"#!")  # pip's script, not the program itself
    e = {**env, "PATH": f"{scripts}:{env['PATH']}"}
    version = run(["kernel-watchdog", "--version"], e, tmp_path)
    assert version.returncode == 0
    assert version.stdout == run([program(env), "--version"], env, tmp_path).stdout
    killed = run(["kernel-watchdog", "run", "--", sys.executable, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], e, tmp_path)
    assert killed.returncode == -9, killed.stderr


def package_scripts(env):
    """Where pip put the package's console scripts: the virtualenv's bin, or TARGET/bin."""
    site = env.get("PYTHONPATH")
    return str(Path(site) / "bin") if site else str(Path(python(env)).parent)


# Debian's libraries that the program is built with and the wheel bundles (the deferred
# libzmq too): hidden, the wheel's program must not miss them. OpenSSL stays visible, as
# Python's own ssl module needs it in the kernel.
BUNDLED = ["libzmq.so.5", "libsodium.so.23", "libspdlog.so.1.10", "libfmt.so.9",
           "libsimdjson.so.14", "libcpp-httplib.so.0.11"]


@pytest.mark.skipif(not WHEEL, reason="the program from a wheel only ($KWD_WHEEL)")
def test_the_wheels_program_needs_none_of_debians_libraries(env, tmp_path):
    """In a mount namespace where Debian's copies of what the wheel bundles are empty files,
    the wheel's program still watches a real kernel through ZeroMQ (smoke) and writes the
    report of its segfault."""
    hidden = [os.path.realpath(f"/usr/lib/x86_64-linux-gnu/{name}") for name in BUNDLED]
    assert all(os.path.exists(h) for h in hidden), hidden
    write_notebooks(tmp_path / "nb", ["segfault"])
    mount = shutil.which("mount")  # the test's own PATH: the runners' has no system tools
    binds = " && ".join(f"{mount} --bind /dev/null {h}" for h in hidden)
    proc = run([shutil.which("unshare"), "--mount", "--propagation", "private", "--", "sh", "-c",
                f'{binds} && exec "$@"', "hide", program(env), "smoke", "--json",
                "--output-dir", str(tmp_path / "out"), str(tmp_path / "nb" / "segfault.ipynb")],
               env, tmp_path)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said
    [result] = json.loads(proc.stdout[proc.stdout.index("{"):])["notebooks"]
    assert result["outcome"] == "kernel died" and result["cause"] == "native_crash", said
    report = json.loads(Path(result["report"]).read_text())
    assert report["diagnosis"]["cause"] == "native_crash"
    assert "cannot load" not in proc.stderr, said


@pytest.mark.skipif(not WHEEL, reason="the program from a wheel only ($KWD_WHEEL)")
@pytest.mark.parametrize("installer", ["pip --user", "pipx", "uv tool"])
def test_the_wheel_puts_a_working_command_on_path(env, tmp_path, installer):
    """Each way a user installs a command-line tool from a wheel gives a `kernel-watchdog`
    in the folder that installer puts on PATH, and it runs (a SIGKILL mirrored: exec)."""
    home, bin_dir = tmp_path / "home", tmp_path / "home" / "bin"
    e = {**env, "HOME": str(home), "PYTHONUSERBASE": str(home), "PIPX_HOME": str(home / "pipx"),
         "PIPX_BIN_DIR": str(bin_dir), "UV_TOOL_DIR": str(home / "uv-tools"),
         "UV_TOOL_BIN_DIR": str(bin_dir), "UV_NO_CACHE": "1", "PATH": os.environ["PATH"]}
    framework_bin = VENV_PYTHON.parent
    argv = {"pip --user": ["/usr/bin/python3", "-m", "pip", "install", "--user", "--no-deps",
                           "--break-system-packages", "-q", WHEEL],
            "pipx": [str(framework_bin / "pipx"), "install", WHEEL],
            "uv tool": [str(framework_bin / "uv"), "tool", "install", "--python",
                        "/usr/bin/python3", WHEEL]}[installer]
    installed = run(argv, e, tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    command = bin_dir / "kernel-watchdog"
    assert command.exists(), sorted(p.name for p in bin_dir.iterdir()) if bin_dir.exists() else []
    version = run([str(command), "--version"], e, tmp_path)
    assert version.returncode == 0 and version.stdout == run([program(env), "--version"], env,
                                                             tmp_path).stdout, version.stderr
    killed = run([str(command), "run", "--", sys.executable, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], e, tmp_path)
    assert killed.returncode == -9, killed.stderr


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
        proc = run([python(env), "-m", "kernel_watchdog", "--version"],
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
    proc = run([python(env), "-c", NBCLIENT_SCRIPT, str(notebooks / f"{name}.ipynb")],
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
    papermill = [python(env), "-m", "papermill", "--no-progress-bar"]
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
    proc = run([python(env), "-c", LIFECYCLE_SCRIPT],
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


# Kernels that are not IPython (tests/integration/test_other_kernels.py has them under `run`,
# the daemon and smoke): Debian's IRkernel and xeus-python from .cache/venv-xeus.
OTHER_KERNELS = {
    "ir": (["/usr/bin/R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"],
           "R", ["x <- 1", "Sys.sleep(0.5)\ntools::pskill(Sys.getpid(), 11L)"],
           "SIGSEGV"),
    "xpython": ([str(REPO_ROOT / ".cache" / "venv-xeus" / "bin" / "python3"), "-m",
                 "xpython_launcher", "-f", "{connection_file}"],
                "python", ["x = 1", "import ctypes, time\ntime.sleep(0.5)\nctypes.string_at(0)"],
                "caught by the kernel's own handler"),
}


@pytest.mark.parametrize("kernel", sorted(OTHER_KERNELS))
def test_other_kernels_crash_under_the_provisioner(env, tmp_path, kernel):
    argv, language, cells, words = OTHER_KERNELS[kernel]
    spec = tmp_path / "jupyter" / "kernels" / kernel
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": kernel, "language": language}))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": language}
    nb.cells = [nbformat.v4.new_code_cell(code) for code in cells]
    nbformat.write(nb, str(tmp_path / "crash.ipynb"))
    # R's start-up script runs the system's tools by name.
    proc = run([python(env), "-c", NBCLIENT_SCRIPT, str(tmp_path / "crash.ipynb")],
               {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER,
                "PATH": env["PATH"] + ":/usr/bin:/bin"}, tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    [report] = load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])
    d = report["diagnosis"]
    assert d["cause"] == "native_crash" and words in d["headline"], d["headline"]
    assert report["fingerprint"]["language"] == language
    [line] = [l for l in proc.stderr.splitlines() if l.startswith("kernel-watchdog: the kernel died")]
    assert d["headline"] in line and report["id"] in line


SHUTDOWN_WHILE_STARTING_SCRIPT = """
from jupyter_client import KernelManager
km = KernelManager(kernel_name="python3")
km.start_kernel()
# At once, while the kernel is still importing: jupyter_client's shutdown interrupts it
# first, and a kernel without its SIGINT handler yet dies of that.
km.shutdown_kernel(now=False)
print("ended", km.provisioner is None or km.provisioner.process is None, flush=True)
"""


def test_a_kernel_shut_down_while_starting_is_not_a_death(env, tmp_path):
    for _ in range(3):
        proc = run([python(env), "-c", SHUTDOWN_WHILE_STARTING_SCRIPT],
                   {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER}, tmp_path)
        assert proc.returncode == 0 and "ended" in proc.stdout, proc.stdout + proc.stderr
        assert "the kernel died" not in proc.stderr, proc.stderr
    assert not load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])


@pytest.mark.parametrize("program", ["missing", "foreign"])
def test_without_a_program_that_runs_the_kernel_starts_unwatched(env, tmp_path, program):
    notebooks = write_notebooks(tmp_path / "nb", ["passes"])
    binary = tmp_path / "gone" if program == "missing" else foreign_program(tmp_path)
    proc = run([python(env), "-c", NBCLIENT_SCRIPT, str(notebooks / "passes.ipynb")],
               {**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER,
                "KERNEL_WATCHDOG_BINARY": str(binary)}, tmp_path)
    assert proc.returncode == 0 and "runner: passed" in proc.stdout, proc.stderr
    assert "kernel-watchdog: starting the kernel unwatched" in proc.stderr


# --- the pytest plugin ----------------------------------------------------------------


def pytest_run(env, cwd, *args, report_dir_option=True):
    """pytest with the plugin on; the reports go to cwd/reports, named by the plugin's option
    or (report_dir_option=False) by $KERNEL_WATCHDOG_REPORT_DIR, as a user's shell may."""
    if report_dir_option:
        args = (f"--kernel-watchdog-report-dir={cwd / 'reports'}", *args)
    else:
        env = {**env, "KERNEL_WATCHDOG_REPORT_DIR": str(cwd / "reports")}
    return run([python(env), "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                "--kernel-watchdog", f"--kernel-watchdog-run-options={RUN_OPTIONS}",
                "--junitxml=junit.xml", *args], env, cwd, timeout=600)


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
    # A death's failure is ours alone: nbmake's own text for it (an internal error and a
    # traceback through pytest's internals) only under -v.
    assert "NBMAKE INTERNAL ERROR" not in output
    assert "run pytest with -v" in output


def test_nbmake_own_failure_text_follows_under_verbose(env, tmp_path):
    write_notebooks(tmp_path, ["segfault"])
    proc = pytest_run(env, tmp_path, "--nbmake", "-v", "segfault.ipynb")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    ours = output.index("kernel-watchdog: the kernel died:")
    assert output.index("NBMAKE INTERNAL ERROR", ours) > ours


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
    # The store named by the environment, not pytest's temporary directory (which pytest
    # deletes after three sessions).
    proc = pytest_run({**env, "GITHUB_ACTIONS": "true"}, tmp_path, "--nbmake",
                      "segfault.ipynb", "passes.ipynb", report_dir_option=False)
    [report] = reports_under(tmp_path / "reports")
    [annotation] = [l for l in proc.stdout.splitlines() if l.startswith("::error ")]
    assert annotation.startswith("::error file=segfault.ipynb,title=kernel died::")
    assert report["diagnosis"]["headline"] in annotation and report["id"] in annotation


def test_off_unless_asked(env, tmp_path):
    write_notebooks(tmp_path, ["segfault"])
    proc = run([python(env), "-m", "pytest", "-p", "no:cacheprovider", "--nbmake",
                "segfault.ipynb"], env, tmp_path)
    assert proc.returncode == 1
    assert "the kernel died" not in proc.stdout + proc.stderr
    assert not reports_under(tmp_path / "reports")
    assert not load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])


# --- the pytest plugin under pytest-xdist: a memory budget the workers share ---------------

MiB = 1024 * 1024

# One worker's part in the shared budget, in the runners' interpreter: admit NOTEBOOK of
# ESTIMATE MiB ("unknown": none) into LEDGER as WORKER, printing each line it says; optionally
# start a child that holds GROW MiB (its "kernel"); print "running"; hold until stdin closes.
LEDGER_USER = """
import subprocess, sys
from kernel_watchdog import _shared_budget as shared
ledger, worker, notebook, estimate, grow = sys.argv[1:6]
estimate = None if estimate == "unknown" else int(estimate) << 20
shared.admit(ledger, worker, notebook, estimate, lambda line: print(line, flush=True), 0.05)
child = None
if int(grow):
    child = subprocess.Popen([sys.executable, "-c", "import sys; held = b'x' * (%s << 20); "
                              "print('grown', flush=True); sys.stdin.read()" % grow],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
print("running", flush=True)
sys.stdin.read()
if child:
    child.stdin.close()
    child.wait()
shared.release(ledger)
"""


def make_ledger(env, folder, budget_mib):
    code = ("import sys; from kernel_watchdog import _shared_budget as shared; "
            "print(shared.make_ledger(sys.argv[1], int(sys.argv[2]) << 20, 'the test'))")
    proc = run([python(env), "-c", code, str(folder), str(budget_mib)], env, folder)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


class LedgerUser:
    """A process that takes its place in the ledger as a worker does (LEDGER_USER)."""

    def __init__(self, env, ledger, worker, notebook, estimate_mib, grow_mib=0):
        self.proc = subprocess.Popen(
            [python(env), "-c", LEDGER_USER, ledger, worker, notebook, str(estimate_mib),
             str(grow_mib)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        # Its lines as they come, read by a thread: a test waits for each with a timeout.
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self):
        """Its next line; a process that says nothing in a minute fails the test."""
        try:
            line = self.lines.get(timeout=60)
        except queue.Empty:
            raise AssertionError("the ledger user said nothing in 60 s") from None
        assert line is not None, f"the ledger user ended: {self.proc.wait()}"
        return line

    def finish(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def ledger_of(path):
    return json.loads(Path(path).read_text())


def started_after_waiting(user, worker, notebook):
    """The line that says the waiter started. A waiter says again why it waits each time who
    runs changes: a notebook started beside it may come before or after its next look."""
    while True:
        line = user.line()
        if line.startswith(f"{worker} starts {notebook} after waiting "):
            return line
        assert line.startswith(f"{worker} waits to start {notebook}: "), line


def test_shared_budget_a_worker_waits_until_its_notebook_fits(env, tmp_path):
    ledger = make_ledger(env, tmp_path, 1000)
    holder = LedgerUser(env, ledger, "gw0", "a.ipynb", 700)
    assert holder.line() == "running"
    waiter = LedgerUser(env, ledger, "gw1", "b.ipynb", 600)
    assert waiter.line() == ("gw1 waits to start b.ipynb: needs 600.0 MiB, 300.0 MiB free "
                             "(gw0 running a.ipynb)")
    # One that fits in what is left starts beside them at once.
    small = LedgerUser(env, ledger, "gw2", "c.ipynb", 200)
    assert small.line() == "running"
    holder.finish()
    started_after_waiting(waiter, "gw1", "b.ipynb")
    assert waiter.line() == "running"
    assert sorted(e["notebook"] for e in ledger_of(ledger)["running"]) == ["b.ipynb", "c.ipynb"]
    waiter.finish()
    small.finish()
    assert ledger_of(ledger)["running"] == []


def test_shared_budget_drops_the_entry_of_a_worker_that_died(env, tmp_path):
    ledger = make_ledger(env, tmp_path, 1000)
    holder = LedgerUser(env, ledger, "gw0", "a.ipynb", 700)
    assert holder.line() == "running"
    waiter = LedgerUser(env, ledger, "gw1", "b.ipynb", 600)
    assert waiter.line().startswith("gw1 waits to start b.ipynb: needs 600.0 MiB")
    holder.proc.kill()  # its entry stays in the ledger: nothing released it
    holder.proc.wait()
    assert waiter.line().startswith("gw1 starts b.ipynb after waiting ")
    assert waiter.line() == "running"
    assert [e["worker"] for e in ledger_of(ledger)["running"]] == ["gw1"]
    waiter.finish()


def test_shared_budget_a_notebook_bigger_than_the_budget_runs_alone(env, tmp_path):
    ledger = make_ledger(env, tmp_path, 1000)
    small = LedgerUser(env, ledger, "gw0", "small.ipynb", 100)
    assert small.line() == "running"
    big = LedgerUser(env, ledger, "gw1", "big.ipynb", 3000)
    assert big.line() == ("gw1 waits to start big.ipynb: it runs alone: needs 2.9 GiB, more "
                          "than the whole budget (gw0 running small.ipynb)")
    small.finish()
    assert big.line().startswith("gw1 starts big.ipynb after waiting ")
    assert big.line() == "running"
    other = LedgerUser(env, ledger, "gw2", "other.ipynb", 10)
    assert other.line() == "gw2 waits to start other.ipynb: gw1 runs big.ipynb alone"
    big.finish()
    assert other.line().startswith("gw2 starts other.ipynb after waiting ")
    assert other.line() == "running"
    other.finish()


def test_shared_budget_follows_the_live_memory_of_a_workers_kernels(env, tmp_path):
    # By the estimates both fit (50 + 100 of 1000 MiB); the first one's "kernel" holds 300 MiB.
    ledger = make_ledger(env, tmp_path, 1000)
    grown = LedgerUser(env, ledger, "gw0", "a.ipynb", 50, grow_mib=300)
    assert grown.line() == "running"
    waiter = LedgerUser(env, ledger, "gw1", "b.ipynb", 100)
    line = waiter.line()
    assert line.startswith("gw1 waits to start b.ipynb: gw0's a.ipynb holds "), line
    assert line.endswith(", past its estimate of 50.0 MiB"), line
    grown.finish()
    assert waiter.line().startswith("gw1 starts b.ipynb after waiting ")
    assert waiter.line() == "running"
    waiter.finish()


def test_shared_budget_notebooks_of_unknown_memory_start_one_at_a_time(env, tmp_path):
    ledger = make_ledger(env, tmp_path, 1000)
    first = LedgerUser(env, ledger, "gw0", "a.ipynb", "unknown")
    assert first.line() == "running"
    second = LedgerUser(env, ledger, "gw1", "b.ipynb", "unknown")
    assert second.line() == ("gw1 waits to start b.ipynb: its memory is unknown, and so is "
                             "that of a.ipynb (gw0 running a.ipynb)")
    known = LedgerUser(env, ledger, "gw2", "c.ipynb", 100)  # a known one fits beside
    assert known.line() == "running"
    first.finish()
    started_after_waiting(second, "gw1", "b.ipynb")
    assert second.line() == "running"
    second.finish()
    known.finish()


def can_make_memory_cgroups():
    base = own_memory_cgroup_dir()
    return os.geteuid() == 0 and base is not None and base.is_dir()


class MemoryCgroup:
    """A child of this test's own cgroup v1 memory cgroup with a limit, for one run."""

    def __init__(self, limit):
        self.dir = own_memory_cgroup_dir() / f"kwd-xdist-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir()
        (self.dir / "memory.limit_in_bytes").write_text(str(limit))

    def run(self, argv, env, cwd):
        try:
            return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                                  timeout=600, preexec_fn=self.join)
        finally:
            self.oom_kills = int(dict(line.split() for line in (
                self.dir / "memory.oom_control").read_text().splitlines()).get("oom_kill", 0))
            self.remove()

    def join(self):
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self):
        for pid in (self.dir / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in range(100):
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)


HEAVY_MIB = 700  # two do not fit in the 1.5 GiB cgroup beside pytest and its workers


def logged_notebook(path, log, body):
    """A notebook whose cells write when its work starts and ends into `log`."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(code) for code in (
        f"import time\nopen({str(log)!r}, 'a').write('{path.name} start %f\\n' % time.time())",
        body,
        f"open({str(log)!r}, 'a').write('{path.name} end %f\\n' % time.time())")]
    nbformat.write(nb, str(path))
    return path.name


def heavy_and_light_suite(folder, log, heavy=2):
    """Two heavy notebooks (grown 20 MiB at a time, as one loading data does, and held) and
    three light ones; and smoke's history file with their peaks."""
    grow = (f"held = []\nfor _ in range({HEAVY_MIB // 20}):\n"
            f"    held.append(b'x' * (20 << 20))\n    time.sleep(0.1)\ntime.sleep(2)")
    names = [logged_notebook(folder / f"heavy{i}.ipynb", log, grow) for i in range(heavy)]
    names += [logged_notebook(folder / f"light{i}.ipynb", log, "time.sleep(1)")
              for i in range(3)]
    # What `smoke --store-durations` records for them (peak RSS of the kernel's tree).
    (folder / "history.json").write_text(json.dumps({"kernel-watchdog-history": 2, "notebooks": {
        name: {"seconds": 8 if name.startswith("heavy") else 2,
               "peak_rss": (HEAVY_MIB + 80 if name.startswith("heavy") else 80) * MiB}
        for name in names}}))
    return names


@pytest.mark.skipif(not can_make_memory_cgroups(), reason="needs root and cgroup v1 memory")
def test_xdist_workers_share_a_memory_budget_where_blind_workers_are_oom_killed(env, tmp_path):
    log = tmp_path / "log"
    names = heavy_and_light_suite(tmp_path, log)
    pytest_n3 = [python(env), "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rA",
                 "--nbmake", "-n", "3"]

    # Blind, as pytest-xdist users run it: both heavy notebooks at once, the OOM killer acts.
    blind_cgroup = MemoryCgroup(1536 * MiB)
    blind = blind_cgroup.run([*pytest_n3, *names], env, tmp_path)
    assert blind.returncode == 1, blind.stdout + blind.stderr
    assert blind_cgroup.oom_kills >= 1

    # With the plugin and the history: a heavy one waits for the other; nothing is killed.
    log.unlink()
    cgroup = MemoryCgroup(1536 * MiB)
    shared = cgroup.run([*pytest_n3, "--kernel-watchdog", "--kernel-watchdog-history",
                         "history.json", *names], env, tmp_path)
    output = shared.stdout + shared.stderr
    assert shared.returncode == 0, output
    assert cgroup.oom_kills == 0
    assert "5 passed" in shared.stdout.splitlines()[-1]
    assert (f"1.5 GiB of the memory cgroup {cgroup.dir} (memory.limit_in_bytes)"
            in shared.stdout), shared.stdout
    assert "estimates from history.json (5 notebooks of known peak)" in shared.stdout
    waits = [line for line in shared.stderr.splitlines() if "waits to start heavy" in line]
    assert waits, shared.stderr
    first_heavy_wait = waits[0]
    assert first_heavy_wait.startswith("kernel-watchdog: gw"), first_heavy_wait
    assert f"needs {HEAVY_MIB + 80}.0 MiB" in first_heavy_wait, first_heavy_wait
    ran = intervals(log)
    assert sorted(ran) == sorted(names)
    assert not overlaps(ran["heavy0.ipynb"], ran["heavy1.ipynb"]), ran  # one after the other


def test_xdist_a_history_file_that_is_not_one_is_a_warning(env, tmp_path):
    """One warning, and the suite runs with every notebook of unknown memory."""
    names = heavy_and_light_suite(tmp_path, tmp_path / "log", heavy=0)
    (tmp_path / "history.json").write_text("[1, 2]")
    proc = run([python(env), "-m", "pytest", "-p", "no:cacheprovider", "--nbmake", "-n", "2",
                "--kernel-watchdog", "--kernel-watchdog-history", "history.json",
                *names], env, tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "history.json: not a history file" in proc.stdout, proc.stdout
    assert "3 passed" in proc.stdout.splitlines()[-1]
    assert "every notebook is of unknown memory" in proc.stdout


# --- Jupyter Server -------------------------------------------------------------------

# A browser's part, in the runners' interpreter: a session made through the REST API, the
# notebook's cells executed over the kernel's websocket, until a reply for each, or the
# server saying the kernel is restarting (it died). Prints {"outcome": "ok" | "died"}.
BROWSER_SCRIPT = """
import asyncio, json, sys, urllib.request, uuid
from tornado.websocket import websocket_connect
base, token, path, cells = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
def api(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + url, data=data, method=method,
                                 headers={"Authorization": "token " + token,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as reply:
        text = reply.read()
        return json.loads(text) if text else None
def request(code):
    header = {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "username": "test",
              "session": uuid.uuid4().hex, "version": "5.3", "date": ""}
    return header["msg_id"], json.dumps({
        "header": header, "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}})
async def main():
    session = api("POST", "/api/sessions", {"path": path, "name": path, "type": "notebook",
                                            "kernel": {"name": "python3"}})
    url = base.replace("http", "ws", 1) + "/api/kernels/" + session["kernel"]["id"] + "/channels"
    ws = await websocket_connect(url + "?token=" + token)
    outcome = "ok"
    for code in cells:
        msg_id, text = request(code)
        await ws.write_message(text)
        while outcome == "ok":
            raw = await asyncio.wait_for(ws.read_message(), 180)
            msg = json.loads(raw) if raw is not None else None
            if msg is None or (msg["msg_type"] == "status" and
                               msg["content"]["execution_state"] in ("restarting", "dead")):
                outcome = "died"
            elif msg["channel"] == "shell" and msg["parent_header"].get("msg_id") == msg_id:
                break
        if outcome != "ok":
            break
    ws.close()
    # A dead kernel's session is left to the server's own shutdown (its restarted kernel may
    # still be starting then): deleted while its kernel restarts, Jupyter Server answers 500.
    if outcome == "ok":
        api("DELETE", "/api/sessions/" + session["id"])
    print(json.dumps({"outcome": outcome}), flush=True)
asyncio.run(main())
"""


def leave_no_kernel_of(folder):
    """Kills what a dead server left running: every process started with a path in folder."""
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(folder) in arg for arg in (proc.info["cmdline"] or [])):
            try:
                proc.kill()
            except psutil.Error:
                pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_jupyter_server_rest_api_with_the_provisioner_as_default(env, tmp_path):
    """Jupyter Server started as a user starts it, with the provisioner as the default: each
    notebook opened through the REST API and run over its websocket; the deaths are in the
    server's own log with their cause and report, one report per death."""
    names = ["passes", "segfault", "oom"]
    notebooks = write_notebooks(tmp_path / "nb", names)
    port, token = free_port(), "kernel-watchdog-test-token"
    log = open(tmp_path / "server.log", "w+")
    server = subprocess.Popen(
        [python(env), "-m", "jupyter_server", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         "--ServerApp.open_browser=False", f"--ServerApp.root_dir={notebooks}",
         "--allow-root"],  # CI runs as root
        env={**env, "JUPYTER_DEFAULT_PROVISIONER_NAME": PROVISIONER,
             "KERNEL_WATCHDOG_RUN_OPTIONS": RUN_OPTIONS},
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        outcomes = {}
        for name in names:
            proc = run([python(env), "-c", BROWSER_SCRIPT, base, token, f"{name}.ipynb",
                        json.dumps(NOTEBOOKS[name][0])], env, tmp_path)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            outcomes[name] = json.loads(proc.stdout)["outcome"]
        # The server restarts the kernels that died. Stopped during such a restart,
        # jupyter_client 8.10's shutdown_all reads the unfinished start's exception
        # (multikernelmanager.py: `km.ready.exception()`), raises InvalidStateError, and the
        # server never exits: seen here 3 times in about 70 runs. Not ours to test: the server
        # is stopped once no kernel says starting or restarting (a restarted kernel that no
        # client has joined may say "starting" for good: then after 30 s, long after its start).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=5) as r:
                states = [k["execution_state"] for k in json.loads(r.read())]
            if all(s not in ("starting", "restarting") for s in states):
                break
            time.sleep(0.2)
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # A server stuck in its shutdown fails the test, never outlives it, and says where
            # it was: its log, and the processes left below it.
            left = [" ".join(p.cmdline()) for p in psutil.Process(server.pid).children(recursive=True)]
            server.kill()
            server.wait()
            leave_no_kernel_of(tmp_path)
            raise AssertionError("the server did not end within 60 s of SIGTERM; left below it: "
                                 f"{left}\n{(tmp_path / 'server.log').read_text()[-6000:]}")
    said = (tmp_path / "server.log").read_text()
    assert outcomes == {"passes": "ok", "segfault": "died", "oom": "died"}, said
    reports = load_reports(env["KERNEL_WATCHDOG_REPORT_DIR"])
    assert sorted(r["diagnosis"]["cause"] for r in reports) == sorted(
        NOTEBOOKS[n][1] for n in ("segfault", "oom")), said
    died = [l for l in said.splitlines() if "kernel-watchdog: the kernel died" in l]
    assert len(died) == len(reports), said
    for report in reports:
        assert any(report["diagnosis"]["headline"] in l and report["id"] in l for l in died), said
