"""Finding the kernel-watchdog program and handing the process over to it.

The wheel carries the program inside this package (kernel_watchdog/_bin), beside the
libraries auditwheel bundles for it; the `kernel-watchdog` command on PATH is this
package's console script, which execs it (`main` below).
"""
import os
import sys
from pathlib import Path

NAME = "kernel-watchdog"
ENV_OVERRIDE = "KERNEL_WATCHDOG_BINARY"
PACKAGED = Path(__file__).resolve().parent / "_bin" / NAME


class BinaryNotFound(RuntimeError):
    """No kernel-watchdog program where this package looked; the message says where."""


def _is_program(path):
    """An executable file that is not a script: the console script that pip writes for this
    package is also called kernel-watchdog, and exec'ing it from here would loop."""
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(2) != b"#!"
    except OSError:
        return False


def find_binary():
    """The program's path: $KERNEL_WATCHDOG_BINARY, else the one this package carries, else
    the first program of that name on PATH. Raises BinaryNotFound naming where it looked."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        if os.access(override, os.X_OK) and not os.path.isdir(override):
            return override
        raise BinaryNotFound(f"${ENV_OVERRIDE} names {override}, which is not an executable file")
    if _is_program(PACKAGED):
        return str(PACKAGED)
    for directory in os.get_exec_path():
        candidate = os.path.join(directory, NAME)
        if _is_program(candidate):
            return candidate
    raise BinaryNotFound(f"no {NAME} program in {PACKAGED.parent} or on PATH "
                         f"(set ${ENV_OVERRIDE} to its path)")


def exec_binary(args):
    """Replaces this process with the program (exec, not a child: its exit status and signals
    are the caller's). Returns only on failure, by exiting with one line on stderr."""
    try:
        binary = find_binary()
        os.execv(binary, [binary, *args])
    except BinaryNotFound as e:
        sys.exit(f"kernel-watchdog: {e}")
    except OSError as e:
        # ENOEXEC: another architecture; ENOENT on a file that exists: its loader (another
        # libc) is missing.
        sys.exit(f"kernel-watchdog: {binary} cannot run on this machine: {e.strerror}")


def main():
    """The `kernel-watchdog` console script."""
    exec_binary(sys.argv[1:])
