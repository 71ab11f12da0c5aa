"""The kernel command under watch: `kernel-watchdog run [options] -- KERNEL_ARGV...`, or the
kernel's own command with the reason it could not be watched."""
import functools
import os
import subprocess

from kernel_watchdog._binary import BinaryNotFound, find_binary


@functools.cache
def usable_binary():
    """(path, None) for a program that runs here, else (None, why). Asked once a process:
    a program for another architecture or libc fails its `--version` in a few ms, where the
    kernel it would have launched would only time out."""
    try:
        binary = find_binary()
    except BinaryNotFound as e:
        return None, str(e)
    try:
        probe = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{binary} cannot run on this machine: {e}"
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{binary} --version failed ({probe.returncode}): {last}"
    return binary, None


def is_watched_already(cmd):
    """A kernelspec wrapped by `kernelspec wrap` starts `kernel-watchdog run` itself."""
    return len(cmd) > 1 and os.path.basename(cmd[0]) == "kernel-watchdog" and cmd[1] == "run"


def watched_command(cmd, run_options):
    """(command, None) with the kernel under `run`, or (cmd, why) when it cannot be."""
    if is_watched_already(cmd):
        return list(cmd), None
    binary, why = usable_binary()
    if binary is None:
        return list(cmd), why
    return [binary, "run", *run_options, "--", *cmd], None
