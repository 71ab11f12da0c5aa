"""Launcher mode, end to end: a real ipykernel under the watchdog through jupyter_client."""
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from conftest import KWD_BINARY, PLAIN, WRAPPED, Watched, kwd, load_reports


def result_text(outputs):
    return [m["content"]["data"]["text/plain"] for m in outputs
            if m["msg_type"] == "execute_result"]


def test_cell_result_identical_with_and_without_watchdog(start_kernel, jupyter_env):
    code = "import os, sys\nsum(range(10)), sys.executable"
    watched = start_kernel(WRAPPED)
    plain = start_kernel(PLAIN)
    r1, out1 = watched.execute(code)
    r2, out2 = plain.execute(code)
    assert r1["status"] == r2["status"] == "ok"
    assert result_text(out1) == result_text(out2)
    assert result_text(out1)[0].startswith("(45,")
    # stdout and stderr streams reach the front end as before
    _, out = watched.execute("print('to stdout'); import sys; print('to stderr', file=sys.stderr)")
    streams = {(m["content"]["name"], m["content"]["text"]) for m in out if m["msg_type"] == "stream"}
    assert ("stdout", "to stdout\n") in streams and ("stderr", "to stderr\n") in streams


def test_kernel_is_child_in_same_process_group_with_parent_pid(start_kernel):
    k = start_kernel()
    assert k.kernel_pid != k.launcher_pid
    assert psutil.Process(k.kernel_pid).ppid() == k.launcher_pid
    assert os.getpgid(k.kernel_pid) == os.getpgid(k.launcher_pid)
    _, out = k.execute("import os; os.environ['JPY_PARENT_PID']")
    assert result_text(out) == [repr(str(k.launcher_pid))]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux defers the libraries")
def test_libzmq_and_libcrypto_are_opened_once_needed_not_before_the_kernel_starts(tmp_path):
    def libraries(pid):
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read()
        return {name for name in ("libzmq", "libcrypto") if name in maps}

    # A kernel with no connection file: nothing to listen to, nothing to sign.
    proc = subprocess.Popen([KWD_BINARY, "run", "--report-dir", str(tmp_path / "reports"), "--",
                             "sleep", "30"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(proc.pid).children():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        assert libraries(proc.pid) == set()
    finally:
        proc.terminate()
        proc.wait()
    # A real kernel with its connection file: both are opened once the watchdog listens, and
    # only after the kernel was started (the watchdog's own debug log says in which order).
    from jupyter_client.connect import write_connection_file
    connection_file, _ = write_connection_file(str(tmp_path / "kernel-libs.json"),
                                               key=b"a-key-so-messages-are-signed")
    proc = subprocess.Popen(
        [KWD_BINARY, "--log-level", "debug", "run", "--report-dir", str(tmp_path / "reports"),
         "--", "/usr/bin/python3", "-m", "ipykernel_launcher", "-f", connection_file],
        stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 60
        while not all(any(f"opened {library}" in line for line in lines)
                      for library in ("libzmq.so.5", "libcrypto.so.3")):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stderr.readline())
        started = next(i for i, line in enumerate(lines) if "kernel started: pid" in line)
        zmq = next(i for i, line in enumerate(lines) if "opened libzmq.so.5" in line)
        crypto = next(i for i, line in enumerate(lines) if "opened libcrypto.so.3" in line)
        assert started < zmq and started < crypto, "".join(lines)
        assert libraries(proc.pid) == {"libzmq", "libcrypto"}
    finally:
        proc.terminate()
        proc.wait()


def test_interrupt_reaches_cell_and_kernel_lives(start_kernel, jupyter_env):
    k = start_kernel()
    msg_id = k.kc.execute("import time; time.sleep(60)")
    time.sleep(1.0)
    k.km.interrupt_kernel()
    reply = k.kc.get_shell_msg(timeout=20)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert k.km.is_alive()
    # ipykernel aborts requests queued right behind an error (stop_on_error); give it a beat.
    time.sleep(0.5)
    r, out = k.execute("1 + 1")
    assert r["status"] == "ok" and result_text(out) == ["2"]
    assert load_reports(jupyter_env["report_dir"]) == []


def test_graceful_shutdown_and_restart_write_no_report(start_kernel, jupyter_env):
    k = start_kernel()
    k.execute("x = 1")
    old_launcher = k.launcher_pid
    k.km.restart_kernel()
    k.kc.wait_for_ready(timeout=60)
    assert k.launcher_pid != old_launcher
    r, out = k.execute("2 * 21")
    assert result_text(out) == ["42"]
    k.km.shutdown_kernel()
    assert not k.km.is_alive()
    assert load_reports(jupyter_env["report_dir"]) == []


def kill_from_outside(k):
    os.kill(k.kernel_pid, signal.SIGKILL)
    return k.wait_for_death()


DEATHS = {
    # name: (how, expected termination fields)
    "segfault": ("import ctypes; ctypes.string_at(0)", {"kind": "signal", "signal_name": "SIGSEGV"}),
    "abort": ("import os; os.abort()", {"kind": "signal", "signal_name": "SIGABRT"}),
    "exit3": ("import os; os._exit(3)", {"kind": "exit", "exit_code": 3}),
    "sigkill": (kill_from_outside, {"kind": "signal", "signal_name": "SIGKILL"}),
}


def die(k, how):
    if callable(how):
        k.execute("x = 1")
        return how(k)
    return k.execute_until_death(how)


@pytest.mark.parametrize("death", sorted(DEATHS))
def test_death_writes_one_report_and_manager_sees_same_returncode(death, start_kernel, jupyter_env):
    how, expected = DEATHS[death]
    plain_rc = die(start_kernel(PLAIN), how)
    k = start_kernel(WRAPPED)
    kernel_pid = k.kernel_pid
    watched_rc = die(k, how)
    assert watched_rc == plain_rc, (watched_rc, plain_rc)
    reports = load_reports(jupyter_env["report_dir"])
    assert len(reports) == 1, reports
    r = reports[0]
    for key, value in expected.items():
        assert r["termination"][key] == value
    assert r["termination"]["returncode"] == plain_rc
    assert r["kernel"]["pid"] == kernel_pid
    assert r["watchdog"]["pid"] == k.launcher_pid
    assert "ipykernel_launcher" in r["kernel"]["argv"]
    assert r["kernel"]["died_at_ms"] >= r["kernel"]["started_at_ms"]
    # Reports are private.
    files = list(jupyter_env["report_dir"].iterdir())
    assert [f for f in files if f.name.startswith(".")] == []
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    assert oct(jupyter_env["report_dir"].stat().st_mode & 0o777) == "0o700"


def test_memory_timeline_and_stderr_tail_before_death(start_kernel, jupyter_env):
    k = start_kernel()
    r, _ = k.execute("import numpy as np\nbig = np.ones(500 * 1024 * 1024 // 8)\nbig.nbytes")
    assert r["status"] == "ok"
    time.sleep(0.5)
    k.execute_until_death(
        "import os, sys\n"
        "os.write(2, b'last words from the kernel\\n')\n"
        "import ctypes; ctypes.string_at(0)")
    (report,) = load_reports(jupyter_env["report_dir"])
    mem = report["memory"]
    assert mem["peak"]["rss"] >= 500 * 1024 * 1024
    samples = mem["samples"]
    assert len(samples["t_ms"]) == len(samples["rss"]) >= 10
    assert max(v for v in samples["rss"] if v is not None) >= 500 * 1024 * 1024
    # The memory is read again while the faulting thread waits in the crash handler: the
    # timeline reaches the crash itself, not the sampler's last tick before it (an order of
    # events, not a duration: on a loaded machine the tick can be late).
    crash = report["crash_stack"]
    assert crash["reported_at_ms"] <= samples["t_ms"][-1] <= report["kernel"]["died_at_ms"]
    assert mem["last_sample_before_death_ms"] >= 0
    text = report["stderr_tail"]["text"]
    assert "last words from the kernel" in text
    # The last thing the kernel wrote before dying, followed only by what the dying
    # interpreter printed about its death (faulthandler, which the watchdog turns on).
    after = text[text.rfind("last words from the kernel") + len("last words from the kernel"):]
    assert after.strip() == "" or after.lstrip().startswith("Fatal Python error: Segmentation fault")


def test_a_native_crash_says_one_line_on_stderr_and_keeps_the_stack_for_the_report(tmp_path):
    """faulthandler's stack (the watchdog turned it on, the kernel did not) goes to the report,
    not to the terminal: there the kernel's own output and the watchdog's one line."""
    reports = tmp_path / "reports"
    proc = subprocess.run(
        [KWD_BINARY, "run", "--", "/usr/bin/python3", "-c",
         "import os, sys, time\nos.write(2, b'own words\\n')\ntime.sleep(0.3)\n"
         "import ctypes; ctypes.string_at(0)"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(reports)))
    assert proc.returncode == 128 + 11 or proc.returncode == -11, proc
    assert "own words" in proc.stderr
    assert "Fatal Python error" not in proc.stderr, proc.stderr
    ours = [line for line in proc.stderr.splitlines() if "kernel-watchdog" in line]
    assert len(ours) == 1 and "crash report: " in ours[0], proc.stderr
    (report,) = load_reports(reports)
    assert "Fatal Python error: Segmentation fault" in report["stderr_tail"]["text"]


def test_run_without_kernel_argv_is_a_usage_error():
    proc = kwd("run", check=False)
    assert proc.returncode == 2
    assert "kernel_argv" in proc.stderr or "Usage" in proc.stderr


def test_missing_kernel_program_exits_127_with_a_clear_message(tmp_path):
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "r"))
    proc = kwd("run", "--", "/no/such/python", "-m", "ipykernel_launcher", check=False, env=env)
    assert proc.returncode == 127
    assert "/no/such/python" in proc.stderr and "No such file" in proc.stderr


def test_unwritable_report_dir_kernel_still_runs_and_report_goes_to_fallback(
        start_kernel, jupyter_env, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the report directory should be")
    bad_dir = blocker / "reports"
    log = open(tmp_path / "kernel-stderr.log", "w+")
    k = start_kernel(env_overrides={"KERNEL_WATCHDOG_REPORT_DIR": str(bad_dir)}, stderr=log)
    r, out = k.execute("21 * 2")
    assert result_text(out) == ["42"]
    k.execute_until_death("import os; os.abort()")
    fallback = tmp_path / f"kernel-watchdog-{os.geteuid()}" / "reports"
    (report,) = load_reports(fallback)
    assert report["termination"]["signal_name"] == "SIGABRT"
    assert any("report directory unusable" in n for n in report["notes"])
    log.seek(0)
    text = log.read()
    assert str(bad_dir) in text
    assert str(fallback) in text


def test_store_never_shows_half_written_reports(tmp_path):
    store = tmp_path / "store"
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(store))
    proc = kwd("run", "--", "sh", "-c", "exit 5", check=False, env=env)
    assert proc.returncode == 5
    # A writer that died mid-write leaves a temporary; it is never listed, and the next
    # watchdog to start sweeps it.
    leftover = store / ".tmp-999999-abcdef"
    leftover.write_text('{"half": ')
    listing = kwd("reports", "list", env=env).stdout
    assert ".tmp-" not in listing and listing.count(str(store)) == 1
    kwd("run", "--", "true", env=env)
    assert not leftover.exists()
    assert [p.name for p in store.iterdir() if p.name.startswith(".")] == []
