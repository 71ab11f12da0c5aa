"""Native frames at a crash (issue 38): a real ipykernel under the real watchdog dies inside a
C++ library this test builds, and the report's crash_stack, its headline and its evidence name
the function (demangled), the library, the source line, and the cell that called it. The crash
handler the shim loads (kernel-watchdog-crash.so) tells the watchdog, which reads the faulting
thread's stack before the kernel dies; faulthandler's Python frames still come after it.

ipykernel runs in its default configuration (fd 2 captured), as for users: PYTEST_CURRENT_TEST
is taken out of the kernel's environment."""
import os
import signal
import subprocess

import pytest

from conftest import kwd, load_reports
# The kernel fixture: ipykernel in its default configuration (fd 2 captured).
from test_diagnosis import kernel, only_report  # noqa: F401
from test_stacks import tracer_of

CRASHY = r"""
#include <stdexcept>

namespace crashy {

__attribute__((noinline)) int poke(volatile int* where) {
  *where = 42;  // the segfault's line
  return *where;
}

__attribute__((noinline)) void must_not_throw() noexcept {
  throw std::runtime_error("thrown through a noexcept function");
}

__attribute__((noinline)) void trap() {
  __builtin_trap();
}

}  // namespace crashy

extern "C" int crashy_segfault() { return crashy::poke(nullptr); }
extern "C" void crashy_terminate() { crashy::must_not_throw(); }
extern "C" void crashy_trap() { crashy::trap(); }
"""

POKE_LINE = CRASHY.splitlines().index("  *where = 42;  // the segfault's line") + 1


@pytest.fixture(scope="module")
def crashy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crashy")
    source = folder / "crashy.cpp"
    source.write_text(CRASHY)
    library = folder / "libcrashy.so"
    # -Wno-terminate: the throw through noexcept is the point.
    subprocess.run(["g++", "-g", "-O1", "-Wno-terminate", "-shared", "-fPIC", "-o", str(library),
                    str(source)], check=True)
    return library


def crash_in(kernel, library, entry):
    """A watched kernel whose second cell calls `entry` of the library; its return code."""
    k = kernel()
    k.execute("import ctypes, time; time.sleep(0.1)")
    # Nothing traces the kernel while it runs: gdb and py-spy can still attach.
    assert tracer_of(k.kernel_pid) == 0
    return k.execute_until_death(f"import ctypes\nctypes.CDLL({str(library)!r}).{entry}()\n")


def frame_named(frames, name):
    found = [f for f in frames if f["function"] and f["function"].startswith(name)]
    assert found, [(f["function"], f["module"]) for f in frames]
    return found[0]


def test_a_segfault_names_the_cpp_function_its_library_and_line(kernel, jupyter_env, crashy):
    assert crash_in(kernel, crashy, "crashy_segfault") == -signal.SIGSEGV
    report = only_report(jupyter_env)
    stack = report["crash_stack"]
    assert stack["missing"] is None, stack
    assert stack["signal"] == signal.SIGSEGV and stack["fault_address"] == "0x0"
    assert stack["si_code"] == 1  # SEGV_MAPERR: nothing mapped at address 0
    top = stack["frames"][0]
    # The handler's own frames are cut: the first frame is the faulting instruction.
    assert top["pc"] == stack["pc"]
    assert top["function"] == "crashy::poke(int volatile*)", top
    assert top["module"].endswith("/libcrashy.so")
    assert top["file"].endswith("crashy.cpp") and top["line"] == POKE_LINE
    frame_named(stack["frames"], "crashy_segfault")
    d = report["diagnosis"]
    assert d["cause"] == "native_crash"
    assert "crashy::poke(int volatile*) in libcrashy.so, called from" in d["headline"]
    assert "of cell [2]" in d["headline"]
    assert any(e["pointer"] == "/crash_stack/frames/0" and f"crashy.cpp:{POKE_LINE}" in e["fact"]
               for e in d["evidence"])
    # faulthandler ran after the handshake: the Python frames are there as before.
    assert report["python_traceback"]["fatal_error"] == "Segmentation fault"
    # And the terminal summary shows the native frame.
    shown = kwd("reports", "show", "latest", env=jupyter_env["env"]).stdout
    assert "crashy::poke(int volatile*)" in shown


def test_terminate_from_noexcept_names_the_function_that_threw(kernel, jupyter_env, crashy):
    assert crash_in(kernel, crashy, "crashy_terminate") == -signal.SIGABRT
    report = only_report(jupyter_env)
    stack = report["crash_stack"]
    assert stack["missing"] is None, stack
    assert stack["signal"] == signal.SIGABRT and stack["si_code"] <= 0  # sent by abort()
    # abort() and libstdc++'s terminate are above it; the culprit is the library's function.
    names = [f["function"] for f in stack["frames"]]
    assert any(n and n.startswith("abort") for n in names), names
    thrower = frame_named(stack["frames"], "crashy::must_not_throw()")
    assert thrower["module"].endswith("/libcrashy.so")
    d = report["diagnosis"]
    assert d["cause"] == "abort"
    assert "crashy::must_not_throw() in libcrashy.so" in d["headline"], d["headline"]


def test_a_trap_names_the_function_that_trapped(kernel, jupyter_env, crashy):
    # __builtin_trap is ud2 on x86_64 (SIGILL) and brk on aarch64 (SIGTRAP).
    code = crash_in(kernel, crashy, "crashy_trap")
    assert code in (-signal.SIGILL, -signal.SIGTRAP)
    report = only_report(jupyter_env)
    stack = report["crash_stack"]
    assert stack["missing"] is None, stack
    assert stack["frames"][0]["function"] == "crashy::trap()"
    assert "crashy::trap() in libcrashy.so" in report["diagnosis"]["headline"]


def test_without_libdw_the_crash_still_reports_and_says_why_no_frames(kernel, jupyter_env,
                                                                      crashy):
    jupyter_env["env"]["KERNEL_WATCHDOG_LIBDW"] = "/nonexistent/libdw.so.1"
    assert crash_in(kernel, crashy, "crashy_segfault") == -signal.SIGSEGV
    report = only_report(jupyter_env)
    stack = report["crash_stack"]
    assert stack["frames"] == [] and "cannot load /nonexistent/libdw.so.1" in stack["missing"]
    d = report["diagnosis"]
    assert d["cause"] == "native_crash"
    assert any(m.startswith("crash_stack: cannot load") for m in d["missing"]), d["missing"]
    # The Python line is still named.
    assert "of cell [2]" in d["headline"]


def test_a_forked_child_that_crashes_does_not_hold_up_or_confuse_the_kernel(kernel, jupyter_env,
                                                                            crashy):
    """A child the kernel forks (a DataLoader worker, a multiprocessing pool) inherits the
    handler: it dies of its signal at once, without a handshake, and the kernel lives on."""
    k = kernel()
    _, out = k.execute(
        "import ctypes, os\n"
        "pid = os.fork()\n"
        f"if pid == 0:\n    ctypes.CDLL({str(crashy)!r}).crashy_segfault()\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child', os.WIFSIGNALED(status) and os.WTERMSIG(status))\n")
    assert any(f"child {signal.SIGSEGV.value}" in m["content"].get("text", "") for m in out), out
    assert k.km.is_alive()
    assert load_reports(jupyter_env["report_dir"]) == []


def test_the_handler_never_reaches_the_kernels_children_environment(kernel):
    k = kernel()
    _, out = k.execute("import os\nprint(sorted(v for v in os.environ if 'WATCHDOG_CRASH' in v))\n")
    assert any("[]" in m["content"].get("text", "") for m in out), out
