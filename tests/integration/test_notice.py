"""The notebook learns why: after a crash, the kernel its manager restarts shows, once, above
the output of its first cell, why the previous one died and how to see the report.

The restart is jupyter_client's own: KernelManager.restart_kernel(now=True, newports=False),
which is what its KernelRestarter (JupyterLab's, Notebook's) calls when it finds the kernel
dead: the same connection file, so the same kernel id, and a new `kernel-watchdog run`."""
import asyncio
import os
import pathlib
import queue
import subprocess
import time

import pytest

from conftest import KWD_BINARY, load_reports


def outputs_of(k, code):
    """The cell's outputs as a front end shows them: consecutive stream messages are one
    output (ipykernel may flush `print`'s text and its newline apart on a loaded machine)."""
    reply, messages = k.execute(code)
    assert reply["status"] == "ok", reply
    shown, last_stream = [], None
    for m in messages:
        if m["msg_type"] == "display_data":
            shown.append(("display", m["content"]["data"]))
            last_stream = None
        elif m["msg_type"] == "stream":
            name = m["content"]["name"]
            if shown and last_stream == name:
                shown[-1] = ("stream", shown[-1][1] + m["content"]["text"])
            else:
                shown.append(("stream", m["content"]["text"]))
            last_stream = name
    return shown


def wait_for_iopub(k, timeout=30):
    """Until the client's IOPub subscription reaches the new kernel: a cell's first message
    (here the notice) published before that would be lost (ZeroMQ's slow joiner), as a front
    end's would not be, whose first cell comes seconds after the restart."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg_id = k.kc.kernel_info()
        end = time.monotonic() + 1
        while time.monotonic() < end:
            try:
                msg = k.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                while True:  # the replies of each kernel_info asked
                    try:
                        k.kc.get_shell_msg(timeout=0.3)
                    except queue.Empty:
                        break
                return
    raise AssertionError("IOPub never connected to the restarted kernel")


def restart_as_the_restarter_does(k, now=True):
    k.km.restart_kernel(now=now, newports=False)
    k.kc.wait_for_ready(timeout=60)
    wait_for_iopub(k)


@pytest.mark.parametrize("opt_out", [False, True])
def test_the_restarted_kernel_says_once_why_the_previous_one_died(start_kernel, jupyter_env,
                                                                  opt_out):
    env = {"KERNEL_WATCHDOG_NO_NOTICE": "1"} if opt_out else {}
    k = start_kernel(env_overrides=env)
    assert outputs_of(k, "print('before')") == [("stream", "before\n")]
    k.execute_until_death("import ctypes; ctypes.string_at(0)")
    (report,) = load_reports(jupyter_env["report_dir"])
    restart_as_the_restarter_does(k)

    first = outputs_of(k, "print('after')")
    if opt_out:
        assert first == [("stream", "after\n")]
        return
    assert len(first) == 2 and first[1] == ("stream", "after\n"), first
    kind, data = first[0]
    assert kind == "display"
    text = data["text/plain"]
    assert text.startswith("kernel-watchdog: this notebook's previous kernel died at ")
    assert report["diagnosis"]["headline"] in text
    report_path = jupyter_env["report_dir"] / f"{report['id']}.json"
    assert f"See why: kernel-watchdog reports show {report_path}" in text
    assert "`kernel-watchdog reports show" in data["text/markdown"]
    # The command it gives works from any shell, whatever store that shell would look in.
    command = text.split("See why: ", 1)[1].split()
    shown = subprocess.run([KWD_BINARY, *command[1:]], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items()
                                if k != "KERNEL_WATCHDOG_REPORT_DIR"})
    assert shown.returncode == 0 and "SIGSEGV" in shown.stdout, shown.stderr

    # The variable that named the notice's file is gone from what the notebook sees, and so
    # is the file, and the directory it was in once the kernel is gone.
    runtime = pathlib.Path(os.environ["XDG_RUNTIME_DIR"], "kernel-watchdog")
    notice_dirs = lambda: [p for p in runtime.iterdir() if p.name.startswith("pyshim-")]
    assert outputs_of(k, "import os; print('KERNEL_WATCHDOG_NOTICE' in os.environ)") \
        == [("stream", "False\n")]
    assert [list(d.iterdir()) for d in notice_dirs()] == [[]]

    # Once: not on the next cell, nor after a restart that followed no death (a graceful
    # one: the watchdog sees the kernel end as asked and leaves no notice).
    assert outputs_of(k, "print('again')") == [("stream", "again\n")]
    restart_as_the_restarter_does(k, now=False)
    assert outputs_of(k, "print('restarted')") == [("stream", "restarted\n")]
    assert notice_dirs() == []


def test_a_restart_that_fails_to_start_leaves_the_notice_for_the_next(start_kernel, jupyter_env):
    k = start_kernel()
    k.execute_until_death("import os; os.abort()")
    (report,) = load_reports(jupyter_env["report_dir"])
    # A start of the same kernel (same connection file) whose program is gone: the watchdog
    # took the notice for it, and must give it back when the kernel never runs.
    failed = subprocess.run([KWD_BINARY, "run", "--", "/nonexistent/python3", "-m",
                             "ipykernel_launcher", "-f", k.km.connection_file],
                            capture_output=True, text=True, env=jupyter_env["env"], timeout=60)
    assert failed.returncode != 0 and "/nonexistent/python3" in failed.stderr, failed.stderr
    restart_as_the_restarter_does(k)
    first = outputs_of(k, "print('after')")
    assert first[-1] == ("stream", "after\n") and len(first) == 2, first
    assert report["diagnosis"]["headline"] in first[0][1]["text/plain"]


def test_jupyter_clients_own_restarter_brings_the_notice(jupyter_env):
    """JupyterLab's path itself: an AsyncIOLoopKernelManager with its KernelRestarter polling
    (autorestart, as jupyter_server runs it) finds the wrapped kernel dead and restarts it;
    the front end's new client runs a cell and sees the notice above the cell's output."""
    from jupyter_client.ioloop import AsyncIOLoopKernelManager

    from conftest import WRAPPED

    async def iopub_of(kc, msg_id, timeout=60):
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = await kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return seen
            seen.append(msg)
        raise AssertionError(f"no end of {msg_id}: {seen}")

    async def connected_client(km):
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        # IOPub reaches the kernel: a kernel_info's busy/idle comes back (slow joiner).
        for _ in range(60):
            msg_id = kc.kernel_info()
            try:
                await iopub_of(kc, msg_id, timeout=1)
                return kc
            except AssertionError:
                continue
        raise AssertionError("IOPub never connected")

    async def scenario():
        km = AsyncIOLoopKernelManager(kernel_name=WRAPPED)
        await km.start_kernel(env=jupyter_env["env"])
        restarts = []
        km.add_restart_callback(lambda: restarts.append(time.monotonic()), "restart")
        km.start_restarter()
        try:
            kc = await connected_client(km)
            kc.execute("import ctypes; ctypes.string_at(0)")
            deadline = time.monotonic() + 60
            while not restarts and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert restarts, "the restarter never restarted the kernel"
            kc.stop_channels()
            kc = await connected_client(km)  # as the front end reconnects after a restart
            first = await iopub_of(kc, kc.execute("print('after')"))
            second = await iopub_of(kc, kc.execute("print('again')"))
            kc.stop_channels()
            return first, second
        finally:
            km.stop_restarter()
            await km.shutdown_kernel(now=True)

    first, second = asyncio.run(scenario())
    (report,) = load_reports(jupyter_env["report_dir"])
    shown = [m for m in first if m["msg_type"] in ("display_data", "stream")]
    assert [m["msg_type"] for m in shown] == ["display_data", "stream"], shown
    assert report["diagnosis"]["headline"] in shown[0]["content"]["data"]["text/plain"]
    assert shown[1]["content"]["text"] == "after\n"
    assert [(m["msg_type"], m["content"].get("text")) for m in second
            if m["msg_type"] in ("display_data", "stream")] == [("stream", "again\n")]
