"""The aarch64 build under qemu-user (scripts/aarch64.sh runs this with the build machine's
pytest, after the unit tests).

Everything arm64 here is real and runs under qemu-aarch64 with the sysroot as the root of its
loader and libraries: the program from the manylinux aarch64 wheel, installed by Debian's arm64
pip into a virtualenv of Debian's arm64 python3, and a kernel of that python3 with Debian's
arm64 ipykernel. The Jupyter client is the build machine's jupyter_client, as a front end
would be. Nothing depends on binfmt_misc: every arm64 program is started under qemu-aarch64,
the kernel too, in the kernelspec's argv; Debian's python3 with -L SYSROOT, the wheel's program
as the copy beside it that names the sysroot's loader (scripts/aarch64.sh says why).

Environment (scripts/aarch64.sh sets it): KWD_AARCH64_SYSROOT, KWD_AARCH64_VENV (the arm64
virtualenv holding the wheel).

What qemu-user cannot show is skipped by name below (QEMU_CANNOT_SHOW), with the reason.
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
from conftest import Watched, load_reports, own_memory_cgroup_dir, private_jupyter  # noqa: E402

SYSROOT = pathlib.Path(os.environ["KWD_AARCH64_SYSROOT"])
VENV = pathlib.Path(os.environ["KWD_AARCH64_VENV"])
QEMU = ["qemu-aarch64", "-L", str(SYSROOT)]
PYTHON = [*QEMU, str(SYSROOT / "usr" / "bin" / "python3")]
VENV_PYTHON = [*QEMU, str(VENV / "bin" / "python")]
SITE = VENV / "lib" / "python3.11" / "site-packages"
BINARY = SITE / "kernel_watchdog" / "_bin" / "kernel-watchdog"
WATCHDOG = ["qemu-aarch64", f"{BINARY}.qemu"]
MiB = 1024 * 1024

# What a process under qemu-user is not, seen from outside it: the kernel's pid is qemu's
# own x86_64 process, which translates the arm64 code. The watchdog reads these of the kernel,
# and on a real arm64 machine would find them; here they are qemu's, so they are not checked.
QEMU_CANNOT_SHOW = {
    "native_stack": "qemu-user implements no ptrace for the programs it runs (ENOSYS), and from "
                    "outside, ptrace of an emulated process would stop qemu's x86_64 threads "
                    "and read their registers, not the arm64 program's: the native frames of "
                    "the crash (crash_stack.frames, kernel-watchdog stacks) are not checked",
    "maps": "/proc/<pid>/maps of an emulated process lists qemu's own mappings and the arm64 "
            "files at qemu's host addresses, not the guest's address space: the environment "
            "fingerprint's loaded libraries are not checked",
}


def run(argv, **kw):
    kw.setdefault("timeout", 300)
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{argv} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def arm64_elf(path):
    with open(path, "rb") as f:
        header = f.read(20)
    return header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183  # EM_AARCH64


# --- the wheel ----------------------------------------------------------------------------------

def test_wheel_is_installed_for_aarch64_with_its_libraries():
    assert arm64_elf(BINARY), BINARY
    for module in ("kernel-watchdog-http.so", "kernel-watchdog-crash.so", "libzmq.so.5",
                   "libcrypto.so.3"):
        assert arm64_elf(BINARY.parent / module), module
    bundled = list((SITE / "kernel_watchdog.libs").iterdir())
    assert bundled and all(arm64_elf(p) for p in bundled), bundled
    # The arm64 interpreter itself says where the package's program is.
    found = run([*VENV_PYTHON, "-c",
                 "import platform, kernel_watchdog._binary as b; "
                 "print(platform.machine(), b.find_binary())"]).stdout.split()
    assert found == ["aarch64", str(BINARY)]


def test_program_runs_from_the_wheel():
    out = run([*WATCHDOG, "--version"]).stdout
    assert "0.1.0" in out, out


def test_console_script_and_module_exec_the_program():
    """`python -m kernel_watchdog` and the `kernel-watchdog` console script, run by the arm64
    interpreter, exec the program. Without binfmt_misc the build machine's kernel cannot exec an
    arm64 file, so the program is named by the shim's own override, a script that runs it under
    qemu (the exec, its arguments and its exit status are the shim's, as on arm64)."""
    wrapper = VENV / "kernel-watchdog-under-qemu"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(WATCHDOG)} "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "KERNEL_WATCHDOG_BINARY": str(wrapper)}
    out = run([*VENV_PYTHON, "-m", "kernel_watchdog", "--version"], env=env).stdout
    assert "0.1.0" in out, out
    out = run([*VENV_PYTHON, VENV / "bin" / "kernel-watchdog", "--version"], env=env).stdout
    assert "0.1.0" in out, out


# --- a real arm64 kernel, dying -------------------------------------------------------------------

@pytest.fixture
def arm64_kernel(tmp_path, monkeypatch):
    """start(prefix=()) -> Watched: an arm64 ipykernel under the arm64 `kernel-watchdog run`,
    both under qemu, started by jupyter_client from a kernelspec whose argv says so; `prefix`
    goes before it (e.g. a shell that moves the watchdog into a cgroup first)."""
    started = []

    def start(prefix=()):
        argv = [*prefix, *WATCHDOG, "run", "--", *PYTHON, "-m", "ipykernel_launcher",
                "-f", "{connection_file}"]
        _, env = private_jupyter(tmp_path, monkeypatch, {"arm64": (argv, "python")})
        k = Watched("arm64", env, manager_kwargs={"transport": "ipc"})
        started.append(k)
        return k

    yield start
    for k in started:
        k.close()


def death_report(k, tmp_path, cell, signum, timeout):
    """Runs a cell that kills the kernel; the one report, once the launcher (the watchdog, which
    ends as its kernel did) is seen killed by `signum`. Read back by the arm64 program too, as a
    user would, and the same."""
    assert k.execute_until_death(cell, timeout=timeout) == -signum
    reports = load_reports(tmp_path / "reports")
    assert len(reports) == 1, [r["termination"] for r in reports]
    shown = json.loads(run([*WATCHDOG, "reports", "show", "--json", "latest", "--report-dir",
                            tmp_path / "reports"]).stdout)
    assert shown["diagnosis"] == reports[0]["diagnosis"]
    assert reports[0]["termination"]["signal_name"] == signal.Signals(signum).name
    assert reports[0]["diagnosis"]["confidence"] == "high"
    return reports[0]


def test_segfault_in_an_arm64_kernel_is_a_native_crash(arm64_kernel, tmp_path):
    k = arm64_kernel()
    reply, _ = k.execute("import platform; m = platform.machine()", timeout=120)
    assert reply["status"] == "ok"
    _, outputs = k.execute("print(m)", timeout=60)
    assert [o for o in outputs if o["content"].get("text") == "aarch64\n"], outputs
    report = death_report(k, tmp_path,
                          "import ctypes, time\n"
                          "def read_sensor(address):\n"
                          "    return ctypes.string_at(address)\n"
                          "time.sleep(0.3)\n"
                          "read_sensor(0)\n", signal.SIGSEGV, timeout=120)
    d = report["diagnosis"]
    assert d["cause"] == "native_crash", d["headline"]
    # faulthandler, turned on by the watchdog's shim in the arm64 interpreter, names the cell.
    tb = report["python_traceback"]
    assert tb is not None, report["stderr_tail"]["text"][-2000:]
    assert tb["fatal_error"] == "Segmentation fault"
    assert tb["frames"][0]["function"] == "string_at"
    assert [f for f in tb["frames"] if f["function"] == "read_sensor" and f["in_cell"]]
    assert "read_sensor()" in d["headline"], d["headline"]
    assert report["execution"]["cell_in_flight"]["code"].startswith("import ctypes")
    # The crash handler the shim loads (kernel-watchdog-crash.so, arm64) reports the fault from
    # inside the kernel; the native frames would need ptrace, which qemu-user refuses (ENOSYS):
    # the report says so, and test_native_frames_of_the_crash is skipped.
    crash = report["crash_stack"]
    assert crash["signal"] == signal.SIGSEGV and crash["fault_address"] == "0x0", crash
    assert "ptrace refused: Function not implemented" in crash["missing"], crash


def test_native_frames_of_the_crash():
    pytest.skip(QEMU_CANNOT_SHOW["native_stack"])


def test_fingerprint_of_loaded_libraries():
    pytest.skip(QEMU_CANNOT_SHOW["maps"])


@pytest.fixture
def memory_cgroup():
    """A child of this process's own cgroup v1 memory cgroup with a 400 MiB limit (a container's
    limit, set outside the watchdog); removed after the test."""
    parent = own_memory_cgroup_dir()
    if parent is None or not (parent / "memory.limit_in_bytes").exists():
        pytest.fail("no cgroup v1 memory hierarchy to make a limited child in")
    child = parent / f"kwd-aarch64-{os.getpid()}"
    child.mkdir()
    try:
        (child / "memory.limit_in_bytes").write_text(str(400 * MiB))
        yield child
    finally:
        for _ in range(50):
            try:
                child.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_oom_kill_of_an_arm64_kernel_in_a_memory_cgroup(arm64_kernel, memory_cgroup, tmp_path):
    # The watchdog (and so its kernel) starts in the limited cgroup, as in a container.
    into_cgroup = ["sh", "-c", f'echo $$ > {memory_cgroup}/cgroup.procs && exec "$@"', "sh"]
    k = arm64_kernel(prefix=into_cgroup)
    reply, _ = k.execute("import time; held = []", timeout=120)
    assert reply["status"] == "ok"
    time.sleep(1)  # some samples before the climb
    report = death_report(k, tmp_path,
                          "while True:\n"
                          "    held.append(bytearray(b'x' * (16 * 1024 * 1024)))\n"
                          "    time.sleep(0.1)\n", signal.SIGKILL, timeout=180)
    d = report["diagnosis"]
    assert d["cause"] == "oom_killed_cgroup", d["headline"]
    cg = report["cgroup"]
    assert cg["limit"] == 400 * MiB and cg["oom_kill_delta"] >= 1, cg
    assert cg["created_by_watchdog"] is False
    assert "400.0 MiB" in d["headline"], d["headline"]
