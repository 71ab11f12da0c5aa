"""`kernel-watchdog smoke`: notebooks run in real ipykernels through the tool's own C++
Jupyter client, real ZeroMQ, real crashes. The JUnit file is read by junitparser (Debian's
python3-junitparser) and the executed notebooks are validated by nbformat."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import nbformat
import psutil
import pytest
from junitparser import JUnitXml, Failure, Skipped

from conftest import KWD_BINARY


def write_notebook(path, cells, kernel="python3", metadata=None, raw=None):
    """cells: [(source, tags)] or str for code; ("markdown", text) for markdown."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nb.metadata.update(metadata or {})
    for cell in cells:
        if isinstance(cell, str):
            nb.cells.append(nbformat.v4.new_code_cell(cell))
        elif cell[0] == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(cell[1]))
        else:
            source, tags = cell
            nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": tags}))
    path = pathlib.Path(path)
    if raw is not None:
        path.write_bytes(raw)
    else:
        nbformat.write(nb, str(path))
    return path


@pytest.fixture
def smoke(tmp_path, monkeypatch):
    """smoke(*notebooks, extra args) -> (CompletedProcess, out_dir). Runs in tmp_path with a
    private TMPDIR and Jupyter runtime dir; checks that no kernel outlives the run."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    out_dir = tmp_path / "out"

    def _run(*args, timeout=240, env=None):
        before = set((out_dir / "reports").glob("*.json"))
        proc = subprocess.run([KWD_BINARY, "smoke", "--output-dir", str(out_dir), *map(str, args)],
                              capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                              env=env)
        # A kernel that never became ready (seen once in CI under ASan, not since): its hang
        # report says where each thread of it was. Shown with the test's output if it fails.
        for report in sorted(set((out_dir / "reports").glob("*.json")) - before):
            try:
                hang = json.loads(report.read_text()).get("kind") == "hang"
            except ValueError:
                hang = False
            if hang:
                shown = subprocess.run([KWD_BINARY, "reports", "show", str(report)],
                                       capture_output=True, text=True, timeout=60)
                print(f"== hang report {report}:\n{shown.stdout}{shown.stderr}", file=sys.stderr)
        # No kernel is left behind: every kernel's connection file lies under this TMPDIR.
        left = []
        for p in psutil.process_iter(["cmdline"]):
            if any(str(tmp_path) in a for a in (p.info["cmdline"] or [])):
                left.append(p.info["cmdline"])
        assert not left, f"left running: {left}"
        leftovers = list(tmp_path.glob("kernel-watchdog-smoke-*"))
        assert not leftovers, leftovers
        return proc

    return _run, out_dir


def junit(path):
    suites = list(JUnitXml.fromfile(str(path)))
    return {s.name: list(s) for s in suites}


def result_of(case):
    kinds = [type(r) for r in case.result]
    return "failure" if Failure in kinds else "skipped" if Skipped in kinds else "passed"


def test_passing_notebook_writes_a_valid_executed_notebook_and_junit(smoke, tmp_path):
    run, out = smoke
    nb = write_notebook(tmp_path / "ok.ipynb", [
        ("markdown", "# title"),
        "print('hello from the kernel')",
        "x = 6 * 7\nx",
        "from IPython.display import display, HTML\n"
        "h = display(HTML('<b>one</b>'), display_id=True)\nh.update(HTML('<b>two</b>'))",
    ])
    proc = run(nb, "--junit", tmp_path / "junit.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "3 passed, 0 failed" in proc.stdout
    executed = nbformat.read(str(out / "ok.ipynb"), as_version=4)
    nbformat.validate(executed)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert code[0].outputs[0]["text"] == "hello from the kernel\n"
    assert code[1].outputs[0]["output_type"] == "execute_result"
    assert code[1].outputs[0]["data"]["text/plain"] == "42"
    assert [c.execution_count for c in code] == [1, 2, 3]
    # Timing as nbclient records it, from the kernel's own message dates, in order.
    steps = ["iopub.status.busy", "iopub.execute_input", "shell.execute_reply",
             "iopub.status.idle"]
    for c in code:
        stamps = c.metadata["execution"]
        assert sorted(stamps) == sorted(steps), stamps
        assert stamps["iopub.status.busy"] <= stamps["iopub.execute_input"] <= \
            stamps["iopub.status.idle"], stamps
        # To the microsecond, as the kernel sent them and nbclient writes them.
        for step in steps:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamps[step]), stamps
    assert code[2].outputs[0]["data"]["text/html"] == "<b>two</b>"  # update_display_data
    suites = junit(tmp_path / "junit.xml")
    (cases,) = suites.values()
    assert [c.name for c in cases] == ["cell 1: print('hello from the kernel')",
                                       "cell 2: x = 6 * 7",
                                       "cell 3: from IPython.display import display, HTML"]
    assert all(result_of(c) == "passed" for c in cases)
    assert all(c.classname == str(nb) for c in cases)
    assert not (out / "reports").exists()  # an ordinary run writes no crash report


def test_ipython_history_stays_in_memory_unless_asked(smoke, tmp_path, monkeypatch):
    """As nbclient does: a CI run adds nothing to the user's IPython history file (and
    kernels run in parallel do not contend for its SQLite lock)."""
    run, out = smoke
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = write_notebook(tmp_path / "history.ipynb",
                        ["print(get_ipython().history_manager.hist_file)"])

    def history_file(*args):
        proc = run(nb, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        executed = nbformat.read(str(out / "history.ipynb"), as_version=4)
        return executed.cells[0].outputs[0]["text"].strip()

    assert history_file() == ":memory:"
    assert not (tmp_path / "ipython").exists() or not list((tmp_path / "ipython").rglob("*.sqlite"))
    # A relative file is taken from where smoke runs (tmp_path), not the kernel's folder.
    (tmp_path / "hist").mkdir()
    assert history_file("--ipython-history", "hist/mine.sqlite") == str(
        tmp_path / "hist" / "mine.sqlite")
    # profile: the kernel's own setting, the profile's history file.
    assert history_file("--ipython-history", "profile") == str(
        tmp_path / "ipython" / "profile_default" / "history.sqlite")


@pytest.mark.parametrize("args, says", [
    (["--ipython-history", ""], "'' is empty"),
    # The shell's --ipython-history="" gives the parser the next argument as the value.
    (["--ipython-history="], "a.ipynb' exists and is not an SQLite database"),
    (["--ipython-history", "nowhere/h.sqlite"], "folder that does not exist"),
    (["--ipython-history", "not-sqlite.txt"], "is not an SQLite database"),
])
def test_ipython_history_that_cannot_work_is_refused_before_any_kernel(smoke, tmp_path, args,
                                                                       says):
    """No notebook may be swallowed as a value and skipped, and a file IPython cannot open
    would stop every kernel from starting."""
    run, out = smoke
    (tmp_path / "not-sqlite.txt").write_text("hello")
    notebooks = [write_notebook(tmp_path / name, ["1"]) for name in ("a.ipynb", "b.ipynb")]
    proc = run(*args, *notebooks)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert says in proc.stderr
    assert not (out / "a.ipynb").exists() and not (out / "b.ipynb").exists()


def test_raising_cell_fails_and_stops_the_notebook(smoke, tmp_path):
    run, out = smoke
    nb = write_notebook(tmp_path / "raises.ipynb", ["a = 1", "1 / 0", "b = 2"])
    proc = run(nb, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ZeroDivisionError" in proc.stdout
    (cases,) = junit(tmp_path / "j.xml").values()
    assert [result_of(c) for c in cases] == ["passed", "failure", "skipped"]
    failure = cases[1].result[0]
    assert failure.type == "ZeroDivisionError"
    assert "division by zero" in failure.message
    assert "1 / 0" in failure.text  # the traceback, without ANSI colours
    assert "\x1b[" not in failure.text
    assert "earlier cell failed" in cases[2].result[0].message
    assert not (out / "reports").exists()  # a cell error is not a crash


def test_both_tag_conventions_and_notebook_allow_errors(smoke, tmp_path):
    run, out = smoke
    nb = write_notebook(tmp_path / "tags.ipynb", [
        ("raise SystemExit('must not run')", ["skip-execution"]),
        ("raise SystemExit('must not run either')", ["nbval-skip"]),
        ("raise ValueError('expected')", ["raises-exception"]),
        ("raise KeyError('expected too')", ["nbval-raises-exception"]),
        "ran = True",
    ])
    proc = run(nb, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (cases,) = junit(tmp_path / "j.xml").values()
    assert [result_of(c) for c in cases] == ["skipped", "skipped", "passed", "passed", "passed"]
    executed = nbformat.read(str(out / "tags.ipynb"), as_version=4)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert code[0].outputs == [] and code[2].outputs[0]["ename"] == "ValueError"

    allowed = write_notebook(tmp_path / "allowed.ipynb", ["1 / 0", "after = 1"],
                             metadata={"execution": {"allow_errors": True}})
    proc = run(allowed)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_timeout_interrupts_the_cell_and_the_next_notebook_runs(smoke, tmp_path):
    run, out = smoke
    slow = write_notebook(tmp_path / "slow.ipynb", ["while True:\n    pass", "never = 1"])
    fine = write_notebook(tmp_path / "fine.ipynb", ["ok = 1"])
    proc = run(slow, fine, "--timeout", "2", "--junit", tmp_path / "j.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    suites = junit(tmp_path / "j.xml")
    slow_cases = suites[str(slow)]
    assert slow_cases[0].result[0].type == "timeout"
    assert result_of(slow_cases[1]) == "skipped"
    assert result_of(suites[str(fine)][0]) == "passed"
    # Interrupted in time: no hang report.
    assert not (out / "reports").exists()
    executed = nbformat.read(str(out / "slow.ipynb"), as_version=4)
    assert executed.cells[0].outputs[-1]["ename"] == "KeyboardInterrupt"
    assert "interrupted with SIGINT" in slow_cases[0].result[0].message


def test_a_cell_that_outlives_its_timeout_and_the_interrupt_is_told_once(smoke, tmp_path):
    """The cell ignores SIGINT: the timeout's interrupt does nothing, the kernel is killed and
    a hang report written. Its summary is printed once, under "crash report" (it was also
    printed under the cell)."""
    run, out = smoke
    spin = write_notebook(tmp_path / "spin.ipynb", [
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "while True:\n    time.sleep(0.01)"])
    proc = run(spin, "--timeout", "2")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # a kernel hung
    [report] = (out / "reports").glob("*.json")
    # Where the stacks at the timeout found it stays the message's point after the kill: in
    # the sleep, or (caught between two sleeps) running the loop's own Python, at line 4.
    assert re.search(r"still running after the cell timeout and an interrupt; killed: "
                     r"(stuck in \S+, .* from <module> \(\S+:4\)|busy running the cell's own "
                     r"Python code: <module>\(\) at \S+:4, )", proc.stdout), proc.stdout
    assert f"crash report: {report}" in proc.stdout, proc.stdout
    assert proc.stdout.count("Kernel hang report") == 1, proc.stdout
    assert proc.stdout.count("What to do") == 1, proc.stdout


def test_a_kernel_whose_spec_says_message_is_interrupted_on_the_control_channel(
        smoke, tmp_path, monkeypatch):
    """interrupt_mode "message" (kernels that cannot take SIGINT): the timeout sends an
    interrupt_request on the control channel; the real ipykernel interrupts the cell and
    answers with an interrupt_reply, which the result reports."""
    run, out = smoke
    spec_dir = tmp_path / "jupyter" / "kernels" / "py-message"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (interrupts by message)", "language": "python",
        "interrupt_mode": "message"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    slow = write_notebook(tmp_path / "slow.ipynb", ["while True:\n    pass"], kernel="py-message")
    proc = run(slow, "--timeout", "2", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (notebook,) = json.loads(proc.stdout)["notebooks"]
    (cell,) = notebook["cells"]
    assert cell["failure_type"] == "timeout"
    assert "interrupted with an interrupt_request" in cell["message"], cell["message"]
    assert cell["message"].endswith("; the kernel acknowledged it"), cell["message"]
    executed = nbformat.read(str(out / "slow.ipynb"), as_version=4)
    assert executed.cells[0].outputs[-1]["ename"] == "KeyboardInterrupt"
    assert not (out / "reports").exists()


def test_notebook_timeout_metadata_is_honoured_and_the_flag_wins(smoke, tmp_path):
    run, _ = smoke
    nb = write_notebook(tmp_path / "meta.ipynb", ["import time\ntime.sleep(30)"],
                        metadata={"execution": {"timeout": 2}})
    proc = run(nb, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (cell,) = json.loads(proc.stdout)["notebooks"][0]["cells"]
    assert cell["failure_type"] == "timeout" and "2 s cell timeout" in cell["message"]
    quick = write_notebook(tmp_path / "quick.ipynb", ["import time\ntime.sleep(3)"],
                           metadata={"execution": {"timeout": 1}})
    proc = run(quick, "--timeout", "0")  # 0: no timeout at all, over the metadata's 1 s
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_input_fails_in_the_cell_instead_of_hanging(smoke, tmp_path):
    run, _ = smoke
    nb = write_notebook(tmp_path / "ask.ipynb", ["name = input('name? ')"])
    proc = run(nb, "--timeout", "60", "--junit", tmp_path / "j.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (cases,) = junit(tmp_path / "j.xml").values()
    assert cases[0].result[0].type == "StdinNotImplementedError"


def test_segfault_names_cause_and_cell_with_report_and_page(smoke, tmp_path):
    run, out = smoke
    nb = write_notebook(tmp_path / "crash.ipynb", [
        "import ctypes",
        "ctypes.string_at(0)",
        "after = 1",
    ])
    proc = run(nb, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "DIED" in proc.stdout
    assert "cell 2 (ctypes.string_at(0))" in proc.stdout
    (cases,) = junit(tmp_path / "j.xml").values()
    failure = cases[1].result[0]
    assert failure.type == "native_crash"
    assert "SIGSEGV" in failure.message
    assert "died in cell 2" in cases[2].result[0].message
    reports = list((out / "reports").glob("*.json"))
    assert len(reports) == 1
    report = json.loads(reports[0].read_text())
    assert report["watchdog"]["mode"] == "smoke"
    assert report["termination"]["signal_name"] == "SIGSEGV"
    assert report["diagnosis"]["cause"] == "native_crash"
    assert "string_at" in report["diagnosis"]["headline"] or report["python_traceback"]
    assert (out / "reports" / (reports[0].stem + ".html")).exists()
    assert oct(reports[0].stat().st_mode & 0o777) == "0o600"
    # The connection key is in no output.
    assert "key" not in report.get("connection", {}) or not report["connection"]["key"]


def test_oom_kill_under_memory_limit_is_a_death_with_cause(smoke, tmp_path):
    run, out = smoke
    nb = write_notebook(tmp_path / "oom.ipynb", [
        "import numpy as np, time",
        "held = []\nwhile True:\n    held.append(np.ones(20 * 1024 * 1024 // 8))\n"
        "    time.sleep(0.02)",
    ])
    proc = run(nb, "--memory-limit", "300M", "--junit", tmp_path / "j.xml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (cases,) = junit(tmp_path / "j.xml").values()
    assert cases[1].result[0].type == "oom_killed_cgroup", proc.stdout
    assert "300.0 MiB" in cases[1].result[0].message


def test_memory_budget_fails_the_first_cell_over_it_and_the_rest_run(smoke, tmp_path):
    run, _ = smoke
    nb = write_notebook(tmp_path / "budget.ipynb", [
        "small = 1",
        "import numpy as np, time\nbig = np.ones(400 * 1024 * 1024 // 8)\ntime.sleep(1)",
        "del big\nafter = 1",
    ])
    proc = run(nb, "--max-rss", "250M", "--junit", tmp_path / "j.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (cases,) = junit(tmp_path / "j.xml").values()
    assert [result_of(c) for c in cases] == ["passed", "failure", "passed"]
    assert cases[1].result[0].type == "memory budget"
    assert "250.0 MiB" in cases[1].result[0].message
    # junitparser 2.8 reads testcase properties only as XML.
    peak = {p.get("name"): p.get("value") for p in cases[1]._elem.iter("property")}
    assert int(peak["peak_rss_bytes"]) > 250 * 1024 * 1024


def test_gpu_budget_through_fake_nvml_fails_the_cell_that_held_too_much(smoke, tmp_path):
    """--max-gpu with the fake libnvidia-ml.so.1 (NVML's ABI, loaded through the same dlopen
    path): a cell "holds" GPU memory by rewriting the fake driver's script with its own pid
    and waiting for the NVML worker's next poll (2 Hz)."""
    from conftest import KWD_BUILD_DIR
    run, _ = smoke
    library = pathlib.Path(KWD_BUILD_DIR) / "fake-nvml" / "current" / "libnvidia-ml.so.1"
    script = tmp_path / "nvml-script"
    gpu = ("driver=550.54.15\ndevice.0.name=NVIDIA H100 80GB HBM3\n"
           "device.0.total=85899345920\ndevice.0.used=1073741824\ndevice.0.filler_processes=1\n")
    script.write_text(gpu)
    hold = (
        "import os, pathlib, time\n"
        "def hold(n):\n"
        f"    script = pathlib.Path({str(script)!r})\n"
        "    tmp = script.with_suffix('.cell')\n"
        f"    tmp.write_text({gpu!r} + f'device.0.process={{os.getpid()}}:{{n}}\\n')\n"
        "    tmp.replace(script)\n"
        "    time.sleep(1.5)\n")
    nb = write_notebook(tmp_path / "gpu.ipynb", [hold, "hold(1 << 30)", "hold(6 << 30)",
                                                 "hold(1 << 30)"])
    env = dict(os.environ, FAKE_NVML_SCRIPT=str(script))
    proc = run(nb, "--nvml-library", library, "--max-gpu", "4G", "--junit", tmp_path / "j.xml",
               env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (cases,) = junit(tmp_path / "j.xml").values()
    assert [result_of(c) for c in cases] == ["passed", "passed", "failure", "passed"]
    assert cases[2].result[0].type == "memory budget"
    assert "--max-gpu" in cases[2].result[0].message and "4.0 GiB" in cases[2].result[0].message
    peak = {p.get("name"): p.get("value") for p in cases[2]._elem.iter("property")}
    assert int(peak["peak_gpu_bytes"]) == 6 << 30
    first = {p.get("name"): p.get("value") for p in cases[1]._elem.iter("property")}
    assert int(first["peak_gpu_bytes"]) == 1 << 30


def test_two_notebooks_at_once_keep_their_order(smoke, tmp_path):
    run, out = smoke
    slow = write_notebook(tmp_path / "a_slow.ipynb", ["import time\ntime.sleep(3)"])
    fast = write_notebook(tmp_path / "b_fast.ipynb", ["x = 1"])
    started = time.monotonic()
    proc = run(slow, fast, "-j", "2", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert [n["path"] for n in summary["notebooks"]] == [str(slow), str(fast)]
    assert all(n["outcome"] == "passed" for n in summary["notebooks"])
    assert summary["exit_status"] == 0
    assert (out / "a_slow.ipynb").exists() and (out / "b_fast.ipynb").exists()


def test_github_annotations_and_step_summary(smoke, tmp_path):
    run, _ = smoke
    nb = write_notebook(tmp_path / "gh.ipynb", ["1 / 0"])
    step_summary = tmp_path / "summary.md"
    env = dict(os.environ, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(step_summary))
    proc = run(nb, env=env)
    assert proc.returncode == 1
    (line,) = [l for l in proc.stdout.splitlines() if l.startswith("::error ")]
    assert line.startswith(f"::error file={nb},title=notebook failed%3A ZeroDivisionError::")
    table = step_summary.read_text()
    assert "| notebook | result | cause |" in table and "ZeroDivisionError" in table


@pytest.mark.parametrize("name,raw,message", [
    ("not_json.ipynb", b"{ this is not json", "not valid JSON"),
    ("v5.ipynb", json.dumps({"nbformat": 5, "nbformat_minor": 0, "cells": [],
                             "metadata": {}}).encode(), "nbformat 5 is not supported"),
    ("empty.ipynb", json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [],
                                "metadata": {}}).encode(), "has no cells"),
    ("latin1.ipynb", b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": '
                     b'[{"cell_type": "code", "source": "x = \'\xe9\'", "metadata": {}, '
                     b'"outputs": [], "execution_count": null}]}', "UTF-8"),
    ("list.ipynb", b"[1, 2]", "not an object"),
])
def test_bad_notebooks_are_refused_before_any_kernel_starts(smoke, tmp_path, name, raw, message):
    run, out = smoke
    good = write_notebook(tmp_path / "good.ipynb", ["x = 1"])
    bad = write_notebook(tmp_path / name, [], raw=raw)
    proc = run(good, bad)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert str(bad) in line and message in line, line
    assert not out.joinpath("good.ipynb").exists()  # refused before anything ran


def test_missing_notebook_and_unknown_kernel_are_input_errors(smoke, tmp_path):
    run, _ = smoke
    proc = run(tmp_path / "nope.ipynb")
    assert proc.returncode == 4 and "nope.ipynb" in proc.stderr
    nb = write_notebook(tmp_path / "k.ipynb", ["x = 1"], kernel="no-such-kernel")
    proc = run(nb)
    assert proc.returncode == 4
    assert "no kernel named 'no-such-kernel'" in proc.stderr and "python3" in proc.stderr
    proc = run("--timeout", "soon", nb)
    assert proc.returncode == 4


def test_both_source_shapes_v3_and_a_large_embedded_image_run(smoke, tmp_path):
    run, out = smoke
    doc = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["x = 1\n", "y = x + 1"]},
        {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None,
         "source": "assert y == 2",
         "outputs": [{"output_type": "display_data", "metadata": {},
                      "data": {"image/png": "A" * (50 * 1024 * 1024)}}]},
    ]}
    big = tmp_path / "shapes.ipynb"
    big.write_text(json.dumps(doc))
    v3 = tmp_path / "old.ipynb"
    v3.write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": "old"},
                              "worksheets": [{"cells": [
                                  {"cell_type": "heading", "level": 1, "source": "Old"},
                                  {"cell_type": "code", "input": "z = 3\nz", "outputs": [],
                                   "language": "python", "metadata": {}}]}]}))
    proc = run(big, v3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nbformat.validate(nbformat.read(str(out / "shapes.ipynb"), as_version=4))
    old = nbformat.read(str(out / "old.ipynb"), as_version=4)
    nbformat.validate(old)
    assert old.cells[1].outputs[0]["data"]["text/plain"] == "3"


def test_kernel_that_cannot_start_is_a_death_with_its_cause(smoke, tmp_path, monkeypatch):
    run, _ = smoke
    spec_dir = tmp_path / "jp" / "kernels" / "broken"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": ["/nonexistent/python", "-f", "{connection_file}"], "display_name": "broken",
         "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    nb = write_notebook(tmp_path / "b.ipynb", ["x = 1"], kernel="broken")
    proc = run(nb, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "/nonexistent/python" in proc.stdout
    (cases,) = junit(tmp_path / "j.xml").values()
    assert result_of(cases[0]) == "skipped"


# A kernelspec whose first start finds one of its ports taken (the wrapper binds it and hands the
# socket to the kernel it execs), as when another process takes a port between smoke choosing
# it and the kernel binding it; later starts run the kernel as it is.
LOSES_ITS_PORT_ONCE = """
import json, os, socket, sys
connection, marker, port = sys.argv[1:4]
if not os.path.exists(marker):
    open(marker, "w").close()
    taken = socket.socket()
    taken.bind(("127.0.0.1", json.load(open(connection))[port]))
    taken.listen()
    os.set_inheritable(taken.fileno(), True)
os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", connection])
"""


# ipykernel binds shell first: losing it, the kernel dies. Losing IOPub (bound after shell,
# stdin and control), it prints the same error and then never exits: its interpreter waits in
# zmq_ctx_term on the sockets it did bind (ipykernel 6 and 7 alike; CI met it).
@pytest.mark.parametrize("port", ["shell_port", "iopub_port"])
def test_a_kernel_that_lost_a_port_at_start_is_started_again_on_new_ports(smoke, tmp_path,
                                                                          monkeypatch, port):
    """jupyter_client's restarter starts a kernel again on new ports when it dies of
    "Address already in use" before answering; so does smoke, and the notebook passes. A
    kernel that lives on after the error is ended first."""
    run, out_dir = smoke
    spec_dir = tmp_path / "jp" / "kernels" / "unlucky"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": ["/usr/bin/python3", "-c", LOSES_ITS_PORT_ONCE, "{connection_file}",
                  str(tmp_path / "lost-once"), port], "display_name": "unlucky",
         "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    nb = write_notebook(tmp_path / "u.ipynb", ["x = 6 * 7\nprint(x)"], kernel="unlucky")
    # Well inside the start-up timeout: a kernel left stuck until then would fail the run.
    proc = run(nb, "--json", "--startup-timeout", "30")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "lost-once").exists()  # the first start did lose its port
    assert "Address already in use); starting it again on new ports (1 of 2)" in proc.stderr
    (result,) = json.loads(proc.stdout[proc.stdout.index("{"):])["notebooks"]
    assert result["outcome"] == "passed", result
    assert not list((out_dir / "reports").glob("*.json")), "the lost start is no crash"


def test_kernel_that_never_becomes_ready_names_its_kernelspec_and_the_timeout(smoke, tmp_path,
                                                                              monkeypatch):
    """A kernelspec whose process lives but never binds the kernel's sockets: the report says
    the kernel never became ready, names the kernelspec and the start-up timeout, and advises
    on those, not only on a hang."""
    run, out_dir = smoke
    spec_dir = tmp_path / "jp" / "kernels" / "sleeper"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": ["/usr/bin/python3", "-c", "import time; time.sleep(60)", "-f",
                  "{connection_file}"], "display_name": "sleeper", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    nb = write_notebook(tmp_path / "s.ipynb", ["x = 1"], kernel="sleeper")
    proc = run(nb, "--startup-timeout", "3", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (result,) = json.loads(proc.stdout[proc.stdout.index("{"):])["notebooks"]
    assert result["cause"] == "hang", result
    assert "kernelspec 'sleeper' never became ready" in result["headline"], result
    assert "3 s start-up timeout (--startup-timeout)" in result["headline"], result
    report = json.loads(pathlib.Path(result["report"]).read_text())
    assert report["startup"] == {"kernel_name": "sleeper", "timeout_s": 3.0,
                                 "kernel_info_answered": False, "iopub_seen": False}
    remedies = [r["id"] for r in report["diagnosis"]["remedies"]]
    assert remedies[:2] == ["startup.check_kernelspec", "startup.longer_timeout"], remedies
    assert "never answered kernel_info_request" in \
        report["diagnosis"]["evidence"][0]["fact"], report["diagnosis"]


def test_sigterm_to_the_harness_leaves_no_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    nb = write_notebook(tmp_path / "long.ipynb", ["import time\ntime.sleep(600)"])
    proc = subprocess.Popen([KWD_BINARY, "smoke", "--output-dir", str(tmp_path / "o"), str(nb)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    kernels = []
    while time.monotonic() < deadline and not kernels:
        kernels = [p for p in psutil.Process(proc.pid).children() if "ipykernel" in " ".join(p.cmdline())]
        time.sleep(0.2)
    assert kernels
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    psutil.wait_procs(kernels, timeout=10)
    assert not any(k.is_running() and k.status() != psutil.STATUS_ZOMBIE for k in kernels)
    assert not list(tmp_path.glob("kernel-watchdog-smoke-*"))


def test_shards_split_the_suite_and_their_junit_files_merge(smoke, tmp_path):
    """--store-durations in one full run; --shard K/N in two jobs balanced by the file it
    wrote (and by a file of our own, where the split is known); --merge-junit makes one
    report of the shards' as if one job had run everything."""
    run, out = smoke
    notebooks = [write_notebook(tmp_path / "slow.ipynb", ["import time\ntime.sleep(2)"])]
    notebooks += [write_notebook(tmp_path / f"quick{i}.ipynb", ["x = 1"]) for i in range(3)]
    notebooks.append(write_notebook(tmp_path / "fails.ipynb", ["1/0"]))
    names = [nb.name for nb in notebooks]
    durations = tmp_path / "durations.json"
    full = run(*names, "--store-durations", "--durations", durations, "--junit", "all.xml")
    assert full.returncode == 1, full.stdout + full.stderr
    # The history file (docs/smoke-history.md): each notebook's own time (a lower bound only:
    # how long a kernel takes to start varies) and the memory it peaked at.
    stored = json.loads(durations.read_text())["notebooks"]
    assert sorted(stored) == sorted(names) and stored["slow.ipynb"]["seconds"] >= 2, stored
    assert all(r["seconds"] > 0 and r["peak_rss"] > 0 for r in stored.values()), stored

    def shards(n, *args):
        ran = []
        for k in range(1, n + 1):
            proc = run(*names, "--shard", f"{k}/{n}", "--json", "--junit", f"shard-{k}.xml", *args)
            assert proc.returncode in (0, 1), proc.stdout + proc.stderr
            assert f"shard {k}/{n}:" in proc.stderr
            ran.append([pathlib.Path(nb["path"]).name for nb in json.loads(proc.stdout)["notebooks"]])
        return ran

    for args in ([], ["--durations", durations]):
        ran = shards(2, *args)
        assert sorted(ran[0] + ran[1]) == sorted(names), ran
        merged = run("--merge-junit", "merged.xml", "shard-1.xml", "shard-2.xml")
        assert merged.returncode == 0, merged.stderr
        whole, parts = JUnitXml.fromfile(str(tmp_path / "all.xml")), JUnitXml.fromfile(
            str(tmp_path / "merged.xml"))
        assert sorted(s.name for s in parts) == sorted(s.name for s in whole)
        assert (parts.tests, parts.failures, parts.skipped) == (
            whole.tests, whole.failures, whole.skipped)
    # Balanced by a file whose numbers we chose (in the first format, still read): the slow
    # one alone against the rest.
    durations.write_text(json.dumps({"slow.ipynb": 100, "quick0.ipynb": 10, "quick1.ipynb": 10,
                                     "quick2.ipynb": 10, "fails.ipynb": 10}))
    assert shards(2, "--durations", durations) == [["slow.ipynb"],
                                                   ["quick0.ipynb", "quick1.ipynb",
                                                    "quick2.ipynb", "fails.ipynb"]]
    # More jobs than notebooks: the jobs left over run nothing and pass.
    assert shards(7)[5:] == [[], []]
    bad = run(*names, "--shard", "3/2")
    assert bad.returncode == 4 and "--shard: '3/2' is not K/N" in bad.stderr
    foreign = tmp_path / "pytest.xml"
    foreign.write_text('<?xml version="1.0"?>\n<testsuites name="pytest"></testsuites>\n')
    refused = run("--merge-junit", "m.xml", foreign)
    assert refused.returncode == 4 and "not a JUnit file that `smoke --junit` wrote" in refused.stderr
