"""The shim in every interpreter users run: pyenv's CPython 3.8-3.13 (each in a virtualenv of
its own with ipykernel from PyPI; 3.13's made by uv, with its _virtualenv.pth hook), a CPython
in a prefix of its own as conda lays it out, Debian's /usr/bin/python3 and a virtualenv of it.
scripts/setup.sh makes them under .cache/interpreters.

$KWD_INTERPRETER names the one under test (ctest runs one entry each). The test_matrix_*
tests run under every interpreter: a clean start leaves the kernel's stderr exactly as it is
without kernel-watchdog; a segfault in the first cell is named with the cell (announced by the
shim) and the Python frames faulthandler gave; a cgroup OOM kill is named. The other tests run
once: the start-up hooks a user may have (usercustomize, a .pth file, PYTHONSTARTUP,
PYTHONSAFEPATH) and interpreters that cannot run the shim (-I, -E).

The kernels run in ipykernel's default configuration (fd 2 captured: PYTEST_CURRENT_TEST is
not passed on), driven by Debian's jupyter_client."""
import json
import os
import pathlib
import re
import signal
import subprocess
import textwrap

import pytest

from conftest import REPO_ROOT, Watched, kwd, load_reports, private_jupyter

INTERPRETERS = REPO_ROOT / ".cache" / "interpreters"
PYTHONS = {
    **{f"3.{minor}": INTERPRETERS / f"py3.{minor}" / "bin" / "python" for minor in range(8, 14)},
    "prefix-3.12": INTERPRETERS / "prefix-3.12" / "bin" / "python3",
    "debian": pathlib.Path("/usr/bin/python3"),
    "debian-venv": REPO_ROOT / ".cache" / "venv-frameworks" / "bin" / "python",
}
NAME = os.environ.get("KWD_INTERPRETER", "debian")

CRASHER = textwrap.dedent("""\
    def crasher(n):
        import ctypes
        return ctypes.string_at(0)

    crasher(1)
    """)
# Touches every page it holds (b"x" * n is written, where bytearray(n) may stay unmapped).
GROWER = "held = []\nwhile True:\n    held.append(b'x' * (16 * 1024 * 1024))\n"


@pytest.fixture(scope="module")
def python():
    path = PYTHONS.get(NAME)
    if path is None:
        raise AssertionError(f"KWD_INTERPRETER={NAME} is none of {sorted(PYTHONS)}")
    if not path.exists():
        raise AssertionError(f"{path} is missing: scripts/setup.sh makes it (for 3.X, from "
                             f"pyenv's CPython 3.X under $PYENV_ROOT/versions)")
    return str(path)


@pytest.fixture
def jupyter(tmp_path, python, monkeypatch):
    """A private Jupyter path with the interpreter's kernelspec ("plain"), its wrapped copy
    ("watched") and a wrapped copy with a 250 MB memory limit ("limited")."""
    launch = ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    _, env = private_jupyter(tmp_path, monkeypatch, {
        "plain": ([python, *launch], "python"),
        "isolated": ([python, "-I", *launch], "python"),
        "ignores-env": ([python, "-E", *launch], "python")})
    env = {k: v for k, v in env.items()
           if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONSAFEPATH", "PYTHONUSERBASE",
                        "VIRTUAL_ENV")}
    for name in ("plain", "isolated", "ignores-env"):
        kwd("kernelspec", "wrap", name, "--prefix", tmp_path / "prefix", "--name",
            f"{name}-watched", env=env)
    kwd("kernelspec", "wrap", "plain", "--prefix", tmp_path / "prefix", "--name", "limited",
        "--run-option=--memory-limit=250M", env=env)
    started = []

    def start(kernel_name, extra_env=None, stderr=None):
        k = Watched(kernel_name, {**env, **(extra_env or {})},
                    {"stderr": stderr} if stderr is not None else None)
        started.append(k)
        return k

    yield {"start": start, "env": env, "tmp": tmp_path, "reports": tmp_path / "reports"}
    for k in started:
        k.close()


def without_clock_readings(text):
    """debugpy (in ipykernel) starts its warnings with the seconds since its start ("0.01s -
    Debugger warning: ..."): a clock reading, not text of ours or theirs to compare."""
    return re.sub(r"(?m)^[0-9]+\.[0-9]+s - ", "<seconds>s - ", text)


def stderr_of_a_session(jupyter, kernel_name, extra_env=None):
    """The kernel's whole stderr over a start, one cell and a shutdown."""
    path = jupyter["tmp"] / f"stderr-{kernel_name}.txt"
    with open(path, "wb") as sink:
        k = jupyter["start"](kernel_name, extra_env, stderr=sink)
        reply, _ = k.execute("print(6 * 7)")
        assert reply["status"] == "ok", reply
        k.km.shutdown_kernel()
        k.close()
    return path.read_text(errors="replace")


def only_report(jupyter):
    reports = load_reports(jupyter["reports"])
    assert len(reports) == 1, [r["diagnosis"]["headline"] for r in reports]
    return reports[0]


# --- under every interpreter -----------------------------------------------------------------

def test_matrix_a_clean_start_leaves_the_kernels_stderr_as_it_is_without_us(jupyter):
    without = stderr_of_a_session(jupyter, "plain")
    watched = stderr_of_a_session(jupyter, "plain-watched")
    assert "sitecustomize" not in watched and "kernel-watchdog" not in watched, watched
    assert without_clock_readings(watched) == without_clock_readings(without)
    assert not load_reports(jupyter["reports"])


def test_matrix_a_segfault_in_the_first_cell_is_named_with_the_cell_and_its_frames(jupyter):
    k = jupyter["start"]("plain-watched")
    assert k.execute_until_death(CRASHER) == -signal.SIGSEGV
    report = only_report(jupyter)
    assert report["watchdog"]["python_shim"] == {"ran": True, "why_not": None}
    assert report["watchdog"]["faulthandler"] is True
    # Named from the shim's announcement: the cell dies before IOPub could tell of it.
    cell = report["execution"]["cell_in_flight"]
    assert cell["execution_count"] == 1 and "crasher(1)" in cell["code"], cell
    tb = report["python_traceback"]
    assert tb is not None, report["stderr_tail"]["text"][-2000:]
    assert tb["fatal_error"] == "Segmentation fault"
    crasher = [f for f in tb["frames"] if f["function"] == "crasher"]
    assert crasher and crasher[0]["line"] == 3 and crasher[0]["in_cell"] is True, tb["frames"]
    d = report["diagnosis"]
    assert d["cause"] == "native_crash", d
    assert "crasher(), line 3" in d["headline"] and "cell [1]" in d["headline"], d["headline"]
    assert not any("python_traceback" in m for m in d["missing"]), d["missing"]


def test_matrix_a_cgroup_oom_kill_is_named(jupyter):
    k = jupyter["start"]("limited")
    assert k.execute_until_death(GROWER, timeout=120) == -signal.SIGKILL
    d = only_report(jupyter)["diagnosis"]
    assert d["cause"] == "oom_killed_cgroup", d["headline"]
    assert "250.0 MiB" in d["headline"], d["headline"]


# --- once ------------------------------------------------------------------------------------

def test_the_users_own_start_up_hooks_still_run_and_stay_quiet(jupyter):
    """usercustomize and a .pth file in the user's site directory, PYTHONSTARTUP (which
    IPython runs as its shell starts) and PYTHONSAFEPATH, with and without us. (Run under an
    interpreter with a user site, Python 3.11 or newer: the conda-style prefix.)"""
    base = jupyter["tmp"] / "userbase"
    probe = ("import sys, os; print(sorted(m for m in ('sitecustomize', 'usercustomize') "
             "if m in sys.modules), os.environ.get('KWD_PTH_HOOK'), "
             "getattr(sys.flags, 'safe_path', None), os.environ.get('KWD_STARTUP_RAN'))")
    results = {}
    for kernel_name in ("plain", "plain-watched"):
        # site.py computes the user site directory itself; ask the interpreter under test.
        site = subprocess.run(
            [PYTHONS[NAME], "-c", "import site; print(site.getusersitepackages())"],
            env={**jupyter["env"], "PYTHONUSERBASE": str(base)}, capture_output=True,
            text=True, check=True).stdout.strip()
        pathlib.Path(site).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(site) / "usercustomize.py").write_text("import os\n")
        (pathlib.Path(site) / "kwd_test_hook.pth").write_text(
            "import os; os.environ['KWD_PTH_HOOK'] = 'ran'\n")
        startup = jupyter["tmp"] / "startup.py"
        startup.write_text("import os; os.environ['KWD_STARTUP_RAN'] = '1'\n")
        extra = {"PYTHONUSERBASE": str(base), "PYTHONSTARTUP": str(startup),
                 "PYTHONSAFEPATH": "1"}
        path = jupyter["tmp"] / f"hooks-{kernel_name}.txt"
        with open(path, "wb") as sink:
            k = jupyter["start"](kernel_name, extra, stderr=sink)
            _, outputs = k.execute(probe)
            k.km.shutdown_kernel()
            k.close()
        printed = [m["content"]["text"] for m in outputs if m["msg_type"] == "stream"]
        results[kernel_name] = (printed, without_clock_readings(path.read_text(errors="replace")))
    assert results["plain-watched"] == results["plain"]
    (printed,), stderr = results["plain-watched"]
    # usercustomize imported, the .pth hook run, PYTHONSAFEPATH on, PYTHONSTARTUP run (IPython
    # runs it in a kernel); no sitecustomize left in sys.modules (this interpreter has none).
    assert printed == "['usercustomize'] ran True 1\n", printed
    assert "sitecustomize" not in stderr and "kernel-watchdog" not in stderr, stderr


@pytest.mark.parametrize("kernel_name,option", [("isolated-watched", "-I"),
                                                ("ignores-env-watched", "-E")])
def test_an_interpreter_that_cannot_run_the_shim_is_said_so(jupyter, kernel_name, option):
    k = jupyter["start"](kernel_name)
    reply, _ = k.execute("x = 1")
    assert reply["status"] == "ok"
    assert k.execute_until_death(CRASHER) == -signal.SIGSEGV
    report = only_report(jupyter)
    shim = report["watchdog"]["python_shim"]
    assert shim["ran"] is False and f"({option})" in shim["why_not"], shim
    assert report["watchdog"]["faulthandler"] is False
    assert report["watchdog"]["cell_announcements"] is False
    d = report["diagnosis"]
    assert d["cause"] == "native_crash"
    [missing] = [m for m in d["missing"] if m.startswith("python_traceback")]
    assert "never ran" in missing and f"({option})" in missing, missing
    [remedy] = [r for r in d["remedies"] if r["id"] == "native.traceback"]
    assert "without -I, -E or -S" in remedy["text"], remedy
