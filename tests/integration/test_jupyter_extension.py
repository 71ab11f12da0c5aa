"""The package's Jupyter Server extension (python/kernel_watchdog/server_extension.py) in a real
Jupyter Server from PyPI (the framework virtualenv's), enabled the way an installed wheel
enables it: the wheel installed with `pip --target`, its etc/jupyter and share/jupyter on the
server's Jupyter paths. Kernels are started through the server's REST API under the
kernel-watchdog provisioner and crashed through their websocket, as a browser would.

What must hold: every handler refuses a request without the server's token (403); a report
id that is forged, has a path in it, names a link out of the store or another user's file is
404; a real death reaches the event bus and the reports endpoint with its cause, notebook and
cell; a live kernel's memory comes from its `run`, an unwatched one says how to watch it."""
import asyncio
import json
import os
import stat
import subprocess
import sys
import time
import urllib.error
import uuid
from pathlib import Path

import pytest
from conftest import KWD_BINARY, KWD_BUILD_DIR, REPO_ROOT
from jupyter_server_app import LIMIT, Server, execute_on_websocket, server_env, wait_for
from test_python_package import target_package  # noqa: F401 (the installed wheel, a fixture)


@pytest.fixture
def server(tmp_path, target_package):  # noqa: F811
    s = Server(tmp_path, server_env(tmp_path, target_package))
    yield s
    s.stop()


async def next_event(bus, schema_id, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        raw = await asyncio.wait_for(bus.read_message(), deadline - time.time())
        assert raw is not None, "the event bus closed"
        event = json.loads(raw)
        if event.get("schema_id") == schema_id:
            return event
    raise AssertionError(f"no {schema_id} event in {timeout} s")


# The event's schema: the server extension registers it, the frontend listens for it.
EVENT_SCHEMA_ID = "https://events.jupyter.org/kernel_watchdog/kernel_death/v1"
ENDPOINTS = ["kernel-watchdog/reports", "kernel-watchdog/reports/{id}",
             "kernel-watchdog/reports/{id}/html", "kernel-watchdog/kernels/{kernel}"]


def test_a_death_reaches_the_event_bus_and_the_reports_with_cause_notebook_and_cell(server):
    kernel_id = server.start_session("crash.ipynb")
    # A live, watched kernel: its `run` keeps its memory where the server finds it.
    # A started kernel: its interpreter loaded (tens of MiB).
    live = wait_for(lambda: (lambda s: s if s.get("rss_bytes", 0) > 20 * 1024 * 1024 else None)(
        server.get(f"kernel-watchdog/kernels/{kernel_id}")), what="a live status")
    assert live["watched"] is True and live["watched_by"] == "launcher", live
    assert live["notebook"] == "crash.ipynb", live
    assert live["limits"]["tightest"] == {"name": "cgroup", "bytes": LIMIT}, live

    code = "import ctypes\nctypes.string_at(0)"

    async def crash():
        kernel, bus = await execute_on_websocket(server, kernel_id, code, events=[])
        try:
            return await next_event(bus, EVENT_SCHEMA_ID, 60)
        finally:
            kernel.close()
            bus.close()
    event = asyncio.run(crash())
    assert event["notebook"] == "crash.ipynb" and event["kernel_id"] == kernel_id, event
    assert event["readable"] is True and event["headline"], event

    listed = server.get("kernel-watchdog/reports?since_ms=0")["reports"]
    [report] = [r for r in listed if r["id"] == event["id"]]
    assert report["cause"] == "native_crash", report
    assert report["cell"]["code"] == code and report["cell"]["execution_count"] == 1, report
    assert report["notebook"] == "crash.ipynb" and report["peak_rss_bytes"] > 0, report
    assert server.get(f"kernel-watchdog/reports?since_ms={report['at_ms']}")["reports"] == []

    one = server.get(f"kernel-watchdog/reports/{report['id']}")
    assert one["summary"] == report and one["document"]["diagnosis"]["cause"] == "native_crash"
    status, headers, page = server.request(f"kernel-watchdog/reports/{report['id']}/html")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"].startswith("sandbox")
    assert b"<html" in page[:500].lower() and report["id"].encode() in page

    # Every handler wants the server's token: none, or a wrong one, is 403.
    for path in ENDPOINTS:
        path = path.format(id=report["id"], kernel=kernel_id)
        assert server.status_of(path) in (200, 404)  # 404: the dead kernel may be gone
        assert server.status_of(path, token=None) == 403, path
        assert server.status_of(path, token="not-the-token") == 403, path


def test_report_ids_that_are_not_the_users_own_reports_are_404(server, tmp_path):
    store = server.reports
    store.mkdir(mode=0o700, exist_ok=True)
    # A real report to copy from: a kernel that aborts.
    kernel_id = server.start_session("abort.ipynb")

    async def abort():
        kernel, _ = await execute_on_websocket(server, kernel_id, "import os; os.abort()")
        await asyncio.sleep(0.5)
        kernel.close()
    asyncio.run(abort())
    [real] = wait_for(lambda: server.get("kernel-watchdog/reports")["reports"],
                      what="the abort's report")
    assert server.status_of(f"kernel-watchdog/reports/{real['id']}") == 200
    text = (store / f"{real['id']}.json").read_text()

    # Outside the store: a report the program would read, reached by a link in the store.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    linked_id = real["id"].replace(real["id"][:4], "2001", 1)
    (outside / f"{linked_id}.json").write_text(text)
    (store / f"{linked_id}.json").symlink_to(outside / f"{linked_id}.json")
    # Another user's report in the store.
    foreign_id = real["id"].replace(real["id"][:4], "2002", 1)
    (store / f"{foreign_id}.json").write_text(text)
    os.chown(store / f"{foreign_id}.json", 65534, 65534)
    listed = {r["id"] for r in server.get("kernel-watchdog/reports")["reports"]}
    assert {linked_id, foreign_id} <= listed  # the program lists them; the server refuses them

    # A report the program cannot read is still told: the kernel died, and where the file is.
    broken_id = real["id"].replace(real["id"][:4], "2099", 1)
    (store / f"{broken_id}.json").write_text('{"schema": "kernel-watchdog/crash-report", ')
    broken = server.get(f"kernel-watchdog/reports/{broken_id}")
    assert broken["document"] is None and broken["summary"]["readable"] is False, broken
    assert broken["summary"]["path"] == str(store / f"{broken_id}.json") and \
        broken["summary"]["headline"], broken

    forged = real["id"][:-3] + "zzz"
    for bad in (linked_id, foreign_id, forged, "latest", "1", real["kernel_id"], "abort.ipynb",
                "..%2F" + real["id"], "%2E%2E", "%2Fetc%2Fpasswd",
                f"..%2F{tmp_path.name}%2Freports%2F{real['id']}",
                f"{'%2F'.join(str(store).split('/'))}%2F{real['id']}.json"):
        for suffix in ("", "/html"):
            assert server.status_of(f"kernel-watchdog/reports/{bad}{suffix}") == 404, bad
    # A path in the URL itself never reaches the handler as an id.
    assert server.status_of(f"kernel-watchdog/reports/../reports/{real['id']}") in (200, 404)
    assert server.status_of("kernel-watchdog/reports/x/../../../etc/passwd") == 404


def test_where_is_it_stuck_gives_the_stacks_of_a_busy_kernel(server):
    """The frontend's "Where is it stuck?": a POST for a kernel of this server runs
    `kernel-watchdog stacks` on it (found by the server's own connection file) and gives its
    text; the kernel goes on. Unknown kernels are 404, no token is 403, a GET is 405."""
    kernel_id = server.start_session("stuck.ipynb")
    code = ("import threading\n"
            "def kwd_waits_for_ever():\n"
            "    lock = threading.Lock()\n"
            "    lock.acquire()\n"
            "    lock.acquire()\n"
            "kwd_waits_for_ever()\n")

    async def stuck_and_asked():
        # The websocket stays open while the cell runs (the requests below block this loop;
        # the kernel runs on without it).
        kernel, _ = await execute_on_websocket(server, kernel_id, code)
        try:
            asked_while_stuck()
        finally:
            kernel.close()

    def asked_while_stuck():
        path = f"kernel-watchdog/kernels/{kernel_id}/stacks"

        def stuck_in_the_cell():
            status, headers, body = server.request(path, method="POST", body={})
            assert status == 200 and headers["Content-Type"].startswith("application/json")
            doc = json.loads(body)
            return doc if "kwd_waits_for_ever" in doc["text"] else None
        doc = wait_for(stuck_in_the_cell, what="the cell's function in the stacks")
        assert doc["kernel_id"] == kernel_id and doc["notebook"] == "stuck.ipynb", doc
        assert "What it waits on: waiting for a lock that is never released: " in doc["text"], \
            doc["text"]
        assert server.status_of(path) == 405  # a GET: taking stacks is not a read
        for token in (None, "not-the-token"):
            try:
                server.request(path, method="POST", body={}, token=token)
                raise AssertionError("a POST without the token was answered")
            except urllib.error.HTTPError as e:
                assert e.code == 403, (token, e.code)
        try:
            server.request(f"kernel-watchdog/kernels/{uuid.uuid4()}/stacks", method="POST",
                           body={})
            raise AssertionError("an unknown kernel was answered")
        except urllib.error.HTTPError as e:
            assert e.code == 404
        # The kernel was let go: it still takes an interrupt, which ends the wait.
        assert server.request(f"api/kernels/{kernel_id}/interrupt", method="POST",
                              body={})[0] == 204
    asyncio.run(stuck_and_asked())


def test_an_unwatched_kernel_says_how_to_watch_it_and_an_unknown_one_is_404(server):
    kernel_id = server.start_session("plain.ipynb", kernel="unwatched")
    status = server.get(f"kernel-watchdog/kernels/{kernel_id}")
    assert status["watched"] is False and "kernel-watchdog-provisioner" in status["how_to_watch"]
    assert status["notebook"] == "plain.ipynb"
    assert server.status_of(f"kernel-watchdog/kernels/{uuid.uuid4()}") == 404
    assert server.status_of("kernel-watchdog/kernels/..%2F..%2Fetc") == 404


def test_the_wheel_carries_the_frontend_and_turns_the_server_extension_on(target_package):  # noqa: F811
    config = target_package / "etc" / "jupyter" / "jupyter_server_config.d" / "kernel_watchdog.json"
    assert json.loads(config.read_text())["ServerApp"]["jpserver_extensions"] == {
        "kernel_watchdog": True}
    frontend = target_package / "share" / "jupyter" / "labextensions" / "kernel-watchdog"
    meta = json.loads((frontend / "package.json").read_text())
    assert meta["name"] == "kernel-watchdog" and meta["jupyterlab"]["_build"]["load"]
    assert (frontend / meta["jupyterlab"]["_build"]["load"]).is_file()


def test_the_committed_frontend_was_built_from_the_sources_beside_it():
    """labextension/prebuilt is committed (installing needs no Node.js); it must be what
    scripts/build_labextension.sh makes of labextension/src and style today."""
    now = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "labextension_sources_hash.py")],
                         capture_output=True, text=True, check=True).stdout.strip()
    built = (REPO_ROOT / "labextension" / "prebuilt" / "kwd-sources.sha256").read_text().strip()
    assert now == built, "labextension/ changed since prebuilt/ was built: " \
        "run scripts/build_labextension.sh and commit labextension/prebuilt"


def test_a_running_daemon_gives_the_memory_of_a_kernel_no_launcher_watches(server):
    """The daemon's status socket, at its default place for the server's environment, is
    asked first: a kernel started without the provisioner is watched by it."""
    daemon = subprocess.Popen(
        [KWD_BINARY, "daemon", "--runtime-dir", server.env["JUPYTER_RUNTIME_DIR"],
         "--sample-rate", "10"], env=server.env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        kernel_id = server.start_session("daemon.ipynb", kernel="unwatched")
        # A started kernel: its interpreter loaded (tens of MiB).
        status = wait_for(lambda: (lambda s: s if s.get("rss_bytes", 0) > 20 * 1024 * 1024
                                   else None)(server.get(f"kernel-watchdog/kernels/{kernel_id}")),
                          what="the daemon's reading")
        assert status["watched"] is True and status["watched_by"] == "daemon", status
        assert status["notebook"] == "daemon.ipynb" and "limits" in status, status
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
    # Without it, the same kernel is not watched again.
    assert server.get(f"kernel-watchdog/kernels/{kernel_id}")["watched"] is False


def test_a_kernels_gpu_memory_and_the_gpu_limit_reach_the_status_item(tmp_path, target_package):  # noqa: F811
    """The fake libnvidia-ml.so.1 (tests/fakes, NVML's ABI) says the kernel holds 3 GiB of an
    80 GiB GPU: the kernel's live status has it, and the GPU among its limits."""
    library = Path(KWD_BUILD_DIR) / "fake-nvml" / "current" / "libnvidia-ml.so.1"
    assert library.exists(), "tests/CMakeLists.txt builds the fake NVML"
    script = tmp_path / "nvml-script"
    gpu = ("driver=550.54.15\ndevice.0.name=NVIDIA H100 80GB HBM3\n"
           "device.0.uuid=GPU-11111111-2222-3333-4444-555555555555\n"
           "device.0.total=85899345920\ndevice.0.used=12884901888\n")
    script.write_text(gpu)
    env = server_env(tmp_path, target_package)
    env.update(FAKE_NVML_SCRIPT=str(script),
               KERNEL_WATCHDOG_RUN_OPTIONS=f"--memory-limit={LIMIT} --nvml-library={library}")
    server = Server(tmp_path, env)
    try:
        kernel_id = server.start_session("gpu.ipynb")
        live = wait_for(lambda: (lambda s: s if s.get("pid") else None)(
            server.get(f"kernel-watchdog/kernels/{kernel_id}")), what="a live status")
        held = 3 * 1024 ** 3
        (tmp_path / "nvml-script.tmp").write_text(gpu + f"device.0.process={live['pid']}:{held}\n")
        (tmp_path / "nvml-script.tmp").replace(script)
        live = wait_for(lambda: (lambda s: s if s.get("gpu_bytes") == held else None)(
            server.get(f"kernel-watchdog/kernels/{kernel_id}")), what="the GPU reading")
        assert {"name": "gpu_total", "bytes": 85899345920} in [
            {"name": lim["name"], "bytes": lim["bytes"]} for lim in live["limits"]["all"]], live
    finally:
        server.stop()


def test_without_xdg_runtime_dir_a_kernel_with_its_own_report_dir_is_still_found(
        tmp_path, target_package):  # noqa: F811
    """No $XDG_RUNTIME_DIR and `run --report-dir` elsewhere than the store the environment
    names: `run` keeps its status file beside the environment's store (a private folder), where
    the server looks, not beside its --report-dir, which the server cannot know."""
    env = server_env(tmp_path, target_package)
    del env["XDG_RUNTIME_DIR"]
    own = tmp_path / "elsewhere" / "reports"
    env["KERNEL_WATCHDOG_RUN_OPTIONS"] = f"--memory-limit={LIMIT} --report-dir={own}"
    server = Server(tmp_path, env)
    try:
        kernel_id = server.start_session("own.ipynb")
        live = wait_for(lambda: (lambda s: s if s.get("watched") else None)(
            server.get(f"kernel-watchdog/kernels/{kernel_id}")), what="a live status")
        assert live["watched_by"] == "launcher" and live["notebook"] == "own.ipynb", live
        folder = Path(env["KERNEL_WATCHDOG_REPORT_DIR"]).parent / "kernels"
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / f"{kernel_id}.json").stat().st_mode) == 0o600
        assert not (own.parent / "kernels").exists()
    finally:
        server.stop()
