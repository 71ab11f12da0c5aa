"""A live kernel's memory as the program tells it, for the status bar: the daemon's answer on
its status socket when a daemon runs, else the status file the kernel's own `kernel-watchdog
run` keeps (watch::live_status_dir() in the program). Reading either costs the kernel
nothing: no message on its channels."""
import asyncio
import json
import os
import stat
from pathlib import Path

from kernel_watchdog._reports import report_store

HOW_TO_WATCH = (
    "Start kernels under the watchdog: set JUPYTER_DEFAULT_PROVISIONER_NAME="
    "kernel-watchdog-provisioner before starting Jupyter, run `kernel-watchdog kernelspec "
    "wrap`, or start the daemon with `kernel-watchdog service install`.")


def runtime_dir(env):
    """$XDG_RUNTIME_DIR/kernel-watchdog when that is an absolute path, else the folder that
    holds the report store: where the program puts its daemon's socket and run status files."""
    xdg = env.get("XDG_RUNTIME_DIR") or ""
    if xdg.startswith("/"):
        return Path(xdg) / "kernel-watchdog"
    return report_store(env).parent


def daemon_socket(env):
    return runtime_dir(env) / "daemon.sock"


async def daemon_status(env, timeout_s=1.0):
    """The daemon's status document, or None when no daemon answers."""
    path = daemon_socket(env)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), timeout_s)
    except (OSError, asyncio.TimeoutError):
        return None
    try:
        data = await asyncio.wait_for(reader.read(), timeout_s)
        return json.loads(data)
    except (OSError, ValueError, asyncio.TimeoutError):
        return None
    finally:
        writer.close()


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def launcher_status(env, kernel_id):
    """What the kernel's own `run` last wrote about it, or None (not watched by `run`, or its
    writer is gone). The file must be ours and not a link."""
    if not kernel_id or "/" in kernel_id or kernel_id.startswith("."):
        return None
    path = runtime_dir(env) / "kernels" / f"{kernel_id}.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > 1 << 20:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(doc, dict) or not _pid_alive(int(doc.get("watchdog_pid") or 0)):
        return None
    return doc


async def kernel_status(env, kernel_id):
    """The status item's data for one kernel: {"watched": bool, "watched_by", the program's
    memory fields...} or, unwatched, {"watched": False, "how_to_watch": ...}."""
    daemon = await daemon_status(env)
    if daemon:
        for row in daemon.get("kernels") or []:
            if row.get("kernel_id") == kernel_id and row.get("watched_by") == "daemon":
                return {"watched": True, **row}
    own = launcher_status(env, kernel_id)
    if own:
        return {"watched": True, **own}
    if daemon:
        for row in daemon.get("kernels") or []:
            if row.get("kernel_id") == kernel_id:  # left to a launcher that keeps no file
                return {"watched": True, **row}
    return {"watched": False, "kernel_id": kernel_id, "how_to_watch": HOW_TO_WATCH}
