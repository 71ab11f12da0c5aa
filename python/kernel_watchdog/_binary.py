"""Finding the kernel-watchdog program and handing the process over to it.

The wheel puts the program in the scripts directory of the scheme it was installed with
(a virtualenv's bin/, ~/.local/bin for --user, <target>/bin for --target), as ruff and uv do.
"""
import os
import shutil
import sys
import sysconfig
from pathlib import Path

NAME = "kernel-watchdog"
ENV_OVERRIDE = "KERNEL_WATCHDOG_BINARY"


class BinaryNotFound(RuntimeError):
    """No kernel-watchdog program where this package looked; the message says where."""


def _scripts_dirs():
    """The scripts directories the wheel may have been installed into, most likely first."""
    dirs = [sysconfig.get_path("scripts")]
    user_scheme = sysconfig.get_preferred_scheme("user")
    dirs.append(sysconfig.get_path("scripts", user_scheme))
    # pip install --target DIR: the package is DIR/kernel_watchdog, the program DIR/bin.
    dirs.append(str(Path(__file__).resolve().parent.parent / "bin"))
    return dirs


def find_binary():
    """The program's path: $KERNEL_WATCHDOG_BINARY, else the one installed with this package,
    else the first on PATH. Raises BinaryNotFound naming every place looked at."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        if os.access(override, os.X_OK) and not os.path.isdir(override):
            return override
        raise BinaryNotFound(f"${ENV_OVERRIDE} names {override}, which is not an executable file")
    looked = []
    for directory in _scripts_dirs():
        candidate = os.path.join(directory, NAME)
        looked.append(directory)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    on_path = shutil.which(NAME)
    if on_path:
        return on_path
    raise BinaryNotFound(f"no {NAME} program in {', '.join(dict.fromkeys(looked))} or on PATH "
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
