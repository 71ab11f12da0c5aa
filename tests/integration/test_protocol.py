"""The watchdog as a read-only participant of the Jupyter protocol: IOPub, heartbeat, the
cell in flight, hangs and clean shutdowns, with a real ipykernel through jupyter_client, and a
pyzmq publisher (iopub_publisher.py) standing in for the kernel where ipykernel cannot be made
to produce the case (forged, oversized, CurveZMQ traffic)."""
import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
import zmq
from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

from conftest import KWD_BINARY, WRAPPED, load_reports, sanitizer_build

HERE = pathlib.Path(__file__).resolve().parent
PUBLISHER = HERE / "iopub_publisher.py"
GiB = 1024 ** 3
MiB = 1024 ** 2

# A crashing cell that does a little work first, as real ones do. ipykernel publishes busy and
# execute_input from a thread that needs the GIL: a cell that segfaults within a millisecond
# of starting can die before either is out, and then no IOPub listener can know it started
# (when busy got out but execute_input did not, the report infers the count: see the unit
# test "a cell that dies before its execute_input got out...").
CRASH_AFTER_WORK = "import ctypes, time\ntime.sleep(0.3)\nctypes.string_at(0)"


def only_report(report_dir):
    reports = load_reports(report_dir)
    assert len(reports) == 1, [r.get("kind") for r in reports]
    return reports[0]


def cells_by_count(report):
    return {c["execution_count"]: c for c in report["execution"]["last_cells"]}


def log_file(tmp_path, name="watchdog-stderr.log"):
    return open(tmp_path / name, "w+")


def read_log(f):
    f.flush()
    f.seek(0)
    return f.read()


# 1 -----------------------------------------------------------------------------------------

def test_segfault_in_cell_3_names_it_and_lists_cells_1_and_2(start_kernel, jupyter_env):
    k = start_kernel()
    r1, _ = k.execute("a = 1")
    r2, _ = k.execute("b = b'x' * (256 * 1024 * 1024)\nlen(b)")
    assert r1["status"] == r2["status"] == "ok"
    k.execute_until_death(CRASH_AFTER_WORK)

    report = only_report(jupyter_env["report_dir"])
    assert report["kind"] == "crash"
    assert report["termination"]["signal_name"] == "SIGSEGV"
    execution = report["execution"]
    assert execution["state_at_death"] == "busy"
    assert execution["shutdown_requested"] is False
    flight = execution["cell_in_flight"]
    assert flight["execution_count"] == 3
    assert flight["execution_count_inferred"] is False
    assert flight["code"] == CRASH_AFTER_WORK
    assert flight["running_for_s"] >= 0.3
    assert flight["started_at_ms"] <= report["kernel"]["died_at_ms"]

    cells = cells_by_count(report)
    assert sorted(cells) == [1, 2]
    assert cells[1]["code"] == "a = 1"
    assert cells[2]["code"] == "b = b'x' * (256 * 1024 * 1024)\nlen(b)"
    for c in cells.values():
        assert c["status"] == "ok"
        assert 0 <= c["duration_s"] < 30
        assert c["ended_at_ms"] - c["started_at_ms"] == pytest.approx(c["duration_s"] * 1000, abs=1)
        assert c["rss_start"] > 0 and c["rss_end"] > 0
        assert c["rss_delta"] == c["rss_end"] - c["rss_start"]
    # The 256 MiB of bytes are charged to cell 2, not to its neighbours. The kernel's RSS moves
    # by a few MiB of its own meanwhile (CI saw -5.2 MiB beside 64 MiB of bytes), so the bytes
    # must dwarf that for the check to be about them.
    assert cells[2]["rss_delta"] >= 240 * MiB
    assert abs(cells[1]["rss_delta"]) < 32 * MiB

    protocol = report["protocol"]
    assert protocol["connection_file"] == {"ok": True, "problem": None}
    assert protocol["transport"] == "tcp"
    assert protocol["signature_scheme"] == "hmac-sha256"
    assert protocol["curve"] is False
    assert protocol["messages_seen"] >= 9  # busy, execute_input, idle for each cell at least
    assert protocol["dropped"] == {}
    heartbeat = report["heartbeat"]
    assert heartbeat["interval_ms"] == 1000 and heartbeat["timeout_ms"] == 1000
    assert heartbeat["misses_to_hang"] == 5
    assert heartbeat["misses_total"] == 0 and heartbeat["hang_episodes"] == 0
    assert heartbeat["last_beat_ms"] is not None
    assert all(b["ok"] for b in heartbeat["history"]) and heartbeat["history"]


def test_errors_and_outputs_shown_to_the_user_are_in_the_report(start_kernel, jupyter_env):
    k = start_kernel()
    k.execute("import sys; print('out'); print('careful: about to divide', file=sys.stderr)")
    # stop_on_error=False: ipykernel would otherwise abort the next request if it arrived
    # inside the error's abort window (seen under the ASan build: the display cell was lost).
    reply, _ = k.execute("1/0", stop_on_error=False)
    assert reply["status"] == "error"
    k.execute("from IPython.display import display, HTML\ndisplay(HTML('<b>' + 'x' * 3 + '</b>'))\n42")
    k.execute_until_death(CRASH_AFTER_WORK)
    report = only_report(jupyter_env["report_dir"])
    execution = report["execution"]
    err = execution["last_error"]
    assert err["execution_count"] == 2
    assert err["ename"] == "ZeroDivisionError"
    assert err["evalue"] == "division by zero"
    assert any("ZeroDivisionError" in line for line in err["traceback"])
    assert "careful: about to divide" in execution["stream_stderr_tail"]
    cells = cells_by_count(report)
    assert cells[1]["outputs"]["stdout_bytes"] == len("out\n")
    assert cells[2]["status"] == "error" and cells[2]["outputs"]["errors"] == 1
    shown = cells[3]["outputs"]["last_displays"]
    assert [d["msg_type"] for d in shown] == ["display_data", "execute_result"]
    assert "text/html" in shown[0]["mime_types"]
    assert "<b>xxx</b>" not in json.dumps(execution)  # sizes and types, never the data


# 2 -----------------------------------------------------------------------------------------

def test_the_cell_that_added_a_gigabyte_is_the_one_charged_with_it(start_kernel, jupyter_env):
    k = start_kernel()
    for code in ("import numpy as np", "big = np.ones(GiB // 8)".replace("GiB", str(GiB)),
                 "small = list(range(1000))"):
        reply, _ = k.execute(code)
        assert reply["status"] == "ok", reply
    k.execute_until_death(CRASH_AFTER_WORK)
    report = only_report(jupyter_env["report_dir"])
    cells = cells_by_count(report)
    assert sorted(cells) == [1, 2, 3]
    assert report["execution"]["cell_in_flight"]["execution_count"] == 4
    big = cells[2]
    assert big["code"].startswith("big = np.ones(")
    assert big["rss_delta"] >= 0.95 * GiB
    assert big["rss_peak"] >= big["rss_start"] + 0.95 * GiB
    assert abs(cells[1]["rss_delta"]) < 0.1 * GiB
    assert abs(cells[3]["rss_delta"]) < 0.1 * GiB
    # It never gave it back: the cell in flight started with it.
    assert report["execution"]["cell_in_flight"]["rss_at_start"] >= big["rss_end"] - 0.05 * GiB


# 3 -----------------------------------------------------------------------------------------

def test_shutdown_reply_makes_a_later_bad_exit_no_crash(start_kernel, jupyter_env):
    """After a shutdown the manager asked for, the kernel's exit is not a crash whatever its
    status: here an atexit handler makes it exit 7, which without the shutdown_reply would be
    reported (see test_launcher's exit3)."""
    k = start_kernel()
    k.execute("import atexit, os, time\natexit.register(lambda: (time.sleep(0.3), os._exit(7)))")
    launcher = k.km.provisioner.process
    k.km.shutdown_kernel(now=False)
    assert launcher.wait(timeout=30) == 7
    assert load_reports(jupyter_env["report_dir"]) == []


def test_restart_through_jupyter_client_is_no_crash(start_kernel, jupyter_env):
    k = start_kernel()
    k.execute("import atexit, os, time\natexit.register(lambda: (time.sleep(0.3), os._exit(9)))")
    first = k.km.provisioner.process
    k.km.restart_kernel()
    k.kc.wait_for_ready(timeout=60)
    assert first.wait(timeout=30) == 9
    reply, _ = k.execute("6 * 7")
    assert reply["status"] == "ok"
    k.km.shutdown_kernel()
    assert load_reports(jupyter_env["report_dir"]) == []


def test_exit_typed_in_a_cell_is_no_crash(start_kernel, jupyter_env):
    k = start_kernel()
    k.execute("x = 1")
    rc = k.execute_until_death("exit()")
    assert rc == 0
    assert load_reports(jupyter_env["report_dir"]) == []


# 4 -----------------------------------------------------------------------------------------

def test_sigstop_makes_one_hang_report_then_recovered(start_kernel, jupyter_env, tmp_path):
    log = log_file(tmp_path)
    k = start_kernel(stderr=log)
    k.execute("x = 1")
    cell = "import time\ntime.sleep(10)"
    msg_id = k.kc.execute(cell)
    time.sleep(0.5)
    kernel_pid = k.kernel_pid
    os.kill(kernel_pid, signal.SIGSTOP)
    try:
        time.sleep(8)
    finally:
        os.kill(kernel_pid, signal.SIGCONT)
    # Beats come back with the next ping (1 s apart).
    deadline = time.monotonic() + 10
    while "recovered" not in read_log(log) and time.monotonic() < deadline:
        time.sleep(0.1)
    reply = k.kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok"
    r, _ = k.execute("1 + 1")
    assert r["status"] == "ok"

    text = read_log(log)
    assert len(re.findall(r"hang report: ", text)) == 1, text
    assert len(re.findall(r"recovered", text)) == 1, text
    report = only_report(jupyter_env["report_dir"])
    assert report["kind"] == "hang"
    assert report["termination"] is None
    assert report["kernel"]["died_at_ms"] is None
    assert report["kernel"]["pid"] == kernel_pid
    hang = report["hang"]
    assert hang["consecutive_misses"] >= 5
    assert hang["process_state"] == "T (stopped)"
    assert hang["threads"] and all(t["state"] == "T (stopped)" for t in hang["threads"])
    assert any(t["tid"] == kernel_pid for t in hang["threads"])
    assert report["heartbeat"]["hang_episodes"] == 1
    assert report["heartbeat"]["consecutive_misses"] >= 5
    assert [b["ok"] for b in report["heartbeat"]["history"]][-5:] == [False] * 5
    # The report says what was running when it stopped answering.
    flight = report["execution"]["cell_in_flight"]
    assert flight["code"] == cell and flight["execution_count"] == 2
    assert report["execution"]["state_at_death"] == "busy"

    # A clean shutdown afterwards adds nothing.
    k.km.shutdown_kernel()
    assert len(load_reports(jupyter_env["report_dir"])) == 1


# 5 -----------------------------------------------------------------------------------------

def run_stand_in(tmp_path, scenario, connection_file, extra=(), timeout=90):
    """Runs iopub_publisher.py as the kernel under the watchdog; returns (completed process,
    what the publisher observed, the one report)."""
    result_file = tmp_path / f"{scenario}-result.json"
    report_dir = tmp_path / f"{scenario}-reports"
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(report_dir))
    proc = subprocess.run(
        [KWD_BINARY, "run", "--", sys.executable, str(PUBLISHER), "-f", str(connection_file),
         "--scenario", scenario, "--result", str(result_file), *extra],
        env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 3, proc.stderr  # the stand-in's status, mirrored
    return proc, json.loads(result_file.read_text()), only_report(report_dir)


def new_connection_file(tmp_path, key=b"protocol-test-key-0123456789", **extra):
    path, _ = write_connection_file(str(tmp_path / "kernel-test.json"), ip="127.0.0.1", key=key,
                                    transport="tcp", signature_scheme="hmac-sha256")
    if extra:
        info = json.loads(pathlib.Path(path).read_text())
        info.update(extra)
        pathlib.Path(path).write_text(json.dumps(info))
    return pathlib.Path(path)


def test_forged_truncated_oversized_and_non_json_messages_are_dropped_and_counted(tmp_path):
    cf = new_connection_file(tmp_path)
    proc, seen, report = run_stand_in(tmp_path, "forged", cf)
    assert seen["subscribed"] and seen["resubscribed"], seen
    protocol = report["protocol"]
    assert protocol["dropped"] == {
        "bad_signature": 3,       # signed with another key
        "too_few_frames": 2,      # truncated
        "missing_delimiter": 1,
        "invalid_json": 1,        # correctly signed, not JSON
        "unsigned": 1,
        "replayed_signature": 1,  # a good message sent twice
        "connection_reset": 1,    # the 100 MB frame: refused by libzmq, connection cut
    }
    # Everything good got through, before and after the reset: the watchdog kept running.
    assert protocol["messages_seen"] == seen["sent_good"] == 4
    assert protocol["reconnects"] == 1
    (cell,) = report["execution"]["last_cells"]
    assert cell["code"] == "print('believed')" and cell["outputs"]["stdout_bytes"] == len("after reset\n")
    text = json.dumps(report)
    for forged in ("FORGED", "TRUNCATED", "UNSIGNED"):
        assert forged not in text
    # The 100 MB frame was never buffered: the watchdog's peak RSS stayed small. Under ASan
    # that peak is the allocator's quarantine and shadow memory: the normal build checks it,
    # the sanitizer build runs the rest (what it reads of hostile frames).
    if not sanitizer_build():
        assert seen["watchdog_peak_rss_kb"] * 1024 < 48 * MiB, seen


# 6 -----------------------------------------------------------------------------------------

def curve_files(tmp_path, right_key):
    server_public, server_secret = zmq.curve_keypair()
    file_public, file_secret = (server_public, server_secret) if right_key else zmq.curve_keypair()
    cf = new_connection_file(tmp_path, curve_publickey=file_public.decode(),
                             curve_secretkey=file_secret.decode())
    secret_file = tmp_path / "server.secret"
    secret_file.write_bytes(server_secret)
    return cf, secret_file, file_secret.decode()


def test_curve_encrypted_iopub_is_read(tmp_path):
    cf, secret_file, secret = curve_files(tmp_path, right_key=True)
    proc, seen, report = run_stand_in(tmp_path, "curve", cf,
                                      ["--server-secret-file", str(secret_file)])
    assert seen["subscribed"]
    protocol = report["protocol"]
    assert protocol["curve"] is True
    assert protocol["messages_seen"] == 3 and protocol["dropped"] == {}
    assert [c["code"] for c in report["execution"]["last_cells"]] == ["curve cell"]
    assert "handshake" not in proc.stderr
    assert secret not in json.dumps(report) and secret not in proc.stderr


def test_curve_with_the_wrong_server_key_believes_nothing_and_warns(tmp_path):
    cf, secret_file, secret = curve_files(tmp_path, right_key=False)
    proc, seen, report = run_stand_in(tmp_path, "curve", cf,
                                      ["--server-secret-file", str(secret_file),
                                       "--subscribe-timeout", "3"])
    assert not seen["subscribed"]  # the handshake never completed
    protocol = report["protocol"]
    assert protocol["curve"] is True
    assert protocol["messages_seen"] == 0
    assert protocol["handshake_failures"] >= 1
    assert report["execution"]["last_cells"] == [] and report["execution"]["cell_in_flight"] is None
    warnings = [l for l in proc.stderr.splitlines() if "CurveZMQ handshake" in l]
    assert len(warnings) == 1 and "curve_publickey" in warnings[0], proc.stderr
    assert secret not in json.dumps(report) and secret not in proc.stderr


# 7 -----------------------------------------------------------------------------------------

KEY = "5ecret-k3y-that-must-never-be-shown-0000"
MALFORMED = {
    "missing_ports": ('{"ip": "127.0.0.1", "key": "%s", "hb_port": 5, "transport": "tcp"}' % KEY,
                      "field 'iopub_port': missing"),
    "bad_json": ('{"iopub_port": 1, "hb_port": 2, "key": "%s" "transport": "tcp"}' % KEY,
                 "not valid JSON (syntax error near byte"),
    "unknown_scheme": ('{"iopub_port": 1, "hb_port": 2, "key": "%s", "signature_scheme": "hmac-nosuch"}' % KEY,
                       "field 'signature_scheme': 'hmac-nosuch': this OpenSSL has no hash 'nosuch'"),
    "key_not_a_string": ('{"iopub_port": 1, "hb_port": 2, "key": ["%s"]}' % KEY,
                         "field 'key': must be a string, not array"),
}

# Stands in for a kernel: runs a while, then dies of SIGABRT (ipykernel itself refuses most of
# these files, and the point is the watchdog's behaviour, not the kernel's).
STAND_IN = "import os, sys, time; print('kernel running', flush=True); time.sleep(1.5); os.abort()"


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_connection_file_kernel_still_runs_and_is_watched(case, tmp_path):
    text, problem = MALFORMED[case]
    cf = tmp_path / "kernel-bad.json"
    cf.write_text(text)
    report_dir = tmp_path / "reports"
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(report_dir),
               KERNEL_WATCHDOG_LOG_LEVEL="trace")
    proc = subprocess.run([KWD_BINARY, "run", "--", sys.executable, "-c", STAND_IN, "-f", str(cf)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGABRT  # the kernel ran and its end was mirrored
    assert "kernel running" in proc.stdout
    warnings = [l for l in proc.stderr.splitlines() if "connection file unusable" in l]
    assert len(warnings) == 1, proc.stderr  # once
    assert problem in warnings[0] and str(cf) in warnings[0]
    report = only_report(report_dir)
    assert report["termination"]["signal_name"] == "SIGABRT"
    assert report["memory"]["samples"]["rss"]  # process-level monitoring still worked
    assert report["protocol"]["connection_file"]["ok"] is False
    assert problem in report["protocol"]["connection_file"]["problem"]
    assert any(problem in n for n in report["notes"])
    assert report["protocol"]["messages_seen"] == 0
    assert report["heartbeat"]["watched"] is False
    assert KEY not in proc.stderr and KEY not in json.dumps(report)


@contextlib.contextmanager
def client_of(proc, connection_file):
    """A ready client of the kernel that `proc` (a watchdog) runs; the watchdog is killed on
    the way out if it is still there."""
    kc = BlockingKernelClient(connection_file=str(connection_file))
    kc.load_connection_file()
    kc.start_channels()
    try:
        # Without a manager, the client calls a kernel dead until its first heartbeat.
        deadline = time.monotonic() + 30
        while True:
            try:
                kc.wait_for_ready(timeout=30)
                break
            except RuntimeError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        yield kc
    finally:
        kc.stop_channels()
        if proc.poll() is None:
            proc.kill()


def crash_in_a_cell(kc, proc):
    kc.execute(CRASH_AFTER_WORK)
    assert proc.wait(timeout=30) == -signal.SIGSEGV


def ports_written_in(cf):
    """Whether ipykernel has rewritten the file with its ports. jupyter_core's secure_write
    removes the file before writing it again, so for a moment it is missing or half written."""
    try:
        return json.loads(cf.read_text()).get("iopub_port", 0) != 0
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def test_missing_ports_in_a_real_ipykernel_file_are_picked_up_once_it_rewrites_it(tmp_path):
    """ipykernel fills in missing ports and rewrites the file: the watchdog warns about the
    file it was given, keeps re-reading it, and listens once it is usable."""
    cf = tmp_path / "kernel-ports.json"
    cf.write_text(json.dumps({"ip": "127.0.0.1", "key": KEY, "transport": "tcp",
                              "signature_scheme": "hmac-sha256"}))
    report_dir = tmp_path / "reports"
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(report_dir))
    proc = subprocess.Popen([KWD_BINARY, "run", "--", sys.executable, "-m", "ipykernel_launcher",
                             "-f", str(cf)], env=env, stderr=subprocess.PIPE, text=True,
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ports_written_in(cf):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    with client_of(proc, cf) as kc:
        reply = kc.execute_interactive("y = 2", timeout=30)
        assert reply["content"]["status"] == "ok"
        time.sleep(1.0)  # the watchdog re-reads the file every 200 ms
        crash_in_a_cell(kc, proc)
    stderr = proc.stderr.read()
    assert "field 'iopub_port': missing" in stderr
    assert "is usable now" in stderr
    report = only_report(report_dir)
    assert report["protocol"]["connection_file"]["ok"] is True
    assert report["execution"]["cell_in_flight"]["code"] == CRASH_AFTER_WORK
    assert any("unusable at first" in n for n in report["notes"])
    assert KEY not in stderr and KEY not in json.dumps(report)


def test_a_bare_connection_file_name_is_found_in_the_runtime_dir(tmp_path):
    """`-f kernel-x.json` is what ipykernel looks up in the working directory and then in
    Jupyter's runtime directory: the watchdog finds the same file and listens."""
    runtime, work = tmp_path / "runtime", tmp_path / "work"
    runtime.mkdir()
    work.mkdir()
    cf, _ = write_connection_file(str(runtime / "kernel-bare.json"), key=KEY.encode())
    report_dir = tmp_path / "reports"
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(report_dir),
               JUPYTER_RUNTIME_DIR=str(runtime))
    proc = subprocess.Popen([KWD_BINARY, "run", "--", sys.executable, "-m", "ipykernel_launcher",
                             "-f", "kernel-bare.json"], env=env, cwd=work,
                            stderr=subprocess.PIPE, text=True, stdout=subprocess.DEVNULL)
    with client_of(proc, cf) as kc:
        crash_in_a_cell(kc, proc)
    stderr = proc.stderr.read()
    assert "connection file unusable" not in stderr, stderr
    report = only_report(report_dir)
    assert report["kernel"]["connection_file"] == str(runtime / "kernel-bare.json")
    assert report["protocol"]["connection_file"]["ok"] is True
    assert report["protocol"]["messages_seen"] > 0
    assert report["execution"]["cell_in_flight"]["code"] == CRASH_AFTER_WORK


# The key, in every log line and report ------------------------------------------------------

def test_the_key_never_appears_in_logs_or_reports(start_kernel, jupyter_env, tmp_path):
    log = log_file(tmp_path)
    k = start_kernel(env_overrides={"KERNEL_WATCHDOG_LOG_LEVEL": "trace"}, stderr=log)
    key = k.km.session.key.decode()
    assert len(key) >= 16
    k.execute("print('hello')")
    k.execute_until_death(CRASH_AFTER_WORK)
    text = read_log(log)
    assert "kernel-watchdog" in text and "crash report" in text
    assert key not in text
    report_text = "".join(p.read_text() for p in jupyter_env["report_dir"].glob("*.json"))
    assert report_text and key not in report_text


def test_ipc_transport(start_kernel, jupyter_env):
    k = start_kernel(manager_kwargs={"transport": "ipc"})
    k.execute("z = 3")
    k.execute_until_death(CRASH_AFTER_WORK)
    report = only_report(jupyter_env["report_dir"])
    assert report["protocol"]["transport"] == "ipc"
    assert report["heartbeat"]["last_beat_ms"] is not None
    assert cells_by_count(report)[1]["code"] == "z = 3"
    assert report["execution"]["cell_in_flight"]["execution_count"] == 2


# Options ------------------------------------------------------------------------------------

def wrap_with(jupyter_env, name, *run_options):
    from conftest import PLAIN, kwd
    kwd("kernelspec", "wrap", PLAIN, "--prefix", jupyter_env["prefix"], "--name", name,
        *[f"--run-option={o}" for o in run_options])
    return name


def test_heartbeat_and_last_cells_options(start_kernel, jupyter_env, tmp_path):
    name = wrap_with(jupyter_env, "python3-fast-hb", "--heartbeat-interval=0.2",
                     "--heartbeat-misses=3", "--last-cells=2")
    log = log_file(tmp_path)
    k = start_kernel(name, stderr=log)
    for i in range(1, 5):
        k.execute(f"c{i} = {i}")
    pid = k.kernel_pid
    os.kill(pid, signal.SIGSTOP)
    time.sleep(1.5)  # 3 misses at 0.2 s apart are well within it
    os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while "recovered" not in read_log(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    k.execute_until_death(CRASH_AFTER_WORK)
    reports = load_reports(jupyter_env["report_dir"])
    assert sorted(r["kind"] for r in reports) == ["crash", "hang"]
    hang = next(r for r in reports if r["kind"] == "hang")
    crash = next(r for r in reports if r["kind"] == "crash")
    assert hang["hang"]["consecutive_misses"] == 3
    hb = crash["heartbeat"]
    assert (hb["interval_ms"], hb["timeout_ms"], hb["misses_to_hang"]) == (200, 200, 3)
    assert hb["hang_episodes"] == 1 and hb["consecutive_misses"] == 0
    assert [c["execution_count"] for c in crash["execution"]["last_cells"]] == [3, 4]
    assert crash["execution"]["cell_in_flight"]["execution_count"] == 5


def test_heartbeat_misses_zero_turns_hang_reports_off(start_kernel, jupyter_env):
    name = wrap_with(jupyter_env, "python3-no-hang", "--heartbeat-interval=0.2",
                     "--heartbeat-misses=0")
    k = start_kernel(name)
    k.execute("x = 1")
    os.kill(k.kernel_pid, signal.SIGSTOP)
    time.sleep(1.5)
    os.kill(k.kernel_pid, signal.SIGCONT)
    r, _ = k.execute("x + 1")
    assert r["status"] == "ok"
    assert load_reports(jupyter_env["report_dir"]) == []
