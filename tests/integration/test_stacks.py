"""`kernel-watchdog stacks`: where every thread of a running kernel is.

Real kernels under `kernel-watchdog run` (through jupyter_client), stuck the two ways users'
kernels get stuck: in C with the GIL released, and in a Python lock deadlock. The command
must name the C function and its library, each thread's Python frames, leave the kernel
untraced and working, and let gdb attach after it.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from conftest import KWD_BINARY, REPO_ROOT, WRAPPED, kwd, load_reports, wrap_kernelspec
from test_smoke import write_notebook

STUCK_C = r"""
#include <errno.h>
#include <unistd.h>

/* Blocks in read(2) until the test writes a byte; a signal (the Python dump's) does not end it. */
int kwd_stuck_in_c(int fd) {
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n >= 0 || errno != EINTR) return (int)n;
  }
}
"""


@pytest.fixture
def kernel(start_kernel):
    return start_kernel


def wait_until(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def syscall_of(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            return f.read().split()[0]
    except OSError:
        return ""


def tracer_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    raise AssertionError("no TracerPid")


def stacks_json(pid, env=None):
    out = kwd("stacks", pid, "--json", env=env)
    return json.loads(out.stdout)


def thread(doc, tid):
    (t,) = [t for t in doc["threads"] if t["tid"] == tid]
    return t


def functions(frames):
    return [f["function"] for f in frames]


def drain_cell(k, msg_id, timeout=30):
    """Waits for the reply to an execute request sent without waiting."""
    deadline = time.monotonic() + timeout
    while True:
        reply = k.kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 1))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]


def start_stuck_in_c(kernel, tmp_path, name=WRAPPED):
    """A watched kernel whose cell is blocked in a C library's function (GIL released),
    until the test lets it go. Returns (kernel, release)."""
    source = tmp_path / "stuck.c"
    source.write_text(STUCK_C)
    library = tmp_path / "libkwdstuck.so"
    subprocess.run(["cc", "-g", "-O0", "-shared", "-fPIC", "-o", library, source], check=True)
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    k = kernel(name)
    pid = k.kernel_pid
    msg_id = k.kc.execute(
        "import ctypes, os\n"
        f"fd = os.open({str(fifo)!r}, os.O_RDWR)\n"
        f"ctypes.CDLL({str(library)!r}).kwd_stuck_in_c(fd)\n")
    wait_until(lambda: syscall_of(pid, pid) == "0", "the cell to block in read(2)")

    def release():
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(writer, b"x")
        os.close(writer)
        assert drain_cell(k, msg_id)["status"] == "ok"

    return k, release


@pytest.fixture
def stuck_in_c(kernel, tmp_path):
    return start_stuck_in_c(kernel, tmp_path)


def test_stacks_names_the_c_function_and_library_a_cell_is_stuck_in(stuck_in_c):
    k, release = stuck_in_c
    pid = k.kernel_pid
    doc = stacks_json(pid)
    main = thread(doc, pid)
    assert doc["native_missing"] is None, doc["native_missing"]
    assert main["syscall"] == "read"
    names = functions(main["native"])
    assert "kwd_stuck_in_c" in names, names
    (frame,) = [f for f in main["native"] if f["function"] == "kwd_stuck_in_c"]
    assert frame["module"].endswith("/libkwdstuck.so")
    assert frame["file"].endswith("stuck.c") and frame["line"] > 0  # built with -g
    # The shim's dump: the cell's own frame, on the thread that is stuck in C.
    assert doc["python_missing"] is None, doc["python_missing"]
    assert main["python"] and main["python"][0]["in_cell"], main["python"]
    # Joined: the C frames, then the cell.
    joined = main["joined"]
    at_c = next(i for i, line in enumerate(joined) if line.startswith("kwd_stuck_in_c "))
    at_cell = next(i for i, line in enumerate(joined) if line.startswith("<module> ("))
    assert at_c < at_cell
    assert doc["frozen_us"] is not None and doc["frozen_us"] >= 0

    text = kwd("stacks", pid).stdout
    assert f"Thread {pid} " in text and "(main" in text
    assert "kwd_stuck_in_c (libkwdstuck.so) at " in text

    # Let go: nothing traces it, it was never stopped for good, and it still runs cells.
    assert tracer_of(pid) == 0
    release()
    reply, outputs = k.execute("6 * 7")
    assert reply["status"] == "ok"
    assert [m["content"]["data"]["text/plain"] for m in outputs
            if m["msg_type"] == "execute_result"] == ["42"]
    assert tracer_of(pid) == 0


def test_stacks_never_asks_a_debuginfod_server(stuck_in_c):
    """Ubuntu and Fedora set DEBUGINFOD_URLS for every login (profile.d): libdw's standard
    lookup then asks those servers over the network for each module without local debug info.
    A capture looks on this machine only: a server listening there is never called, and the
    frames come as without it."""
    k, release = stuck_in_c
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    env = dict(os.environ, DEBUGINFOD_URLS=f"http://127.0.0.1:{server.getsockname()[1]}")
    doc = stacks_json(k.kernel_pid, env=env)
    assert "kwd_stuck_in_c" in functions(thread(doc, k.kernel_pid)["native"])
    with pytest.raises(BlockingIOError):
        server.accept()
    server.close()
    release()


def test_gdb_still_attaches_after_stacks(stuck_in_c):
    k, release = stuck_in_c
    pid = k.kernel_pid
    kwd("stacks", pid)
    gdb = subprocess.run(["gdb", "-q", "-nx", "-batch", "-p", str(pid), "-ex", "detach"],
                         capture_output=True, text=True, timeout=120)
    assert "Operation not permitted" not in gdb.stderr, gdb.stderr
    assert f"[Inferior 1 (process {pid}) detached]" in gdb.stdout, gdb.stdout + gdb.stderr
    assert gdb.returncode == 0, gdb.stderr
    assert tracer_of(pid) == 0
    release()


def test_py_spy_still_attaches_after_stacks(stuck_in_c):
    """py-spy (from PyPI, in the framework virtualenv) reads a watched kernel as it reads any
    Python process, before and after `stacks`: nothing of ours is left attached."""
    k, release = stuck_in_c
    pid = k.kernel_pid
    py_spy = REPO_ROOT / ".cache" / "venv-frameworks" / "bin" / "py-spy"
    assert py_spy.exists(), f"{py_spy} is missing: scripts/setup.sh installs it"
    for _ in ("before", "after"):
        dump = subprocess.run([str(py_spy), "dump", "--pid", str(pid)], capture_output=True,
                              text=True, timeout=120)
        assert dump.returncode == 0, dump.stdout + dump.stderr
        assert '"MainThread"' in dump.stdout and "<module> (" in dump.stdout, dump.stdout
        kwd("stacks", pid)
    assert tracer_of(pid) == 0
    release()


def test_stacks_shows_both_threads_of_a_python_lock_deadlock(kernel):
    k = kernel()
    pid = k.kernel_pid
    msg_id = k.kc.execute(
        "import threading, time\n"
        "a, b = threading.Lock(), threading.Lock()\n"
        "def kwd_worker_takes_b_then_a():\n"
        "    with b:\n"
        "        time.sleep(0.3)\n"
        "        with a:\n"
        "            pass\n"
        "def kwd_main_takes_a_then_b():\n"
        "    with a:\n"
        "        time.sleep(0.3)\n"
        "        with b:\n"
        "            pass\n"
        "threading.Thread(target=kwd_worker_takes_b_then_a, name='kwd-worker', daemon=True).start()\n"
        "kwd_main_takes_a_then_b()\n")
    wait_until(lambda: syscall_of(pid, pid) == "202", "the main thread to wait on its lock")
    time.sleep(0.5)  # both are in their second acquire by now
    doc = stacks_json(pid)
    assert doc["python_missing"] is None, doc["python_missing"]
    main = thread(doc, pid)
    assert "kwd_main_takes_a_then_b" in [f["function"] for f in main["python"]]
    (worker,) = [t for t in doc["threads"]
                 if "kwd_worker_takes_b_then_a" in [f["function"] for f in t["python"]]]
    assert worker["tid"] != pid and worker["syscall"] == "futex"
    assert worker["python"][0]["function"] == "kwd_worker_takes_b_then_a"
    # Python frames joined with native ones: the lock's wait in libc, then the Python.
    assert any(line.startswith("kwd_worker_takes_b_then_a (") for line in worker["joined"])

    text = kwd("stacks", pid).stdout
    assert "kwd_main_takes_a_then_b (" in text and "kwd_worker_takes_b_then_a (" in text
    # Said in words: the two threads, each in its function, and nothing else running.
    assert "What it waits on: in a deadlock: 2 threads each wait for a lock" in text, text
    assert f"thread {pid} in kwd_main_takes_a_then_b()" in text, text
    assert tracer_of(pid) == 0

    # The lock waits are interruptible: the cell ends, the worker gets both locks, the kernel
    # answers again.
    k.km.interrupt_kernel()
    assert drain_cell(k, msg_id)["status"] == "error"
    # ipykernel aborts what reaches it while it stops on that error (stop_on_error): "aborted"
    # is that rule, not a stuck kernel; the next request is answered.
    for _ in range(3):
        reply, _ = k.execute("1 + 1")
        if reply["status"] != "aborted":
            break
        time.sleep(0.2)
    assert reply["status"] == "ok", reply


def test_without_libdw_the_python_frames_still_come_and_the_reason_is_said(stuck_in_c):
    k, release = stuck_in_c
    pid = k.kernel_pid
    env = dict(os.environ, KERNEL_WATCHDOG_LIBDW="/nonexistent/libdw.so.1")
    out = kwd("stacks", pid, env=env)
    assert "Native frames not available: cannot load /nonexistent/libdw.so.1" in out.stdout
    assert "<module> (" in out.stdout  # the cell, from the shim's dump
    doc = json.loads(kwd("stacks", pid, "--json", env=env).stdout)
    assert doc["frozen_us"] is None and not thread(doc, pid)["native"]
    release()


def test_a_process_not_under_the_watchdog_gets_native_frames_and_the_reason_for_no_python():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        wait_until(lambda: syscall_of(sleeper.pid, sleeper.pid) not in ("", "running"),
                   "the sleeper to sleep")
        out = kwd("stacks", sleeper.pid).stdout
        assert "Python frames not available: the kernel was not started by" in out
        assert "clock_nanosleep" in out or "nanosleep" in out, out
        assert tracer_of(sleeper.pid) == 0
        assert sleeper.poll() is None  # no signal was sent that could kill it
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_traced_process_is_said_to_be_traced_not_failed():
    traced = subprocess.Popen(
        ["gdb", "-q", "-nx", "-batch", "-ex", "run", "--args", sys.executable, "-c",
         "import time; time.sleep(60)"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import psutil

    def the_traced_child():
        """gdb's child once gdb traces it, else None. Asked once a look: the child may not be
        there yet, or be gdb's shell on its way to exec the program (another look may differ)."""
        children = psutil.Process(traced.pid).children()
        if not children:
            return None
        try:
            return children[0].pid if tracer_of(children[0].pid) == traced.pid else None
        except FileNotFoundError:  # gone between the two reads
            return None

    child = None
    try:
        found = []
        wait_until(lambda: found.append(the_traced_child()) or found[-1] is not None,
                   "gdb's child")
        child = found[-1]
        out = kwd("stacks", child).stdout
        assert f"Native frames not available: the process is already traced by pid {traced.pid}" \
            in out, out
        assert "Thread " in out  # the states are still said
    finally:
        if child:
            os.kill(child, signal.SIGKILL)
        traced.kill()
        traced.wait()


def test_clear_errors_for_what_is_not_a_kernel():
    out = kwd("stacks", "999999999", check=False)
    assert out.returncode == 1 and "no process 999999999" in out.stderr
    out = kwd("stacks", "no-such-kernel-id", check=False)
    assert out.returncode == 1 and "no running kernel has the id" in out.stderr
    help_text = kwd("stacks", "--help").stdout
    assert "py-spy dump --native" in help_text and "Examples:" in help_text


# --- a hang report carries the stacks ----------------------------------------------------------

def test_a_hang_report_says_where_each_thread_was(kernel, jupyter_env, tmp_path):
    name = wrap_kernelspec(jupyter_env, "python3-hb", "--heartbeat-interval=0.2",
                           "--heartbeat-misses=3")
    k, release = start_stuck_in_c(kernel, tmp_path, name)
    pid = k.kernel_pid
    # Stopped while in C: its heartbeat thread stops answering too, and the watchdog reports a
    # hang, with the stacks taken then.
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        while not load_reports(jupyter_env["report_dir"]):
            assert time.monotonic() < deadline, "no hang report"
            time.sleep(0.1)
        (report,) = load_reports(jupyter_env["report_dir"])  # checked against the schema
    finally:
        os.kill(pid, signal.SIGCONT)
    assert report["kind"] == "hang"
    stacks = report["hang"]["stacks"]
    assert stacks["pid"] == pid and stacks["native_missing"] is None
    assert "stopped" in stacks["python_missing"]  # a stopped kernel cannot run its dump
    (main,) = [t for t in stacks["threads"] if t["main"]]
    assert "kwd_stuck_in_c" in functions(main["native"])
    shown = kwd("reports", "show", "latest").stdout
    assert "Where it is stuck" in shown and "kwd_stuck_in_c (libkwdstuck.so)" in shown, shown
    # Continued, untraced, and it works again.
    assert tracer_of(pid) == 0
    release()
    reply, _ = k.execute("1 + 1")
    assert reply["status"] == "ok"


# --- smoke: a cell timeout says where the cell was stuck ----------------------------------------

@pytest.fixture
def smoke_cells(tmp_path, monkeypatch):
    """smoke_cells(notebook, *options) -> (exit status, the notebook's cells, what smoke said)
    of `smoke --json`, run in tmp_path with a private TMPDIR and Jupyter runtime dir."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))

    def run(nb, *options):
        proc = subprocess.run(
            [KWD_BINARY, "smoke", "--output-dir", str(tmp_path / "out"), *map(str, options),
             "--json", str(nb)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        said = proc.stdout + proc.stderr
        try:
            cells = json.loads(proc.stdout)["notebooks"][0]["cells"]
        except (ValueError, KeyError, IndexError):
            raise AssertionError(f"no JSON result (status {proc.returncode}):\n{said}") from None
        return proc.returncode, cells, said
    return run


def smoke_one_cell(smoke_cells, nb, interrupt_grace):
    """`smoke --json` of a one-cell notebook with a 3 s cell timeout, which must fail: the cell."""
    status, (cell,), said = smoke_cells(nb, "--timeout", 3, "--interrupt-grace", interrupt_grace)
    assert status != 0, said
    return cell


def test_smoke_timeout_says_where_the_cell_was_stuck(tmp_path, smoke_cells):
    source = tmp_path / "stuck.c"
    source.write_text(STUCK_C)
    library = tmp_path / "libkwdstuck.so"
    subprocess.run(["cc", "-g", "-O0", "-shared", "-fPIC", "-o", library, source], check=True)
    nb = write_notebook(tmp_path / "stuck.ipynb", [
        "import ctypes, os\n"
        "r, w = os.pipe()\n"
        "def kwd_waits_for_c():\n"
        f"    ctypes.CDLL({str(library)!r}).kwd_stuck_in_c(r)\n"
        "kwd_waits_for_c()\n"])
    cell = smoke_one_cell(smoke_cells, nb, interrupt_grace=1)
    # Blocked in C, SIGINT cannot end it: killed after the grace, and the message still says
    # where it was.
    assert "kwd_stuck_in_c (libkwdstuck.so)" in cell["message"], cell["message"]
    assert "kwd_waits_for_c" in cell["message"], cell["message"]
    stacks = cell["stacks"]
    (main,) = [t for t in stacks["threads"] if t["main"]]
    assert "kwd_stuck_in_c" in functions(main["native"])
    assert "kwd_waits_for_c" in [f["function"] for f in main["python"]]


def test_stacks_says_a_cell_waits_for_input_no_one_answers(kernel):
    """input() in a cell whose front end went away (a closed tab): the kernel answers its
    heartbeat and looks fine; `stacks` says what it waits for."""
    k = kernel()
    msg_id = k.kc.execute("answer = input('your name? ')\n", allow_stdin=True)
    request = k.kc.get_stdin_msg(timeout=30)
    assert request["msg_type"] == "input_request"
    text = kwd("stacks", k.kernel_pid).stdout
    assert "What it waits on: waiting for input(): " in text, text
    k.kc.input("nobody")
    assert drain_cell(k, msg_id)["status"] == "ok"


def test_stacks_says_a_cell_is_busy_in_its_own_loop(kernel):
    """A loop that never ends: the main thread runs (it is runnable at every look, before and
    after the capture), in the cell's own function, and is said to be busy there."""
    k = kernel()
    pid = k.kernel_pid
    k.kc.execute("def kwd_spins_for_ever():\n"
                 "    n = 0\n"
                 "    while True:\n"
                 "        n += 1\n"
                 "kwd_spins_for_ever()\n")
    wait_until(lambda: "kwd_spins_for_ever" in kwd("stacks", pid).stdout, "the loop to run")
    text = kwd("stacks", pid).stdout
    assert "What it waits on: busy running the cell's own Python code: " \
        "kwd_spins_for_ever() at " in text, text
    assert tracer_of(pid) == 0
    k.km.interrupt_kernel()
    for _ in range(3):  # what reaches it while it stops on the interrupt's error is aborted
        reply, _ = k.execute("1 + 1")
        if reply["status"] != "aborted":
            break
        time.sleep(0.2)
    assert reply["status"] == "ok", reply


def test_smoke_fails_a_cell_that_asks_for_input_at_once(tmp_path, smoke_cells):
    """Under smoke nothing can answer input(): it asks the kernel not to offer stdin
    (allow_stdin false), so the cell fails with ipykernel's own error instead of waiting for
    the cell timeout."""
    nb = write_notebook(tmp_path / "asks.ipynb", ["name = input('your name? ')\n"])
    status, (cell,), said = smoke_cells(nb, "--timeout", 600)
    assert status == 1, said
    assert cell["status"] == "failed" and "stacks" not in cell, cell
    assert cell["message"].startswith("StdinNotImplementedError: "), cell["message"]


def test_smoke_timeout_names_a_deadlock(tmp_path, smoke_cells):
    nb = write_notebook(tmp_path / "deadlock.ipynb", [
        "import threading, time\n"
        "a, b = threading.Lock(), threading.Lock()\n"
        "def kwd_b_then_a():\n"
        "    with b:\n"
        "        time.sleep(0.3)\n"
        "        with a:\n"
        "            pass\n"
        "threading.Thread(target=kwd_b_then_a, daemon=True).start()\n"
        "with a:\n"
        "    time.sleep(0.3)\n"
        "    with b:\n"
        "        pass\n"])
    cell = smoke_one_cell(smoke_cells, nb, interrupt_grace=5)
    assert "in a deadlock: 2 threads each wait for a lock" in cell["message"], cell["message"]
    assert "kwd_b_then_a()" in cell["message"], cell["message"]


def test_stacks_names_the_dataloader_worker_a_cell_waits_for(kernel):
    """A DataLoader whose worker is stuck in the dataset's own code: the kernel's main thread
    waits in _next_data; `stacks` shows the workers too (child processes), and says which
    worker it waits for and where that worker is."""
    k = kernel()
    pid = k.kernel_pid
    msg_id = k.kc.execute(
        "import time, torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class KwdSlow(Dataset):\n"
        "    def __len__(self):\n"
        "        return 64\n"
        "    def __getitem__(self, i):\n"
        "        if i == 5:\n"
        "            time.sleep(3600)\n"
        "        return torch.zeros(1)\n"
        "for batch in DataLoader(KwdSlow(), num_workers=2, batch_size=None):\n"
        "    pass\n")
    workers = []

    def sleeping(worker):  # in time.sleep: the kernel's wait of a nanosleep, on any machine
        try:
            with open(f"/proc/{worker.pid}/wchan") as f:
                return f.read() == "hrtimer_nanosleep"
        except OSError:
            return False

    def a_worker_sleeps():
        workers[:] = psutil.Process(pid).children()
        return any(sleeping(w) for w in workers)

    wait_until(a_worker_sleeps, "a DataLoader worker to sleep in __getitem__", timeout=90)
    [sleeper] = [w.pid for w in workers if sleeping(w)]
    doc = stacks_json(pid)
    assert doc["children_total"] == len(workers) >= 2, doc["children_total"]
    child = {c["pid"]: c for c in doc["children"]}[sleeper]
    # The worker's own Python stack, through the dump its shim inherited at the fork.
    assert child["python_missing"] is None, child["python_missing"]
    assert thread(child, sleeper)["python"][0]["function"] == "__getitem__"
    assert tracer_of(sleeper) == 0

    text = kwd("stacks", pid).stdout
    assert ("What it waits on: waiting for the DataLoader's worker processes: worker pid "
            f"{sleeper} is in __getitem__() at") in text, text
    assert f"Child process {sleeper}: " in text, text

    k.km.interrupt_kernel()
    assert drain_cell(k, msg_id, timeout=60)["status"] == "error"


def test_smoke_timeout_names_the_stopped_dataloader_worker(tmp_path, smoke_cells):
    """A DataLoader worker stopped in the dataset's code (SIGSTOP: a debugger's breakpoint, a
    job-control stop, a container frozen): the cell waits for ever. smoke's timeout says which
    worker, that it is stopped, and the worker's stack is in the cell's stacks."""
    nb = write_notebook(tmp_path / "loader.ipynb", [
        "import os, signal, torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class KwdStops(Dataset):\n"
        "    def __len__(self):\n"
        "        return 64\n"
        "    def __getitem__(self, i):\n"
        "        if i == 5:\n"
        "            os.kill(os.getpid(), signal.SIGSTOP)\n"
        "        return torch.zeros(1)\n",
        "for batch in DataLoader(KwdStops(), num_workers=2, batch_size=None):\n"
        "    pass\n"])
    # The first cell imports torch (seconds on a loaded machine): the timeout leaves it time.
    status, (first, cell), said = smoke_cells(nb, "--timeout", 30, "--interrupt-grace", 2)
    assert status != 0, said
    assert first["status"] == "passed", first
    message = cell["message"]
    stopped = re.search(r"waiting for the DataLoader's worker processes: worker pid ([0-9]+) "
                        r"is stopped", message)
    assert stopped, message
    worker = {c["pid"]: c for c in cell["stacks"]["children"]}[int(stopped.group(1))]
    # Stopped, it cannot run its own dump; its native stack is read all the same: the stop
    # is in the kill() the dataset's __getitem__ made.
    assert "stopped" in (worker["python_missing"] or ""), worker
    assert worker["native_missing"] is None, worker
    (main,) = [t for t in worker["threads"] if t["main"]]
    assert "kill" in functions(main["native"]), functions(main["native"])
    # smoke ends the kernel's whole process group, as jupyter_client does: the stopped worker
    # went with it (it was left stopped for ever before, one more each run).
    def gone():
        try:
            return psutil.Process(worker["pid"]).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    wait_until(gone, "the stopped worker to end with its kernel", timeout=10)

