"""The soak's short form (issue 40): bench/soak.py with 15 kernel lifecycles under the daemon,
five at a time, ended in turn cleanly, by a restart, SIGSEGV, SIGKILL and an OOM kill in a
memory cgroup of their own; 150 stand-in kernels (the fleet bench's sleeping processes) under
another daemon, fifty at a time, ended cleanly by a manager (SIGTERM, then the file removed),
by SIGSEGV and by SIGKILL; and 200 cells under `run` ended by SIGSEGV. Every abnormal end gets
exactly one report, a clean one none, and the daemon keeps no descriptor or thread across the
churn. It runs alone (quiet_machine): the daemon sees every kernel of the user, and other
tests' kernels would come and go in its counts. The long form (1,000 lifecycles, 10,000 stand-ins, 10,000 cells) is run by hand; its figures are in
docs/reliability.md. Times are the bench's to print, not this test's."""
import json
import os
import subprocess
import sys

import pytest

from conftest import KWD_BINARY, REPO_ROOT, own_memory_cgroup_dir


@pytest.mark.quiet_machine
@pytest.mark.skipif(os.geteuid() != 0 or own_memory_cgroup_dir() is None,
                    reason="makes memory cgroups (root, cgroup v1 memory hierarchy)")
def test_a_short_soak_loses_no_report_and_adds_none():
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "soak.py"), "--watchdog", KWD_BINARY,
         "--lifecycles", "15", "--concurrency", "5", "--stand-ins", "150",
         "--stand-in-concurrency", "50", "--cells", "200"],
        capture_output=True, text=True, timeout=480)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    daemon = result["daemon"]
    assert daemon["ends"] == {"clean": 3, "restart": 3, "segv": 3, "kill": 3, "oom": 3}
    assert daemon["abnormal_ends"] == 9
    assert daemon["abnormal_reported"] == 9, daemon["abnormal_not_reported"]
    assert daemon["clean_reported"] == [] and daemon["reported_twice"] == []
    # The OOM kills are told as such, not as a SIGKILL from outside.
    assert daemon["causes"].get("oom_killed_cgroup") == 3, daemon["causes"]
    # Measured with no kernel watched, after the first wave and at the end.
    assert daemon["daemon_fd_growth"] is not None, daemon
    assert daemon["daemon_fd_growth"] <= 0 and daemon["daemon_thread_growth"] <= 0, daemon
    # Fifty stand-ins ended at once: the daemon gets to some deaths after their manager removed
    # the file, and still tells that clean-up from a crash.
    stand_ins = result["stand_ins"]
    assert stand_ins["ends"] == {"clean": 50, "segv": 50, "kill": 50}
    assert stand_ins["abnormal_reported"] == 100, stand_ins["abnormal_not_reported"]
    assert stand_ins["clean_reported"] == [] and stand_ins["reported_twice"] == []
    assert stand_ins["causes"] == {"native_crash": 50, "killed": 50}, stand_ins["causes"]
    assert stand_ins["daemon_fd_growth"] is not None, stand_ins
    assert stand_ins["daemon_fd_growth"] <= 0 and stand_ins["daemon_thread_growth"] <= 0
    run = result["run"]
    assert run["report_written"] and run["report_cells_kept"] > 0
