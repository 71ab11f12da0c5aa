"""The watchdog killed together with its kernel: a container's whole cgroup OOM-killed
(memory.oom.group) or stopped with SIGKILL takes `kernel-watchdog run` with the kernel, and
no one is left to write the report. The flight record the watchdog kept in the store lets the
next watchdog started there (the container's restart) write it.

Both faults are made for real: the OOM killer itself ends the watchdog and then the kernel in
a cgroup v1 memory limit, and the unified hierarchy's cgroup.kill (what a container's stop and
memory.oom.group do) ends them in the same instant."""
import json
import os
import pathlib
import secrets
import signal
import time

import pytest

from conftest import KWD_BINARY, WRAPPED, Watched, load_reports, own_memory_cgroup_dir, \
    validate_report

UNIFIED = pathlib.Path("/sys/fs/cgroup/unified")


def kill_all_in(cgroup):
    try:
        pids = (cgroup / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except ProcessLookupError:
            pass


def remove_cgroup(cgroup):
    kill_all_in(cgroup)
    deadline = time.monotonic() + 10
    while cgroup.exists():
        try:
            cgroup.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def kernelspec_entering(jupyter_env, name, cgroups):
    """A kernelspec whose argv puts itself into `cgroups` and then execs `kernel-watchdog run`
    with Debian's ipykernel: the watchdog and the kernel it starts share those cgroups, as in
    a container."""
    spec = jupyter_env["prefix"] / "share" / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    enter = " && ".join(f"echo $$ > {c}/cgroup.procs" for c in cgroups)
    script = (f"{enter} && exec {KWD_BINARY} run -- /usr/bin/python3 -m ipykernel_launcher "
              f"-f \"$0\"")
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/bin/sh", "-c", script, "{connection_file}"],
        "display_name": name, "language": "python"}))
    return name


def flight_records(report_dir):
    """The records and their locks (<record>.lock)."""
    return sorted(report_dir.glob(".flight-*"))


def wait_for_flight(report_dir, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in flight_records(report_dir):
            if path.name.endswith(".lock"):
                continue
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if predicate(record):
                return record
        time.sleep(0.05)
    raise AssertionError(f"no such flight record in {report_dir}: "
                         f"{[p.name for p in flight_records(report_dir)]}")


def wait_gone(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while pathlib.Path(f"/proc/{pid}").exists():
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text() if pathlib.Path(
            f"/proc/{pid}/stat").exists() else ""
        if ") Z " in stat:  # a zombie: dead, its parent not told yet
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} still alive")
        time.sleep(0.05)


def report_from_next_watchdog(jupyter_env, start_kernel, timeout=40):
    """The container's restart: another watchdog started with the same store finds the flight
    record and writes the report. Returns that one report."""
    start_kernel()  # a fresh kernel under `run`, as after a restart
    report_dir = jupyter_env["report_dir"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [r for r in load_reports(report_dir) if "flight_record" in r["watchdog"]]
        if found:
            assert len(found) == 1, [r["id"] for r in found]
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no report from the flight record in {report_dir}: "
                         f"{[p.name for p in report_dir.iterdir()]}")


@pytest.fixture
def memory_cgroup():
    base = own_memory_cgroup_dir()
    if base is None or not os.access(base, os.W_OK):
        pytest.skip("needs a writable cgroup v1 memory hierarchy")
    cgroup = base / f"kwd-flight-{secrets.token_hex(4)}"
    cgroup.mkdir()
    yield cgroup
    remove_cgroup(cgroup)


@pytest.fixture
def unified_cgroup():
    if not (UNIFIED / "cgroup.procs").exists() or not os.access(UNIFIED, os.W_OK):
        pytest.skip("needs a writable cgroup v2 (unified) hierarchy")
    own = next(line.split(":", 2)[2] for line in
               pathlib.Path("/proc/self/cgroup").read_text().splitlines()
               if line.startswith("0::"))
    cgroup = UNIFIED / own.lstrip("/") / f"kwd-flight-{secrets.token_hex(4)}"
    cgroup.mkdir()
    if not (cgroup / "cgroup.kill").exists():
        cgroup.rmdir()
        pytest.skip("cgroup.kill needs Linux 5.14")
    yield cgroup
    remove_cgroup(cgroup)


def test_a_watchdog_the_oom_killer_took_with_its_kernel_is_reported_by_the_next_one(
        jupyter_env, start_kernel, memory_cgroup):
    limit = 320 << 20
    (memory_cgroup / "memory.limit_in_bytes").write_text(str(limit))
    name = kernelspec_entering(jupyter_env, "python3-in-a-container", [memory_cgroup])
    shm = pathlib.Path("/dev/shm") / memory_cgroup.name
    k = Watched(name, jupyter_env["env"])
    try:
        watchdog, kernel = k.launcher_pid, k.kernel_pid
        # The OOM killer takes the watchdog first (as memory.oom.group would take it with the
        # kernel), then the kernel, which goes on allocating alone. The watchdog is made its
        # first choice (oom_score_adj 1000: the limit added to its score; lowering the
        # kernel's needs CAP_SYS_RESOURCE, which this machine's root lacks), and 120 MiB of
        # the limit is held where no process's score counts it: a file in /dev/shm, charged
        # to the cgroup that wrote it, as a DataLoader's shared memory is.
        pathlib.Path(f"/proc/{watchdog}/oom_score_adj").write_text("1000")
        r, _ = k.execute(f"with open({str(shm)!r}, 'wb') as f:\n"
                         f"    f.write(bytes(120 << 20))\n")
        assert r["status"] == "ok", r
        # Fast, then slowly (80 MiB/s) over the last stretch, so that the watchdog's samples
        # (10 a second) follow it up to the limit.
        k.kc.execute("import time\nheld = []\nwhile True:\n"
                     "    held.append(bytearray(4 << 20))\n"
                     "    time.sleep(0.01 if len(held) < 16 else 0.05)\n")
        wait_gone(watchdog)
        wait_gone(kernel)
    finally:
        k.close()
        shm.unlink(missing_ok=True)
    oom_kills = dict(line.split() for line in
                     (memory_cgroup / "memory.oom_control").read_text().splitlines())
    assert int(oom_kills["oom_kill"]) >= 1

    report = report_from_next_watchdog(jupyter_env, start_kernel)
    validate_report(report)
    assert report["kernel"]["pid"] == kernel
    assert report["watchdog"]["flight_record"]["watchdog_pid"] == watchdog
    d = report["diagnosis"]
    assert d["cause"] == "oom_killed_cgroup", d
    assert "together with its watchdog" in d["headline"], d["headline"]
    assert "while cell [2] ran" in d["headline"], d["headline"]
    assert "of its cgroup's 320" in d["headline"], d["headline"]
    facts = " ".join(e["fact"] for e in d["evidence"])
    assert "oom_kill counter" in facts or "OOM killer killed" in facts, facts
    # The record was kept current as the memory neared the limit: its last reading is within
    # the last tenth of it.
    usage = report["memory"]["samples"]["cgroup_usage"][-1]
    assert usage >= limit * 0.9, (usage, limit)
    assert "bytearray" in report["execution"]["cell_in_flight"]["code"]
    # Claimed and removed (the record, then its lock): only the new kernel's own are left.
    deadline = time.monotonic() + 10
    while any(p.name.startswith(f".flight-{kernel}-")
              for p in flight_records(jupyter_env["report_dir"])):
        assert time.monotonic() < deadline, flight_records(jupyter_env["report_dir"])
        time.sleep(0.05)


def test_a_whole_cgroup_killed_at_once_is_reported_with_the_last_cell_and_memory(
        jupyter_env, start_kernel, unified_cgroup):
    name = kernelspec_entering(jupyter_env, "python3-in-a-container", [unified_cgroup])
    k = Watched(name, jupyter_env["env"])
    try:
        watchdog, kernel = k.launcher_pid, k.kernel_pid
        k.kc.execute("import time\nheld = bytearray(200 << 20)\ntime.sleep(600)\n")
        # The record says so before the kill: the cell started, the memory it took.
        wait_for_flight(jupyter_env["report_dir"],
                        lambda r: r["kernel_pid"] == kernel and r["cell"]["execution_count"] == 1
                        and r["memory"]["rss"] >= 200 << 20)
        (unified_cgroup / "cgroup.kill").write_text("1")
        wait_gone(watchdog)
        wait_gone(kernel)
    finally:
        k.close()

    report = report_from_next_watchdog(jupyter_env, start_kernel)
    validate_report(report)
    d = report["diagnosis"]
    # SIGKILL to both, no OOM: nothing says how the kernel ended, and nothing is guessed.
    assert d["cause"] == "unknown", d
    assert d["headline"].startswith("Kernel ended together with its watchdog"), d["headline"]
    assert "while cell [1] ran" in d["headline"], d["headline"]
    assert report["termination"]["kind"] == "unknown"
    assert report["execution"]["cell_in_flight"]["execution_count"] == 1
    assert report["memory"]["samples"]["rss"][-1] >= 200 << 20
    assert any("went with the watchdog" in m for m in d["missing"]), d["missing"]

    # A second watchdog started later finds nothing more to report.
    start_kernel()
    time.sleep(7)
    assert len([r for r in load_reports(jupyter_env["report_dir"])
                if "flight_record" in r["watchdog"]]) == 1


def test_a_kernel_killed_with_its_watchdog_after_its_manager_asked_for_the_end_is_not_reported(
        jupyter_env, start_kernel, unified_cgroup):
    name = kernelspec_entering(jupyter_env, "python3-in-a-container", [unified_cgroup])
    k = Watched(name, jupyter_env["env"])
    try:
        watchdog, kernel = k.launcher_pid, k.kernel_pid
        k.kc.execute("import time\ntime.sleep(600)\n")
        wait_for_flight(jupyter_env["report_dir"],
                        lambda r: r["kernel_pid"] == kernel and r["cell"]["execution_count"] == 1)
        # The manager ends the kernel (SIGTERM to the watchdog, which passes it on after a
        # grace period), then kills what is left of the process group, as jupyter_client does
        # when a shutdown is not answered in time: both die of SIGKILL, on the manager's word.
        os.kill(watchdog, signal.SIGTERM)
        # The record says so at once; had the kernel ended of the SIGTERM passed on after 1 s
        # meanwhile (a slow machine), its watchdog has removed the record itself: either way
        # nothing is left to report.
        deadline = time.monotonic() + 30
        while True:
            records = []
            for p in flight_records(jupyter_env["report_dir"]):
                if p.name.startswith(f".flight-{kernel}-") and not p.name.endswith(".lock"):
                    try:
                        records.append(json.loads(p.read_text()))
                    except FileNotFoundError:  # removed between the listing and the read
                        pass
            if not records or all(r["end_requested"] for r in records):
                break
            assert time.monotonic() < deadline, records
            time.sleep(0.05)
        (unified_cgroup / "cgroup.kill").write_text("1")
        wait_gone(watchdog)
        wait_gone(kernel)
    finally:
        k.close()
    start_kernel()
    time.sleep(7)  # the next watchdog looks 5 s after its start
    assert not [r for r in load_reports(jupyter_env["report_dir"])
                if "flight_record" in r["watchdog"]]
    assert not [p for p in flight_records(jupyter_env["report_dir"])
                if p.name.startswith(f".flight-{kernel}-")]
