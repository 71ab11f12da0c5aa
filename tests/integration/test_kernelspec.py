"""kernelspec wrap / unwrap / list against a real Jupyter data path layout."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from conftest import KWD_BINARY, kwd


@pytest.fixture
def jpath(tmp_path, monkeypatch):
    prefix = tmp_path / "env"
    src = prefix / "share" / "jupyter" / "kernels" / "bare"
    src.mkdir(parents=True)
    (src / "kernel.json").write_text(json.dumps({
        "argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Bare Python", "language": "python",
        "env": {"SOME_SETTING": "1"}, "interrupt_mode": "signal"}))
    (src / "logo-64x64.png").write_bytes(b"\x89PNG fake logo")
    # An interpreter beside the kernelspec's prefix is the one a bare "python3" means.
    (prefix / "bin").mkdir()
    fake_python = prefix / "bin" / "python3"
    fake_python.symlink_to("/usr/bin/python3")
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user-data"))
    return {"prefix": prefix, "src": src, "python": fake_python, "tmp": tmp_path}


def test_wrap_takes_the_python_on_path_that_has_the_kernel_module(tmp_path, monkeypatch):
    """A bare "python3" with none beside the kernelspec's prefix: the first python3 on PATH
    cannot import ipykernel (a Python without its site-packages, as an unrelated tool's
    interpreter early on PATH), the next can; the wrap takes the one that can."""
    prefix = tmp_path / "env"
    src = prefix / "share" / "jupyter" / "kernels" / "bare"
    src.mkdir(parents=True)
    (src / "kernel.json").write_text(json.dumps({
        "argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Bare Python", "language": "python"}))
    early = tmp_path / "early-bin"
    early.mkdir()
    without = early / "python3"
    without.write_text("#!/bin/sh\nexec /usr/bin/python3 -I -S \"$@\"\n")
    without.chmod(0o755)
    assert subprocess.run([str(without), "-c", "import ipykernel"],
                          capture_output=True).returncode != 0
    monkeypatch.setenv("PATH", f"{early}:/usr/bin:/bin")
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user-data"))
    kwd("kernelspec", "wrap", "bare")
    spec = json.loads((tmp_path / "user-data" / "kernels" / "bare-watchdog" /
                       "kernel.json").read_text())
    assert spec["argv"][3] == "/usr/bin/python3", spec["argv"]


def test_wrap_user_resolves_bare_python_and_keeps_the_rest(jpath):
    out = kwd("kernelspec", "wrap", "bare").stdout
    target = jpath["tmp"] / "user-data" / "kernels" / "bare-watchdog"
    assert str(target) in out
    spec = json.loads((target / "kernel.json").read_text())
    assert spec["argv"][:3] == [KWD_BINARY, "run", "--"]
    assert spec["argv"][3] == str(jpath["python"])
    assert spec["argv"][4:] == ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["display_name"] == "Bare Python (watchdog)"
    assert spec["env"] == {"SOME_SETTING": "1"} and spec["interrupt_mode"] == "signal"
    assert (target / "logo-64x64.png").read_bytes() == b"\x89PNG fake logo"
    # jupyter_client itself sees it.
    specs = KernelSpecManager().find_kernel_specs()
    assert "bare-watchdog" in specs and "bare" in specs


def test_wrap_options_list_and_unwrap(jpath):
    kwd("kernelspec", "wrap", "bare", "--name", "watched", "--display-name", "Watched!",
        "--prefix", jpath["tmp"] / "p2", "--run-option=--report-dir=/x/y")
    os.environ["JUPYTER_PATH"] += os.pathsep + str(jpath["tmp"] / "p2" / "share" / "jupyter")
    spec = json.loads((jpath["tmp"] / "p2/share/jupyter/kernels/watched/kernel.json").read_text())
    assert spec["display_name"] == "Watched!"
    assert spec["argv"][1:4] == ["run", "--report-dir=/x/y", "--"]
    listing = kwd("kernelspec", "list").stdout
    lines = {l.split()[0]: l for l in listing.splitlines() if l.strip()}
    assert "watched" in lines["watched"].split()[1]
    assert lines["bare"].split()[1] == "-"
    # Wrapping a wrapped spec, and unwrapping a spec we did not make, are refused.
    again = kwd("kernelspec", "wrap", "watched", check=False)
    assert again.returncode == 1 and "already wrapped" in again.stderr
    refuse = kwd("kernelspec", "unwrap", "bare", check=False)
    assert refuse.returncode == 1 and "not removing" in refuse.stderr
    assert (jpath["src"] / "kernel.json").exists()
    kwd("kernelspec", "unwrap", "watched")
    assert not (jpath["tmp"] / "p2/share/jupyter/kernels/watched").exists()


def test_wrap_unknown_kernelspec_says_so(jpath):
    proc = kwd("kernelspec", "wrap", "no-such-kernel", check=False)
    assert proc.returncode == 1
    assert "no kernelspec named 'no-such-kernel'" in proc.stderr
    bad = kwd("kernelspec", "wrap", "bare", "--name", "../escape", check=False)
    assert bad.returncode == 1 and "not a valid kernelspec name" in bad.stderr


def test_wrap_again_says_what_differs_and_force_repairs_a_broken_wrap(jpath):
    """A wrap whose program moved is marked broken by `list`, with the command that fixes it;
    wrapping again with other settings is refused with the differences until --force."""
    moved = jpath["tmp"] / "old-install" / "kernel-watchdog"
    moved.parent.mkdir()
    shutil.copy2(KWD_BINARY, moved)
    made = subprocess.run([str(moved), "kernelspec", "wrap", "bare", "--name", "w",
                           "--run-option=--memory-limit=8G"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    moved.unlink()  # uninstalled, or moved to another prefix

    listing = kwd("kernelspec", "list").stdout
    row = next(l for l in listing.splitlines() if l.startswith("w "))
    assert row.split()[1] == "broken"
    assert f"kernel-watchdog is no longer at {moved}" in listing
    fix = "kernel-watchdog kernelspec wrap bare --name w --run-option=--memory-limit=8G --force"
    assert f"fix: {fix}" in listing
    assert "wraps bare, run options: --memory-limit=8G" in listing

    refused = kwd("kernelspec", "wrap", "bare", "--name", "w", check=False)
    assert refused.returncode == 1
    assert f"kernel-watchdog: {moved} -> {KWD_BINARY}" in refused.stderr
    assert "run options: --memory-limit=8G -> (none)" in refused.stderr
    assert "--force" in refused.stderr

    repaired = kwd(*fix.split()[1:]).stdout
    assert repaired.startswith("Replaced the wrap of 'bare'")
    row = next(l for l in kwd("kernelspec", "list").stdout.splitlines() if l.startswith("w "))
    assert row.split()[1] == "watched"
    same = kwd(*fix.split()[1:-1]).stdout
    assert "unchanged" in same


def test_the_fix_for_a_broken_wrap_keeps_its_place_and_quotes_its_options(jpath):
    """A broken wrap in a --prefix, with a run option holding a space and a quote: the fix
    `list` prints, pasted into a shell, wraps it again in that prefix with that option."""
    moved = jpath["tmp"] / "old-install" / "kernel-watchdog"
    moved.parent.mkdir()
    shutil.copy2(KWD_BINARY, moved)
    prefix = jpath["tmp"] / "my env"
    option = "--report-dir=/tmp/Bob's reports"
    made = subprocess.run([str(moved), "kernelspec", "wrap", "bare", "--name", "w2",
                           "--prefix", str(prefix), f"--run-option={option}"],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    moved.unlink()
    os.environ["JUPYTER_PATH"] += os.pathsep + str(prefix / "share" / "jupyter")

    listing = kwd("kernelspec", "list").stdout
    fix = next(l for l in listing.splitlines() if "fix:" in l and " w2 " in l).split("fix: ", 1)[1]
    repaired = subprocess.run(["bash", "-c", fix.replace("kernel-watchdog", KWD_BINARY, 1)],
                              capture_output=True, text=True)
    assert repaired.returncode == 0, fix + "\n" + repaired.stderr
    spec = json.loads((prefix / "share/jupyter/kernels/w2/kernel.json").read_text())
    assert spec["argv"][:4] == [KWD_BINARY, "run", option, "--"]
    assert not (jpath["tmp"] / "user-data" / "kernels" / "w2").exists()


def test_wrap_again_after_the_source_changed_is_not_unchanged(jpath):
    kwd("kernelspec", "wrap", "bare", "--name", "w3")
    spec = json.loads((jpath["src"] / "kernel.json").read_text())
    spec["env"] = {"SOME_SETTING": "2"}
    (jpath["src"] / "kernel.json").write_text(json.dumps(spec))
    again = kwd("kernelspec", "wrap", "bare", "--name", "w3", check=False)
    assert again.returncode == 1, again.stdout
    assert 'kernel.json env: {"SOME_SETTING":"1"} -> {"SOME_SETTING":"2"}' in again.stderr
    kwd("kernelspec", "wrap", "bare", "--name", "w3", "--force")
    wrapped = json.loads((jpath["tmp"] / "user-data/kernels/w3/kernel.json").read_text())
    assert wrapped["env"] == {"SOME_SETTING": "2"}
    assert "unchanged" in kwd("kernelspec", "wrap", "bare", "--name", "w3").stdout


def test_the_fix_for_a_broken_wrap_elsewhere_on_the_path_replaces_it_in_the_user_dir(jpath):
    """A wrap that lives in a JUPYTER_PATH dir wrap cannot write to (not a prefix's
    share/jupyter), with a display name of the user's: the printed fix removes it there and
    wraps again in the user's data dir, keeping the name shown in Jupyter."""
    moved = jpath["tmp"] / "old-install" / "kernel-watchdog"
    moved.parent.mkdir()
    shutil.copy2(KWD_BINARY, moved)
    made = subprocess.run([str(moved), "kernelspec", "wrap", "bare", "--name", "w4",
                           "--display-name", "Team's GPU kernel"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    moved.unlink()
    elsewhere = jpath["tmp"] / "site" / "kernels"
    elsewhere.mkdir(parents=True)
    shutil.move(str(jpath["tmp"] / "user-data" / "kernels" / "w4"), str(elsewhere / "w4"))
    os.environ["JUPYTER_PATH"] = str(jpath["tmp"] / "site") + os.pathsep + os.environ["JUPYTER_PATH"]

    listing = kwd("kernelspec", "list").stdout
    fix = next(l for l in listing.splitlines() if "fix:" in l and " w4 " in l).split("fix: ", 1)[1]
    assert fix.startswith("kernel-watchdog kernelspec unwrap w4 && ")
    repaired = subprocess.run(["bash", "-c", fix.replace("kernel-watchdog", KWD_BINARY)],
                              capture_output=True, text=True)
    assert repaired.returncode == 0, fix + "\n" + repaired.stderr
    assert not (elsewhere / "w4").exists()
    spec = json.loads((jpath["tmp"] / "user-data/kernels/w4/kernel.json").read_text())
    assert spec["display_name"] == "Team's GPU kernel" and spec["argv"][0] == KWD_BINARY
    row = next(l for l in kwd("kernelspec", "list").stdout.splitlines() if l.startswith("w4 "))
    assert row.split()[1] == "watched"
