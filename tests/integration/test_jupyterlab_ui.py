"""The JupyterLab 4 / Notebook 7 extension in a real JupyterLab from PyPI (the framework
virtualenv's, with the package installed as a wheel: server extension and prebuilt frontend),
driven in Debian's Chromium by playwright-core (tests/ui/drive_jupyter.cjs; npm, no browser
download). A notebook's cell segfaults its watched kernel: the notification says the cause
and the cell, the cell is marked, "Copy summary" copies it and "Open report" opens the
report inside the app, sandboxed (Lab: a tab; Notebook 7: its down panel). A cell grows memory under the kernel's cgroup limit: the status
item shows the memory, then its warning, before the kernel is killed. A cell that runs long
gets the "Where is it stuck?" offer, whose stacks open in a tab.

Screenshots go to $KWD_UI_SCREENSHOTS when set (the README's come from there), else the test's
folder. Needs node, tests/ui/node_modules (scripts/setup.sh) and /usr/bin/chromium."""
import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from conftest import REPO_ROOT, load_reports
from jupyter_server_app import Server, execute_on_websocket, server_env, wait_for
from test_python_package import target_package  # noqa: F401 (the installed wheel, a fixture)

DRIVER = REPO_ROOT / "tests" / "ui" / "drive_jupyter.cjs"
NODE_MODULES = REPO_ROOT / "tests" / "ui" / "node_modules"
SEGFAULT = "import ctypes\nctypes.string_at(0)"
# A lock taken twice: the cell waits for ever, and `stacks` says on what.
STUCK = ("import threading\n"
         "def kwd_waits_for_ever():\n"
         "    lock = threading.Lock()\n"
         "    lock.acquire()\n"
         "    lock.acquire()\n"
         "kwd_waits_for_ever()")
# About 40 MiB a second: the 400 MiB limit is reached in about 9 s.
GROW = ("import time\nheld = []\nwhile True:\n"
        "    held.append(bytearray(8 * 1024 * 1024))\n    time.sleep(0.2)")


def write_notebook(folder, name, code):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, str(folder / name))


@pytest.fixture
def lab(tmp_path, target_package):  # noqa: F811
    # No "Would you like to get notified about official Jupyter news?" over the screenshots.
    settings = tmp_path / "config" / "lab" / "user-settings" / "@jupyterlab" / \
        "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    s = Server(tmp_path, server_env(tmp_path, target_package), app="jupyterlab")
    yield s
    s.stop()


def drive(lab, scenario, url_path, tmp_path):
    shots = Path(os.environ.get("KWD_UI_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["node", str(DRIVER), scenario, f"{lab.url}/{url_path}?token=kwd-test-token", str(shots)],
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)}, capture_output=True, text=True,
        timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" not in seen, seen["error"] + "\n" + (lab.notebooks.parent /
                                                       "server.log").read_text()[-3000:]
    return seen


def the_report(lab):
    [report] = load_reports(lab.reports)
    return report


@pytest.mark.parametrize("ui", ["lab", "notebook7"])
def test_a_segfault_is_said_in_a_notification_with_the_cell_and_the_report_opens(
        lab, tmp_path, ui):
    write_notebook(lab.notebooks, "crash.ipynb", SEGFAULT)
    url = "lab/tree/crash.ipynb" if ui == "lab" else "notebooks/crash.ipynb"
    seen = drive(lab, f"crash-{ui}", url, tmp_path)
    report = the_report(lab)
    assert report["diagnosis"]["cause"] == "native_crash"
    headline = report["diagnosis"]["headline"]

    assert seen["memory_before"].startswith("Kernel ") and "memory limit" in seen["memory_before"]
    assert seen["memory_in"] == ("statusbar" if ui == "lab" else "top"), seen
    text = seen["toast_text"]
    assert text.startswith("crash.ipynb kernel died: " + headline[:60]), text
    assert "cell [1]: import ctypes" in text, text
    assert [b for b in seen["buttons"] if b.strip()] == ["Open report", "Copy summary",
                                                        "What to do"], seen["buttons"]
    assert "step_button" not in seen, seen
    assert seen["marked_cells"] == 1
    assert headline in seen["clipboard"] and report["id"] in seen["clipboard"], seen["clipboard"]
    assert "Running cell [1]: import ctypes" in seen["clipboard"], seen["clipboard"]
    # Inside the app, in an iframe that may run nothing: Lab a tab of its main area, Notebook 7
    # its down panel under the notebook (its main area takes one document); no browser tab.
    assert seen["frame_sandbox"] == "", seen
    assert seen["browser_tabs"] == 1, seen
    assert seen["report_area"] == ("main" if ui == "lab" else "down"), seen
    assert seen["frame_height"] >= 200, seen
    assert "SIGSEGV" in seen["report_text"] or headline[:40] in seen["report_text"]
    # How long from the death to the notification (reported, not asserted: tests never
    # assert timings).
    print(f"{ui}: notification {seen['toast_ms'] - report['kernel']['died_at_ms']} ms after "
          "the death")


def test_a_cell_that_runs_long_offers_where_it_is_stuck_and_shows_the_stacks(lab, tmp_path):
    # The offer after 3 s (the setting's default is 60), through JupyterLab's own settings.
    settings = tmp_path / "config" / "lab" / "user-settings" / "kernel-watchdog"
    settings.mkdir(parents=True)
    (settings / "stuck.jupyterlab-settings").write_text('{"stuckAfterSeconds": 3}')
    write_notebook(lab.notebooks, "stuck.ipynb", STUCK)
    seen = drive(lab, "stuck-lab", "lab/tree/stuck.ipynb", tmp_path)
    assert "stuck.ipynb: a cell has run for over 3 s" in seen["toast_text"], seen
    assert "Where is it stuck?" in seen["buttons"], seen
    text = seen["stacks_text"]
    # The cell's own function, in the main thread's Python frames, and what it waits on.
    assert "kwd_waits_for_ever" in text, text
    assert "What it waits on: waiting for a lock that is never released" in text, text
    assert seen["stacks_area"] == "main" and seen["tab_label"] == "Where stuck.ipynb is", seen
    print(f"offer {seen['toast_ms'] - seen['cell_started_ms']} ms after the cell started")


@pytest.mark.parametrize("ui", ["lab", "notebook7"])
def test_memory_growing_toward_the_limit_warns_before_the_kernel_is_killed(lab, tmp_path, ui):
    write_notebook(lab.notebooks, "grow.ipynb", GROW)
    url = "lab/tree/grow.ipynb" if ui == "lab" else "notebooks/grow.ipynb"
    seen = drive(lab, f"grow-{ui}", url, tmp_path)
    report = the_report(lab)
    assert report["diagnosis"]["cause"] == "oom_killed_cgroup", report["diagnosis"]
    died = report["kernel"]["died_at_ms"]
    readings = [r for r in seen["memory_texts"] if r["t"] < died]
    warnings = [r for r in readings if r["warning"]]
    assert warnings, readings
    assert "memory limit" in warnings[0]["text"] and "full in" in warnings[0]["text"], warnings
    # The item showed the growth: the kernel's memory it read rose by at least 100 MiB.
    sizes = [int(m.group(1)) for r in readings
             if (m := re.search(r"Kernel (\d+) MiB", r["text"]))]
    assert sizes and max(sizes) - sizes[0] >= 100, readings
    assert "memory limit" in seen["toast_text"] or "OOM" in seen["toast_text"] or \
        "out of memory" in seen["toast_text"].lower(), seen["toast_text"]
    # The first remedy (raise the watchdog's limit) has a one-click step: its option, doubled,
    # copied. The segfault's first remedy has none: the test above sees only our three buttons.
    first = report["diagnosis"]["remedies"][0]
    assert first["id"] == "oom.raise_watchdog_limit" and first["action"]["kind"] == "copy", first
    assert seen.get("step_button") == first["action"]["label"], seen["buttons"]
    assert seen["step_clipboard"] == first["action"]["text"] == "--memory-limit=800M", seen
    print(f"{ui}: warned {died - warnings[0]['t']} ms before the kill: {warnings[0]['text']}")


def test_a_death_while_no_browser_was_open_is_said_when_jupyterlab_opens_again(lab, tmp_path):
    """The browser leaves JupyterLab; a kernel dies; JupyterLab opened again says so (the
    reports endpoint, from the last report that browser saw)."""
    kernel_id = lab.start_session("missed.ipynb")
    wait_for(lambda: (lambda s: s.get("rss_bytes", 0) > 20 * 1024 * 1024)(
        lab.get(f"kernel-watchdog/kernels/{kernel_id}")), what="the kernel's start")
    driver = subprocess.Popen(
        ["node", str(DRIVER), "missed-lab", f"{lab.url}/lab?token=kwd-test-token", str(tmp_path)],
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert driver.stdout.readline() == "LEFT\n", driver.stderr.read()

        async def crash():
            kernel, _ = await execute_on_websocket(lab, kernel_id, SEGFAULT)
            kernel.close()
        asyncio.run(crash())
        wait_for(lambda: load_reports(lab.reports), what="the report")
        out, err = driver.communicate("go\n", timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
    seen = json.loads(out.strip().splitlines()[-1])
    assert "error" not in seen, seen["error"]
    headline = the_report(lab)["diagnosis"]["headline"]
    assert seen["toast_text"].startswith("missed.ipynb kernel died: " + headline[:50]), seen
