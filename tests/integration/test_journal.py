"""Under systemd, log records go to the journal with fields of their own (KERNEL_ID, CAUSE,
REPORT), through the real systemd-journald: started here in a private mount namespace, on
tmpfs over /run/systemd and /run/log, so the machine's own logging (if any) is untouched.
The watchdog is told its stderr is the journal's stream the way systemd tells a service:
$JOURNAL_STREAM names the device and inode of its stderr."""
import json
import os
import shutil
import subprocess
import textwrap

import pytest

from conftest import KWD_BINARY

JOURNALD = "/lib/systemd/systemd-journald"

SCENARIO = textwrap.dedent("""\
    set -eu
    mount -t tmpfs tmpfs /run/systemd
    mkdir -p /run/systemd/journal /run/log
    mount -t tmpfs tmpfs /run/log
    {journald} >"$WORK/journald.out" 2>&1 &
    journald=$!
    trap 'kill $journald' EXIT
    for _ in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
    : >"$WORK/stderr"
    export JOURNAL_STREAM="$(stat -c '%d:%i' "$WORK/stderr")"
    "$KWD" run -- /usr/bin/python3 -c 'import ctypes; ctypes.string_at(0)' \\
        2>>"$WORK/stderr" || echo "kernel exit $?" >"$WORK/exit"
    # What the watchdog's own stderr got while it was "the journal": nothing of its log.
    unset JOURNAL_STREAM
    journalctl -D /run/log/journal -o json --no-pager SYSLOG_IDENTIFIER=kernel-watchdog \\
        >"$WORK/journal.json"
    """)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(JOURNALD) or
                    shutil.which("unshare") is None or shutil.which("journalctl") is None,
                    reason="needs root, systemd-journald and unshare")
def test_report_line_reaches_the_journal_with_its_fields(tmp_path):
    reports = tmp_path / "reports"
    env = dict(os.environ, WORK=str(tmp_path), KWD=KWD_BINARY,
               KERNEL_WATCHDOG_REPORT_DIR=str(reports))
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c",
         SCENARIO.format(journald=JOURNALD)],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "exit").read_text().strip() == "kernel exit 139"  # SIGSEGV mirrored
    records = [json.loads(line) for line in (tmp_path / "journal.json").read_text().splitlines()]
    (written,) = [r for r in records if "REPORT" in r]
    (report_path,) = reports.glob("*.json")
    assert written["REPORT"] == str(report_path)
    report = json.loads(report_path.read_text())
    assert written["CAUSE"] == report["diagnosis"]["cause"] == "native_crash"
    assert written["PRIORITY"] == "4"  # warning
    assert report["diagnosis"]["headline"] in written["MESSAGE"]
    assert written["_TRANSPORT"] == "journal"  # the native protocol, not the stream
    stderr = (tmp_path / "stderr").read_text()
    assert "report" not in stderr, stderr
