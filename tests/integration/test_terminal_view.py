"""`reports show` as a person reads it: in a terminal (a real pty) it uses the terminal's width,
wraps the diagnosis at word boundaries and cuts only the kernel's own long lines; piped, it is
plain text with nothing cut."""
import fcntl
import os
import pty
import shlex
import shutil
import re
import struct
import subprocess
import termios
import time

import pytest

from conftest import KWD_BINARY

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG_LINE = "E the library's last words " + "x" * 280 + " END"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("terminal")
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(tmp / "reports"))
    code = f"import os, sys; print({LONG_LINE!r}, file=sys.stderr, flush=True); os.abort()"
    # No faulthandler: its dump would follow the line, and the view shows the last four.
    subprocess.run([KWD_BINARY, "run", "--no-faulthandler", "--", "/usr/bin/python3", "-c", code],
                   env=env,
                   capture_output=True, timeout=60)
    return env


def show_in_terminal(env, columns):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([KWD_BINARY, "reports", "show", "latest"], env=env,
                            stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, out
    return out.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 200])
def test_in_a_terminal_every_line_fits_its_width(store, columns):
    text = show_in_terminal(store, columns)
    assert "\x1b[" in text  # a terminal gets colour
    lines = ANSI.sub("", text).splitlines()
    assert "Aborted (SIGABRT)" in "\n".join(lines)
    # A path is one word: the report's own path may run past the edge, nothing else.
    too_long = [line for line in lines if len(line) > columns and not line.startswith("Report: ")]
    assert too_long == [], too_long
    stderr_rows = [line for line in lines if line.startswith("  | E the library")]
    assert stderr_rows and stderr_rows[0].endswith("…")  # the kernel's own line is cut
    # Wrapped, not cut: every word of the evidence is there.
    assert "…" not in "\n".join(l for l in lines if l.startswith("  • ") or l.startswith("    "))


def test_piped_it_is_plain_and_nothing_is_cut(store):
    proc = subprocess.run([KWD_BINARY, "reports", "show", "latest"], env=store,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout
    assert f"  | {LONG_LINE}" in proc.stdout
    # Wrapped at 100 columns, but a word is never broken: a report's path, one word after its
    # label, stays whole on a longer line (it grows with the store's directory: pytest's
    # numbered temporary directories made it 101 once their number had four digits).
    too_long = [l for l in proc.stdout.splitlines() if not l.startswith("  | ") and len(l) > 100
                and not (len(l.split()) == 2 and l.split()[1].startswith("/"))]
    assert not too_long, too_long


@pytest.mark.parametrize("target, reason", [("missing-dir/page.html", "No such file or directory"),
                                            (".", "Is a directory")])
def test_html_to_a_place_that_cannot_be_written_says_the_path_and_why(store, tmp_path, target,
                                                                       reason):
    path = tmp_path / target
    proc = subprocess.run([KWD_BINARY, "reports", "html", "latest", "-o", str(path)], env=store,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == f"kernel-watchdog: cannot write {path}: {reason}\n"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("columns", [80, 200])
def test_under_tmux_no_line_is_wrapped_by_the_terminal(store, tmp_path, columns):
    """As a person sees it in tmux: the pane's own wrapping (-J joins what tmux wrapped) finds
    no line longer than the pane, but the report's path."""
    socket = str(tmp_path / "tmux.sock")
    done = tmp_path / "done"
    command = (f"KERNEL_WATCHDOG_REPORT_DIR={shlex.quote(store['KERNEL_WATCHDOG_REPORT_DIR'])} "
               f"{shlex.quote(KWD_BINARY)} reports show latest; touch {shlex.quote(str(done))}; "
               "sleep 60")
    subprocess.run(["tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-x",
                    str(columns), "-y", "80", command], check=True, env=dict(store, TERM="xterm-256color"))
    try:
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists()
        pane = subprocess.run(["tmux", "-S", socket, "capture-pane", "-p", "-J", "-S", "-"],
                              capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
    lines = pane.rstrip("\n").splitlines()
    assert any("Aborted (SIGABRT)" in line for line in lines), pane
    assert any(line.startswith("Running cell") or line.startswith("Evidence") for line in lines)
    too_long = [l for l in lines if len(l.rstrip()) > columns and not l.startswith("Report: ")]
    assert too_long == [], too_long
