"""Sources that fail during a run, each made to fail for real: the kernel log unreadable from
the start (a device node on a nodev mount, as in a container), the kernel log flooded so that
its records are overwritten before the watchdog reads them, and the wall clock stepped an hour
back and forward. Each is named in the report's `missing`, and nothing else is lost: the
cause, the cells, the memory.

The flood and the clock step touch the whole machine (another test's OOM line could be the one
overwritten; a step changes every process's clock), so those two run alone (quiet_machine)."""
import ctypes
import ctypes.util
import json
import os
import signal
import time

import pytest

from conftest import KWD_BINARY, Watched, load_reports, wrap_kernelspec

CLOCK_REALTIME = 0


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def step_wall_clock(seconds):
    """Steps the machine's wall clock (CLOCK_REALTIME) by `seconds`, as `date -s` does."""
    now = _Timespec()
    assert _libc.clock_gettime(CLOCK_REALTIME, ctypes.byref(now)) == 0
    now.tv_sec += seconds
    if _libc.clock_settime(CLOCK_REALTIME, ctypes.byref(now)) != 0:
        errno = ctypes.get_errno()
        if errno == 1:  # EPERM: no CAP_SYS_TIME (a container that may not set the clock)
            pytest.skip("may not set the wall clock here (EPERM)")
        raise OSError(errno, "clock_settime")


def only_report(jupyter_env):
    reports = load_reports(jupyter_env["report_dir"])
    assert len(reports) == 1, [r["id"] for r in reports]
    return reports[0]


def missing(report):
    return report["diagnosis"]["missing"]


def run_until_oom(k):
    """Numpy-free: a list of 8 MiB buffers, one every 20 ms, until the OOM killer comes."""
    rc = k.execute_until_death(
        "import time\nheld = []\nwhile True:\n"
        "    held.append(bytearray(8 << 20))\n    time.sleep(0.02)\n", timeout=120)
    assert rc == -signal.SIGKILL


def test_a_kernel_log_not_readable_is_named_and_the_oom_kill_is_still_found(
        jupyter_env, tmp_path):
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("the kernel log is not readable here to begin with")
    if os.geteuid() != 0:
        pytest.skip("needs root for its mount namespace and device node")
    # The watchdog in a mount namespace of its own whose /dev/kmsg is the same device node on
    # a nodev mount: opening it fails with EACCES, as where a container's /dev forbids it.
    nodev = tmp_path / "nodev"
    nodev.mkdir()
    script = (f"mount -t tmpfs -o nodev,size=64k tmpfs {nodev} && "
              f"mknod {nodev}/kmsg c 1 11 && mount --bind {nodev}/kmsg /dev/kmsg && "
              f"exec {KWD_BINARY} run --memory-limit=200M -- /usr/bin/python3 -m "
              f"ipykernel_launcher -f \"$0\"")
    spec = jupyter_env["prefix"] / "share" / "jupyter" / "kernels" / "python3-no-kmsg"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script,
                 "{connection_file}"],
        "display_name": "no kernel log", "language": "python"}))
    k = Watched("python3-no-kmsg", jupyter_env["env"])
    try:
        run_until_oom(k)
    finally:
        k.close()
    report = only_report(jupyter_env)
    assert report["oom_evidence"]["kernel_log_readable"] is False
    assert "Permission denied" in report["oom_evidence"]["kernel_log_problem"]
    # Nothing else is lost: the cgroup's counter (the watchdog's own cgroup) proves the kill.
    d = report["diagnosis"]
    assert d["cause"] == "oom_killed_cgroup", d
    assert any(m.startswith("kernel log: not readable (cannot read /dev/kmsg (Permission "
                            "denied))") for m in missing(report)), missing(report)
    assert report["execution"]["cell_in_flight"]["execution_count"] == 1
    assert len(report["memory"]["samples"]["t_ms"]) > 5


@pytest.mark.quiet_machine
def test_a_kernel_log_flooded_during_the_run_is_named_and_the_oom_kill_is_still_found(
        jupyter_env, start_kernel):
    if not os.access("/dev/kmsg", os.W_OK):
        pytest.skip("needs to write the kernel log (root)")
    name = wrap_kernelspec(jupyter_env, "python3-limited", "--memory-limit=200M")
    k = start_kernel(name)
    r, _ = k.execute("x = 1")
    assert r["status"] == "ok"
    # Userspace writes to /dev/kmsg are rate-limited by default: lifted for the flood.
    devkmsg = "/proc/sys/kernel/printk_devkmsg"
    before = open(devkmsg).read().strip()
    open(devkmsg, "w").write("on\n")
    try:
        # 16 MiB of records, far more than the ring holds, between two of the watchdog's reads.
        fd = os.open("/dev/kmsg", os.O_WRONLY)
        try:
            # <7>: debug level, which no console prints (a serial console would take
            # minutes over 16 MiB and hold up every printk meanwhile).
            line = b"<7>kernel-watchdog test: a flood of the kernel log " + b"x" * 180
            for i in range(80_000):
                os.write(fd, line)
        finally:
            os.close(fd)
    finally:
        open(devkmsg, "w").write(before + "\n")
    run_until_oom(k)
    report = only_report(jupyter_env)
    assert report["oom_evidence"]["kernel_log_records_lost"] > 0, report["oom_evidence"]
    d = report["diagnosis"]
    assert d["cause"] == "oom_killed_cgroup", d
    assert any("overwritten before they were read" in m for m in missing(report)), \
        missing(report)
    # The OOM killer's own line, written after the flood, was read all the same.
    assert report["oom_evidence"]["kernel_pid_named"] is True, report["oom_evidence"]
    assert report["execution"]["last_cells"][-1]["execution_count"] == 1


@pytest.mark.quiet_machine
def test_a_wall_clock_stepped_back_and_forward_is_named_and_nothing_else_is_lost(
        jupyter_env, start_kernel):
    k = start_kernel()
    stepped = 0
    try:
        r, _ = k.execute("held = bytearray(64 << 20)")
        assert r["status"] == "ok"
        # Back first: a file written meanwhile (another build) is then older, never newer,
        # than it should be.
        step_wall_clock(-3600)
        stepped -= 3600
        time.sleep(2.5)  # samples on the stepped clock
        r, _ = k.execute("more = bytearray(32 << 20)")
        assert r["status"] == "ok"
        step_wall_clock(3600)
        stepped += 3600
        time.sleep(2.5)
        r, _ = k.execute("x = 3")
        assert r["status"] == "ok"
    finally:
        if stepped:
            step_wall_clock(-stepped)
    k.execute_until_death("import ctypes; ctypes.string_at(0)")
    report = only_report(jupyter_env)
    steps = report["watchdog"]["clock_steps"]
    assert steps["count"] == 2, steps
    assert [round(s["by_ms"] / 1000) for s in steps["steps"]] == [-3600, 3600], steps
    assert any(m.startswith("timing: the wall clock was stepped 2 times during the watch "
                            "(-3600 s, +3600 s)") for m in missing(report)), missing(report)
    # Nothing else is lost: the cause, every cell, the memory the cells took.
    assert report["diagnosis"]["cause"] == "native_crash"
    counts = [c["execution_count"] for c in report["execution"]["last_cells"]]
    assert counts[-3:] == [1, 2, 3], counts
    assert report["execution"]["cell_in_flight"]["execution_count"] == 4
    assert max(v for v in report["memory"]["samples"]["rss"] if v) >= 96 << 20
