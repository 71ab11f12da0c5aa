"""Hostile neighbours: what another local user can do to a watched kernel through the
shared temporary directory.

The attacker is a real second user (nobody) in a real process, racing the watchdog with
renameat2(RENAME_EXCHANGE) as the issue's reproduction did.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import KWD_BINARY

NOBODY = 65534
PYTHON = "/usr/bin/python3"

EVIL_SITECUSTOMIZE = """
import pathlib
pathlib.Path(__file__).resolve().parents[2].joinpath("pwned").write_text("ran as uid %d" % __import__("os").getuid())
"""

# Runs as `nobody`: squats ${TMPDIR}/kernel-watchdog-<uid>, keeps exchanging the watchdog's
# directory with one of its own, and plants its own sitecustomize.py under any shim
# directory it manages to get hold of.
ATTACKER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    return libc.renameat2(-100, a.encode(), -100, b.encode(), 2)
squat, evil, deadline = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
os.umask(0)
os.mkdir(squat, 0o777)
mine = os.path.join(squat, "mine")
os.mkdir(mine, 0o777)
n = 0
while time.monotonic() < deadline:
    for run in ("run",):
        exchange(os.path.join(squat, run), mine)
    for d in (mine, os.path.join(squat, "run")):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_uid == 0 and name.startswith("pyshim"):
                n += 1
                try:
                    os.rename(path, os.path.join(squat, "trash-%d" % n))
                    os.mkdir(path, 0o777)
                    with open(os.path.join(path, "sitecustomize.py"), "w") as f:
                        f.write(open(evil).read())
                except OSError:
                    pass
"""


def shared_tmp():
    """A directory like /tmp: root's, sticky, writable by everyone."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="kwd-shared-tmp-", dir="/tmp"))
    d.chmod(0o1777)
    return d


def as_nobody():
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@pytest.fixture
def shared():
    d = shared_tmp()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def watched_python(tmpdir, report_dir, code):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "PYTHONPATH")}
    env["TMPDIR"] = str(tmpdir)
    env["KERNEL_WATCHDOG_REPORT_DIR"] = str(report_dir)
    return subprocess.run([KWD_BINARY, "run", "--", PYTHON, "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")


@needs_root
def test_another_user_cannot_plant_a_sitecustomize_through_the_shim_directory(shared, tmp_path):
    evil = shared / "evil.py"
    evil.write_text(EVIL_SITECUSTOMIZE)
    evil.chmod(0o644)
    squat = shared / f"kernel-watchdog-{os.geteuid()}"
    attacker = subprocess.Popen([PYTHON, "-c", ATTACKER, str(squat), str(evil), "60"],
                                preexec_fn=as_nobody)
    try:
        deadline = time.monotonic() + 10
        while not (squat / "mine").exists():
            assert attacker.poll() is None and time.monotonic() < deadline, "attacker did not start"
            time.sleep(0.01)
        checks = "import faulthandler, sys; print(faulthandler.is_enabled())"
        for attempt in range(12):
            proc = watched_python(shared, tmp_path / "reports", checks)
            assert proc.returncode == 0, proc.stderr
            assert not (shared / "pwned").exists(), (
                f"attempt {attempt}: the other user's sitecustomize ran in the kernel")
            # The watchdog's own shim still reached the kernel (it did not just give up).
            assert proc.stdout.strip() == "True", proc.stderr
    finally:
        attacker.kill()
        attacker.wait()
    # Nothing of ours was created under the squatted directory.
    owned_by_us = [p for p in squat.rglob("*") if p.lstat().st_uid == os.geteuid()]
    assert owned_by_us == []


@needs_root
def test_a_squatted_runtime_directory_does_not_disable_the_shim(shared, tmp_path):
    squat = shared / f"kernel-watchdog-{os.geteuid()}"
    squat.mkdir(mode=0o755)
    os.chown(squat, NOBODY, NOBODY)
    proc = watched_python(shared, tmp_path / "reports",
                          "import faulthandler; print(faulthandler.is_enabled())")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True", proc.stderr
    # The shim lived directly in the shared directory and is gone with the kernel.
    assert [p.name for p in shared.iterdir() if p != squat] == []


@needs_root
def test_a_shared_directory_writable_by_others_without_sticky_bit_is_refused(tmp_path):
    loose = pathlib.Path(tempfile.mkdtemp(prefix="kwd-loose-tmp-", dir="/tmp"))
    try:
        loose.chmod(0o777)  # anyone may rename what we create here
        proc = watched_python(loose, tmp_path / "reports",
                              "import faulthandler; print(faulthandler.is_enabled())")
        # Fail open: the kernel runs, without the shim, and the reason is said.
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "False"
        assert "writable by others" in proc.stderr
        assert list(loose.iterdir()) == []
    finally:
        shutil.rmtree(loose, ignore_errors=True)


def signal_group_of_watched(tmp_path, handler, sig):
    """Runs a Python 'kernel' under the watchdog in a session of its own, with `handler` as
    its disposition for `sig`, sends `sig` to the whole process group as jupyter_client's
    provisioner does, and returns (return code, watchdog stderr)."""
    code = ("import signal, sys, time\n"
            f"signal.signal(signal.{sig.name}, {handler})\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "reports"))
    proc = subprocess.Popen([KWD_BINARY, "run", "--", PYTHON, "-c", code], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def test_a_kernel_that_exits_143_on_the_managers_sigterm_gets_no_crash_report(tmp_path):
    """JVM, Node, shell wrappers and Python kernels with a handler turn SIGTERM into an exit
    code: the manager asked, so it is not a crash."""
    rc, err = signal_group_of_watched(tmp_path, "lambda *a: sys.exit(143)", signal.SIGTERM)
    assert rc == 143, err
    reports = tmp_path / "reports"
    assert not reports.exists() or list(reports.glob("*.json")) == [], err


def test_an_interrupt_to_the_group_that_kills_the_kernel_is_not_blamed_on_a_stranger(tmp_path):
    """SIGINT to the process group (jupyter_client's interrupt) that a kernel does not handle:
    a death worth a report, but the signal came from the manager or the terminal."""
    rc, err = signal_group_of_watched(tmp_path, "signal.SIG_DFL", signal.SIGINT)
    assert rc == -signal.SIGINT, err
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "reports").glob("*.json")]
    assert report["termination"]["watchdog_received"] == ["SIGINT"]
    headline = report["diagnosis"]["headline"]
    assert "process group" in headline and "another process" not in headline, headline


def test_a_fifo_as_the_connection_file_does_not_stop_the_watchdog(tmp_path):
    """A FIFO where the connection file should be: open(2) would wait for a writer forever on
    the watchdog's loop, and the kernel's end would never be seen. It is refused at once as
    not a regular file; the kernel's end is mirrored as usual."""
    fifo = tmp_path / "kernel-fifo.json"
    os.mkfifo(fifo)
    env = dict(os.environ, KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "reports"))
    started = time.monotonic()
    proc = subprocess.run([KWD_BINARY, "--log-level", "info", "run", "--", PYTHON, "-c",
                           "import sys, time; time.sleep(1); sys.exit(3)", "-f", str(fifo)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started < 30
    assert "not a regular file" in proc.stderr, proc.stderr


# Planted where a real session has them: the environment of the kernel (cloud and model-hub
# credentials, a password, a Jupyter server's token) and the connection file's key.
PLANTED = {
    "AWS_SECRET_ACCESS_KEY": "kwdPlantedAwsSecret7f3a9c",
    "HF_TOKEN": "hf_kwdPlantedToken51b2",
    "DB_PASSWORD": "kwdPlantedPassword0a81",
    "GITHUB_TOKEN": "ghp_kwdPlantedToken9c44",
    "JPY_API_TOKEN": "kwdPlantedServerToken77d1",
    "JUPYTERHUB_API_TOKEN": "kwdPlantedHubToken3e09",
}


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_secret_reaches_any_output(start_kernel, jupyter_env, tmp_path, log_format):
    """A kernel with secrets in its environment and a keyed connection file crashes under
    the watchdog at its most talkative (debug log, as text and as JSON lines). Neither the key
    nor any planted secret is in its stderr, the report, or anything `reports` prints (list,
    show, show --json, html, diagnose). (The daemon's log, status and metrics: test_daemon.)"""
    jupyter_env["env"].pop("PYTEST_CURRENT_TEST", None)
    log = tmp_path / "watchdog-stderr.log"
    with open(log, "w") as err:
        k = start_kernel(env_overrides={**PLANTED, "KERNEL_WATCHDOG_LOG_LEVEL": "debug",
                                        "KERNEL_WATCHDOG_LOG_FORMAT": log_format},
                         stderr=err)
        key = json.loads(pathlib.Path(k.km.connection_file).read_text())["key"]
        assert len(key) >= 16
        k.execute("import os, sys; print('a line on stderr', file=sys.stderr)")
        k.execute_until_death("import ctypes; ctypes.string_at(0)")
    env = dict(jupyter_env["env"])

    def cli(*args):
        proc = subprocess.run([KWD_BINARY, "reports", *args], env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout + proc.stderr

    reports = sorted(jupyter_env["report_dir"].glob("*.json"))
    assert reports, log.read_text()[-2000:]
    outputs = {
        "watchdog stderr": log.read_text(),
        "reports list": cli("list"),
        "reports show": cli("show", "latest"),
        "reports show --json": cli("show", "--json", "latest"),
        "reports html": cli("html", "latest"),
        "reports diagnose": cli("diagnose", str(reports[-1])),
    }
    for path in reports:
        outputs[path.name] = path.read_text()
    assert "kernel" in outputs["watchdog stderr"] and "SIGSEGV" in outputs["reports show"]
    if log_format == "json":
        records = [json.loads(line) for line in outputs["watchdog stderr"].splitlines()
                   if line.startswith("{")]
        assert any("report" in r for r in records), outputs["watchdog stderr"][-2000:]
    for secret in [key, *PLANTED.values()]:
        found = [name for name, text in outputs.items() if secret in text]
        assert found == [], f"a secret reached {found}"


@pytest.fixture
def small_filesystem(tmp_path):
    """A 256 KiB tmpfs of its own: a store that can be filled or made read-only for real."""
    mnt = tmp_path / "small-fs"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "kwd-small-fs",
                              str(mnt)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt):
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@needs_root
@pytest.mark.parametrize("deleted", ["the store", "the store and its parents"])
def test_a_store_deleted_while_the_kernel_runs_is_made_again_for_its_report(tmp_path, deleted):
    """Someone cleans up (rm -rf ~/.local/state) while a kernel runs: the report of its death
    is written all the same, in the store made again, private, with nothing said about it."""
    home = tmp_path / "home"
    store = home / ".local" / "state" / "kernel-watchdog" / "reports"
    go = tmp_path / "go"
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME", "PYTHONPATH",
                        "KERNEL_WATCHDOG_REPORT_DIR")}
    env.update(HOME=str(home), TMPDIR=str(tmp_path))
    kernel = ("import os, time\n"
              "print('ready', flush=True)\n"
              f"while not os.path.exists({str(go)!r}):\n"
              "    time.sleep(0.05)\n"
              "os.abort()\n")
    proc = subprocess.Popen([KWD_BINARY, "run", "--", PYTHON, "-c", kernel], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        assert store.is_dir()  # made when `run` started
        shutil.rmtree(store if deleted == "the store" else home / ".local")
        go.touch()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGABRT, err
    (report,) = [json.loads(p.read_text()) for p in store.glob("*.json")]
    assert report["termination"]["signal_name"] == "SIGABRT"
    assert "stored_instead_of" not in report
    assert not any("fallback" in n for n in report["notes"]), report["notes"]
    for directory in (store, store.parent):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    assert f"crash report: {store}/{report['id']}.json" in err, err


@pytest.mark.parametrize("trouble", ["full", "read-only", "full, fallback too"])
def test_a_full_or_read_only_store_costs_one_line_and_the_report_still_reaches_the_user(
        small_filesystem, tmp_path, trouble):
    """A store on a full or read-only filesystem: the kernel runs to its end as if nothing was
    wrong, stderr has one line naming the store and the system's reason, and the report is
    in the fallback location; with nowhere to write at all, its summary is on stderr."""
    store = small_filesystem / "reports"
    store.mkdir(mode=0o700)
    tmpdir = small_filesystem / "tmp" if trouble == "full, fallback too" else tmp_path / "tmp"
    tmpdir.mkdir()
    if trouble == "read-only":
        subprocess.run(["mount", "-o", "remount,ro", str(small_filesystem)], check=True)
    else:
        fill(small_filesystem)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "PYTHONPATH")}
    env.update(TMPDIR=str(tmpdir), KERNEL_WATCHDOG_REPORT_DIR=str(store))
    proc = subprocess.run(
        [KWD_BINARY, "run", "--", PYTHON, "-c",
         "import os; print('the kernel ran', flush=True); os.abort()"],
        env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGABRT, proc.stderr  # the end mirrored
    assert proc.stdout == "the kernel ran\n"
    reason = "Read-only file system" if trouble == "read-only" else "No space left on device"
    log = proc.stderr.split("its summary follows", 1)[0]  # the summary may quote it again
    about_store = [line for line in log.splitlines() if str(store) in line]
    assert len(about_store) == 1, proc.stderr
    assert reason in about_store[0], proc.stderr
    assert list(store.iterdir()) == []
    fallback = tmpdir / f"kernel-watchdog-{os.geteuid()}" / "reports"
    if trouble == "full, fallback too":
        assert "no crash report could be written" in proc.stderr, proc.stderr
        # The summary `reports show` would have printed, here instead.
        assert "SIGABRT" in proc.stderr.split("its summary follows", 1)[1], proc.stderr
        assert not fallback.exists() or list(fallback.glob("*.json")) == []
    else:
        (report,) = [json.loads(p.read_text()) for p in fallback.glob("*.json")]
        assert report["termination"]["signal_name"] == "SIGABRT"
        assert any(reason in n for n in report["notes"]), report["notes"]
        assert report["stored_instead_of"] == str(store)
        assert str(fallback) in proc.stderr
        # `reports list` of the store finds it where it waits, and says so.
        listed = subprocess.run([KWD_BINARY, "reports", "list"], env=env, capture_output=True,
                                text=True, timeout=30)
        assert f"{fallback}/{report['id']}.json" in listed.stdout, listed.stdout
        assert f"1 report waits in the fallback location {fallback}" in listed.stdout
        # The store takes writes again: the next report written there brings it in.
        if trouble == "read-only":
            subprocess.run(["mount", "-o", "remount,rw", str(small_filesystem)], check=True)
        else:
            (small_filesystem / "filler").unlink()
        again = subprocess.run([KWD_BINARY, "run", "--", PYTHON, "-c", "import os; os.abort()"],
                               env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == -signal.SIGABRT, again.stderr
        assert list(fallback.glob("*.json")) == [], again.stderr
        stored = sorted(p.name for p in store.glob("*.json"))
        assert len(stored) == 2 and f"{report['id']}.json" in stored, (stored, again.stderr)
        assert "1 report that waited in the fallback location moved into" in again.stderr
