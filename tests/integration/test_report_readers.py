"""The report readers (`reports list`, `show`, `show --json`, `html`) under the real binary, on
a store of real and broken reports: every command exits 0 with what it could read, or refuses
one file with one line naming it while the others are still listed.

The first report is a real one: a kernel started without a connection file that aborts, so its
`kernel.connection_file` is null and its `kernel_id` empty. The broken ones are copies of it and of the
hang fixture with each field set to null in turn, given the wrong type, whole sections removed
and evidence items replaced by numbers; then a report nested 100 000 deep, and one whose
kernel-supplied text carries terminal escape sequences."""
import copy
import json
import os
import pathlib
import subprocess

import pytest

from conftest import KWD_BINARY, REPO_ROOT, kwd

HOSTILE = ("title\x1b]0;pwned\x07 clipboard\x1b]52;c;ZXZpbA==\x07 clear\x1b[2J\x1b[H "
           "c1\u009b31m done")
DEEP = 100_000


def run(*args, env):
    return subprocess.run([KWD_BINARY, *map(str, args)], env=env, capture_output=True,
                          text=True, errors="replace", timeout=60)


@pytest.fixture
def store(tmp_path):
    """A private report store and an environment whose kernel-watchdog uses it."""
    report_dir = tmp_path / "reports"
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(report_dir), TMPDIR=str(tmp_path))
    env.pop("NO_COLOR", None)
    return report_dir, env


def real_abort_report(report_dir, env):
    """A real report: a kernel without a connection file that aborts (SIGABRT)."""
    proc = subprocess.run([KWD_BINARY, "run", "--", "/usr/bin/python3", "-c",
                           "import os; os.abort()"], env=env, capture_output=True, timeout=60)
    assert proc.returncode != 0
    (path,) = report_dir.glob("*.json")
    return path, json.loads(path.read_text())


def places(value, at=()):
    """Every member and item (of an array, the first and the last) down to depth 2."""
    if len(at) >= 2:
        return
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list) and value:
        items = sorted({0: value[0], len(value) - 1: value[-1]}.items())
    else:
        return
    for key, item in items:
        yield at + (key,)
        yield from places(item, at + (key,))


def set_at(doc, where, value):
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value


def get_at(doc, where):
    for key in where:
        doc = doc[key]
    return doc


def wrong_type(v):
    if isinstance(v, str):
        return 42
    if isinstance(v, bool):
        return "yes"
    if isinstance(v, (int, float)):
        return "not a number"
    if isinstance(v, dict):
        return [1, "two"]
    if isinstance(v, list):
        return {"not": "a list"}
    return {"unexpected": 1}


def mutants(report):
    """(name, document) for each way to break `report`."""
    for where in places(report):
        name = "-".join(map(str, where))
        for kind, value in (("null", None), ("wrong", wrong_type(get_at(report, where)))):
            doc = copy.deepcopy(report)
            set_at(doc, where, value)
            yield f"{kind}-{name}", doc
    for key in report:
        doc = copy.deepcopy(report)
        del doc[key]
        yield f"without-{key}", doc
    doc = copy.deepcopy(report)
    if isinstance(doc.get("diagnosis"), dict):
        doc["diagnosis"]["evidence"] = [1, 2.5, None]
        doc["diagnosis"]["remedies"] = [3]
        yield "evidence-numbers", doc


def fill_store(report_dir, real):
    hang = json.loads((REPO_ROOT / "tests/fixtures/diagnosis/hang_few_misses.json").read_text())
    hang = hang["report"]
    hang["kernel"]["died_at"] = None
    written = []
    for base, report in (("abort", real), ("hang", hang)):
        for n, (name, doc) in enumerate(mutants(report)):
            path = report_dir / f"{base}-{n:04d}-{name[:60]}.json"
            path.write_text(json.dumps(doc))
            written.append(path)
    return written


def test_every_reader_reads_every_broken_report(store):
    report_dir, env = store
    real_path, real = real_abort_report(report_dir, env)
    assert real["kernel"]["connection_file"] is None and not real["kernel"]["kernel_id"]
    broken = fill_store(report_dir, real)
    assert len(broken) > 150

    listing = run("reports", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    rows = listing.stdout.splitlines()[1:]
    assert len(rows) == len(broken) + 1
    for path in [real_path, *broken]:
        assert str(path) in listing.stdout
    assert "unreadable" not in listing.stdout

    # Under the sanitizers (scripts/sanitize.sh) every fifth broken report goes through the
    # CLI: each run of the instrumented binary costs about a second, and every mutant is read
    # in-process by the unit test "no reader throws on any fixture or any broken copy of one"
    # in that same build. The normal build runs them all here.
    stride = int(os.environ.get("KWD_SANITIZER_STRIDE", "1"))
    for path in [real_path, *broken[::stride]]:
        for args in (["show"], ["show", "--json"], ["html", "-o", path.with_suffix(".html")]):
            proc = run("reports", *args[:1], path, *args[1:], env=env)
            assert proc.returncode == 0, (path.name, args, proc.stderr[-2000:])
        page = path.with_suffix(".html").read_text()
        assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_reports_show_of_a_kernel_without_a_connection_file(store):
    report_dir, env = store
    _, real = real_abort_report(report_dir, env)
    shown = run("reports", "show", "latest", env=env)
    assert shown.returncode == 0, shown.stderr
    assert real["diagnosis"]["headline"] in shown.stdout
    listing = run("reports", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    assert f"pid {real['kernel']['pid']}" in listing.stdout


def test_a_report_nested_100000_deep_is_refused_in_one_line(store):
    report_dir, env = store
    real_path, _ = real_abort_report(report_dir, env)
    deep = report_dir / "20990101T000000Z-deep-1.json"
    deep.write_text('{"id": "deep", "x": ' + "[" * DEEP + "]" * DEEP + "}")
    for args in (["show", deep], ["show", deep, "--json"], ["html", deep, "-o", "-"],
                 ["show", "latest"]):
        proc = run("reports", *args, env=env)
        assert proc.returncode == 1, (args, proc.returncode)
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert str(deep) in proc.stderr and "nested deeper than" in proc.stderr
    listing = run("reports", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    (deep_row,) = [r for r in listing.stdout.splitlines() if str(deep) in r]
    assert "unreadable: nested deeper than" in deep_row
    assert str(real_path) in listing.stdout


def test_reports_are_listed_newest_death_first(store):
    report_dir, env = store
    fixture = json.loads((REPO_ROOT / "tests/fixtures/diagnosis/recorded_sigkill.json")
                         .read_text())["report"]
    # File names in the opposite order of the deaths.
    for name, died in (("a", 3_000_000_000_000), ("b", 2_000_000_000_000),
                       ("c", 1_000_000_000_000)):
        doc = copy.deepcopy(fixture)
        doc["kernel"]["died_at_ms"] = died
        report_dir.mkdir(mode=0o700, exist_ok=True)
        (report_dir / f"{'abc'.index(name)}-{name}.json").write_text(json.dumps(doc))
    listing = run("reports", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    names = [pathlib.Path(r.split()[-1]).name for r in listing.stdout.splitlines()[1:]]
    assert names == ["0-a.json", "1-b.json", "2-c.json"]
    shown = run("reports", "show", "latest", env=env)
    assert shown.stdout.rstrip().endswith("0-a.json")


def test_kernel_text_cannot_drive_the_terminal(store):
    report_dir, env = store
    real_path, real = real_abort_report(report_dir, env)
    real["stderr_tail"]["text"] = HOSTILE + "\n"
    real["execution"] = {"cell_in_flight": {"execution_count": 3, "code": HOSTILE}}
    real["diagnosis"]["evidence"][0]["fact"] = HOSTILE
    real["diagnosis"]["headline"] = HOSTILE
    real["kernel"]["kernel_id"] = HOSTILE
    real_path.write_text(json.dumps(real))
    for args in (["show", "latest"], ["list"]):
        proc = run("reports", *args, env=env)
        assert proc.returncode == 0, proc.stderr
        for control in ("\x1b", "\x07", "\u009b"):
            assert control not in proc.stdout, (args, proc.stdout)
    shown = run("reports", "show", "latest", env=env).stdout
    assert "]52;c;ZXZpbA==" in shown and "done" in shown  # shown, defused
    page = run("reports", "html", "latest", env=env).stdout
    assert "\x1b" not in page


def test_reports_are_found_by_notebook_index_kernel_id_and_prefix(store, tmp_path):
    """The notebook comes from the kernel's JPY_SESSION_NAME (what jupyter_server sets) or
    its connection file's jupyter_session (jupyter_client >= 8.3), and a person finds the
    report by it, by its place in the list, or by a kernel id; a prefix that fits several
    lists them instead of guessing."""
    report_dir, env = store
    by_env = subprocess.run(
        [KWD_BINARY, "run", "--", "/usr/bin/python3", "-c", "import os; os.abort()"],
        env=dict(env, JPY_SESSION_NAME="projects/train.ipynb"), capture_output=True, timeout=60)
    assert by_env.returncode != 0
    connection = tmp_path / "kernel-5e1f0c2a-7d3b-4c1e-9a8f-2b6d4e0f1a3c.json"
    connection.write_text(json.dumps({
        "transport": "tcp", "ip": "127.0.0.1", "shell_port": 40001, "iopub_port": 40002,
        "stdin_port": 40003, "control_port": 40004, "hb_port": 40005, "key": "k" * 32,
        "signature_scheme": "hmac-sha256", "jupyter_session": "eval/score.ipynb"}))
    by_file = subprocess.run(
        [KWD_BINARY, "run", "--", "/usr/bin/python3", "-c",
         "import os, time; time.sleep(1); os.abort()", "-f", str(connection)],
        env=env, capture_output=True, timeout=60)
    assert by_file.returncode != 0
    reports = sorted((json.loads(p.read_text()) for p in report_dir.glob("*.json")),
                     key=lambda r: r["kernel"]["died_at_ms"])
    assert [(r["kernel"]["notebook"], r["kernel"]["notebook_source"]) for r in reports] == [
        ("projects/train.ipynb", "environment"), ("eval/score.ipynb", "connection_file")]
    train, score = (r["id"] for r in reports)

    listing = run("reports", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    header, newest, older = listing.stdout.splitlines()
    assert "NOTEBOOK" in header
    assert "score.ipynb" in newest and "train.ipynb" in older

    def shown(query):
        proc = run("reports", "show", "--json", query, env=env)
        assert proc.returncode == 0, (query, proc.stderr)
        return json.loads(proc.stdout)["id"]

    for query in ("train", "train.ipynb", "projects/train.ipynb", "2", train[:20]):
        assert shown(query) == train, query
    for query in ("score", "eval/score.ipynb", "1", "latest", "5e1f0c2a",
                  "5e1f0c2a-7d3b-4c1e-9a8f-2b6d4e0f1a3c"):
        assert shown(query) == score, query
    summary = run("reports", "show", "score", env=env).stdout
    assert "notebook eval/score.ipynb" in summary

    both = run("reports", "show", train[:4], env=env)  # the year: both reports
    assert both.returncode == 1
    assert "fits 2 reports" in both.stderr
    assert train in both.stderr and score in both.stderr
    missing = run("reports", "show", "3", env=env)
    assert missing.returncode == 1 and "no report matches '3'" in missing.stderr


def test_reports_help_says_where_the_store_is(tmp_path):
    """`reports --help` names the store the environment gives, whichever way it gives it, and
    where the writers that do not use it put their reports."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("KERNEL_WATCHDOG_REPORT_DIR", "XDG_STATE_HOME")}
    cases = [
        (dict(base, KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "named")), tmp_path / "named"),
        (dict(base, XDG_STATE_HOME=str(tmp_path / "state")),
         tmp_path / "state" / "kernel-watchdog" / "reports"),
        (dict(base, HOME=str(tmp_path / "home")),
         tmp_path / "home" / ".local" / "state" / "kernel-watchdog" / "reports"),
    ]
    for env, store_dir in cases:
        out = run("reports", "--help", env=env)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert f"  {store_dir}" in lines, out.stdout
        for other in ("smoke-results/reports", "--kernel-watchdog-report-dir", "--report-dir DIR"):
            assert other in out.stdout
    # Nothing is created by asking.
    assert not (tmp_path / "named").exists() and not (tmp_path / "state").exists()


def test_report_dir_is_taken_after_the_subcommand_too(store, tmp_path):
    """`reports list --report-dir DIR` reads DIR as `reports --report-dir DIR list` does; given
    both ways, the one after the subcommand wins."""
    report_dir, env = store
    path, _ = real_abort_report(report_dir, env)
    other_env = dict(env, KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "empty"))
    before = run("reports", "--report-dir", report_dir, "list", env=other_env)
    after = run("reports", "list", "--report-dir", report_dir, env=other_env)
    assert before.returncode == after.returncode == 0, (before.stderr, after.stderr)
    assert str(path) in after.stdout
    assert after.stdout == before.stdout
    shown = run("reports", "show", "latest", "--report-dir", report_dir, env=other_env)
    assert shown.returncode == 0 and f"Report: {path}" in shown.stdout, shown.stderr
    for sub in ("html", "diagnose"):
        out = run("reports", sub, "--report-dir", report_dir, env=other_env)
        assert out.returncode == 0, (sub, out.stderr)
    both = run("reports", "--report-dir", report_dir, "list", "--report-dir", tmp_path / "empty",
               env=env)
    assert both.returncode == 0 and str(path) not in both.stdout
    assert f"No crash reports in {tmp_path / 'empty'}" in both.stdout
