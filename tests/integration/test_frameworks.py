"""Real frameworks dying the way users' kernels die (framework_corpus.py), under `run` and
under `smoke`: each report states the cause, names the framework, quotes the framework's own
decisive line and gives that framework's remedies.

Under `run` the kernel is started by jupyter_client from a wrapped kernelspec, as JupyterLab
starts it; a failed cell must leave the kernel running and write no crash report. Under
`smoke` the same notebook runs through the tool's own client; a failed cell carries the cause.

The framework virtualenv comes from scripts/setup.sh; without it these tests fail (they do
not skip): run scripts/setup.sh."""
import json
import os
import pathlib
import re
import shlex
import subprocess

import nbformat
import pytest

from conftest import KWD_BINARY, KWD_BUILD_DIR, Watched, kwd, load_reports
from framework_corpus import CORPUS, DEBIAN_PYTHON, VENV_PYTHON

# Every report and smoke result is kept here, for a reader of a failed run.
ARTIFACTS = pathlib.Path(KWD_BUILD_DIR) / "test-artifacts" / "frameworks"

# qemu-user's model of a CPU without AVX (SSE4.2 is its newest vector extension).
NO_AVX_CPU = "Nehalem"


def interpreter_argv(failure):
    if failure.interpreter == "debian":
        return [str(DEBIAN_PYTHON)]
    if failure.interpreter == "venv":
        return [str(VENV_PYTHON)]
    assert failure.interpreter == "venv-no-avx"
    return ["qemu-x86_64", "-cpu", NO_AVX_CPU, str(VENV_PYTHON)]


def in_container(failure, argv):
    """argv run as in a container whose /dev/shm is a tmpfs of the failure's size: a mount
    namespace of its own (unshare without --fork execs, so the pid stays the one the kernel
    manager knows)."""
    if not failure.container_shm:
        return argv
    mount = f"mount -t tmpfs -o size={failure.container_shm} tmpfs /dev/shm && exec \"$@\""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", mount,
            "container", *argv]


def write_kernelspec(prefix, name, argv):
    spec = prefix / "share" / "jupyter" / "kernels" / name
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": name, "language": "python"}))
    return name


def watched_kernelspec(prefix, failure):
    """A kernelspec whose argv runs the failure's kernel under `kernel-watchdog run`."""
    kernel = [*interpreter_argv(failure), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    argv = [KWD_BINARY, "run", *failure.run_options, "--", *kernel]
    return write_kernelspec(prefix, f"{failure.name}-watched", in_container(failure, argv))


def plain_kernelspec(prefix, failure):
    """The failure's kernel as a plain kernelspec, for smoke to run (smoke watches it)."""
    kernel = [*interpreter_argv(failure), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    return write_kernelspec(prefix, f"{failure.name}-plain", kernel)


def notebook(path, failure, kernel):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in failure.cells]
    nbformat.write(nb, str(path))
    return path


@pytest.fixture(scope="module", autouse=True)
def frameworks_installed():
    assert VENV_PYTHON.exists(), f"{VENV_PYTHON} is missing: run scripts/setup.sh"
    page_in_native_libraries(VENV_PYTHON.parent.parent)


def page_in_native_libraries(venv):
    """Reads the venv's shared libraries once, from this test's cgroup, before any kernel runs.

    A page is charged to the cgroup that first reads it. On a cold page cache the kernel under
    --memory-limit reads TensorFlow's 1 GB of code itself, inside its limit; once its tensors
    fill the limit, that code is all the cgroup can reclaim, and it is evicted and read back
    from disk for minutes before the OOM killer fires (seen in CI: no death in 180 s; by hand:
    660 s, 275 major faults a second). The corpus is about how each framework's OOM is told,
    so it runs on the warm cache users mostly have; the cold-cache thrash is its own test
    (test_memory, the thrash guard)."""
    libraries = venv.glob("lib/python3*/site-packages/**/*.so*")
    for library in filter(pathlib.Path.is_file, libraries):
        with open(library, "rb") as f:
            while f.read(1 << 20):
                pass


@pytest.fixture
def env(jupyter_env):
    # ipykernel in its default configuration (fd 2 captured), as users run it.
    jupyter_env["env"].pop("PYTEST_CURRENT_TEST", None)
    return jupyter_env


def keep(name, text):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / name).write_text(text)


def matches_all(patterns, text, what):
    for pattern in patterns:
        assert re.search(pattern, text), f"{what} does not match {pattern!r}:\n{text}"


def matches_one_each(patterns, lines, what):
    for pattern in patterns:
        assert any(re.search(pattern, line) for line in lines), \
            f"no line of the {what} matches {pattern!r}:\n" + "\n".join(lines)


def said_second(failure, cause, headline, evidence, remedy_ids, said):
    """The kernel died after the OOM killer had taken one of its processes first (see
    Failure.taken_second): the report must say so, and give the advice for that process."""
    expected = failure.taken_second
    assert cause == "oom_killed_cgroup", said
    matches_all(expected["headline"], headline, "headline")
    matches_one_each(expected["evidence"], evidence, "evidence")
    for remedy in expected["remedies"]:
        assert remedy in remedy_ids, (remedy, said)


def fingerprint_names(report):
    fp = report.get("fingerprint") or {}
    names = [f.get("name", "") for f in fp.get("frameworks", [])]
    names += [lib.get("name", "") for lib in fp.get("native_libraries", [])]
    return names


@pytest.mark.parametrize("failure", CORPUS, ids=[f.name for f in CORPUS])
def test_under_run(failure, env):
    name = watched_kernelspec(env["prefix"], failure)
    k = Watched(name, env["env"])
    try:
        for source in failure.cells[:-1]:
            reply, _ = k.execute(source, timeout=failure.timeout)
            assert reply["status"] == "ok", reply
        if not failure.dies:
            # stop_on_error=False: ipykernel would otherwise abort the next request if it
            # arrived inside the error's abort window (seen in CI: "1 + 1" came back aborted
            # after the DataLoader's bus error), as in test_diagnosis and test_protocol.
            reply, _ = k.execute_unless_death(failure.cells[-1], timeout=failure.timeout,
                                              stop_on_error=False)
            if reply is None:
                assert failure.taken_second, "the kernel died; it should have lived"
                k.wait_for_death(timeout=30)
                k.close()
                (report,) = load_reports(env["report_dir"])
                keep(f"{failure.name}-run-taken-second.json", json.dumps(report, indent=1))
                diagnosis = report["diagnosis"]
                said_second(failure, diagnosis["cause"], diagnosis["headline"],
                            [e["fact"] for e in diagnosis["evidence"]],
                            [r["id"] for r in diagnosis["remedies"]], json.dumps(diagnosis))
                return
            assert reply["status"] == "error", reply
            assert k.km.is_alive()
            # The kernel lives on and answers.
            reply, outputs = k.execute("1 + 1")
            assert reply["status"] == "ok", reply
            assert load_reports(env["report_dir"]) == []
            return
        k.execute_until_death(failure.cells[-1], timeout=failure.timeout)
    finally:
        k.close()
    (report,) = load_reports(env["report_dir"])
    keep(f"{failure.name}-run.json", json.dumps(report, indent=1))
    diagnosis = report["diagnosis"]
    assert diagnosis["cause"] == failure.cause, diagnosis
    matches_all(failure.headline, diagnosis["headline"], "headline")
    matches_one_each(failure.evidence, [e["fact"] for e in diagnosis["evidence"]], "evidence")
    remedy_ids = [r["id"] for r in diagnosis["remedies"]]
    for remedy in failure.remedies:
        assert remedy in remedy_ids, (remedy, remedy_ids)
    assert any(failure.framework.lower() in n.lower() for n in fingerprint_names(report)), \
        (failure.framework, report.get("fingerprint"))
    # What the framework was built for, from its package: these are CPU builds.
    for entry in report["fingerprint"]["frameworks"]:
        if entry["name"] in ("tensorflow", "torch", "jaxlib"):
            assert entry["build"]["accelerator"] == "cpu", entry
            if entry["name"] == "tensorflow":
                assert entry["distribution"] == "tensorflow_cpu", entry
    # The key never reaches the report.
    assert k.km.session.key.decode() not in json.dumps(report)


@pytest.mark.parametrize("failure", CORPUS, ids=[f.name for f in CORPUS])
def test_under_smoke(failure, env, tmp_path):
    kernel = plain_kernelspec(env["prefix"], failure)
    nb = notebook(tmp_path / f"{failure.name}.ipynb", failure, kernel)
    out = tmp_path / "out"
    argv = in_container(failure, [KWD_BINARY, "smoke", "--json", "--output-dir", str(out),
                                  "--timeout", str(failure.timeout),
                                  *failure.run_options, str(nb)])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=failure.timeout + 120,
                          cwd=tmp_path, env=env["env"])
    said = f"{shlex.join(argv)}\n{proc.stdout}\n{proc.stderr}"
    keep(f"{failure.name}-smoke.txt", said)
    if proc.returncode == 2 and failure.taken_second:
        (result,) = json.loads(proc.stdout[proc.stdout.index("{"):])["notebooks"]
        assert result["outcome"] == "kernel died", said
        diagnosis = json.loads(pathlib.Path(result["report"]).read_text())["diagnosis"]
        said_second(failure, result["cause"], result["headline"],
                    [e["fact"] for e in diagnosis["evidence"]],
                    [r["id"] for r in diagnosis["remedies"]], said)
        return
    assert proc.returncode == (2 if failure.dies else 1), said
    (result,) = json.loads(proc.stdout[proc.stdout.index("{"):])["notebooks"]
    failed = [c for c in result["cells"] if c["status"] == "failed"]
    assert [c["number"] for c in failed] == [len(failure.cells)], said
    cell = failed[0]
    if failure.dies:
        assert result["outcome"] == "kernel died", said
        assert result["cause"] == failure.cause, said
        matches_all(failure.headline, result["headline"], "headline")
        report = json.loads(pathlib.Path(result["report"]).read_text())
        assert report["diagnosis"]["cause"] == failure.cause
        matches_one_each(failure.evidence, [e["fact"] for e in report["diagnosis"]["evidence"]],
                         "evidence")
        return
    assert result["outcome"] == "failed", said
    assert cell.get("cause") == failure.cause, said
    matches_all(failure.headline, cell["headline"], "headline")
    matches_one_each(failure.evidence, cell["evidence"], "evidence")
    for remedy in failure.remedies:
        assert remedy in [r["id"] for r in cell["remedies"]], said
    assert failure.framework.lower() in cell["headline"].lower() + " ".join(
        cell["evidence"]).lower(), said
