"""Installed like a tool: `cmake --install` into a staging root, and the .deb that CPack builds
installed with apt-get (root, as in CI), then used as a user would: --version, the man page,
shell completion, the packaged systemd unit, and a wrapped kernel's crash reported by the
installed program."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import KWD_BINARY, KWD_BUILD_DIR, PLAIN, Watched, load_reports, sanitizer_build

BUILD = pathlib.Path(KWD_BUILD_DIR)


pytestmark = pytest.mark.skipif(sanitizer_build(), reason="packaging is the release build's")


def help_of(*words):
    return subprocess.run([KWD_BINARY, *words, "--help"], capture_output=True, text=True).stdout


def subcommands_in(usage):
    """The command names a --help text lists."""
    if "Subcommands:" not in usage:
        return []
    return re.findall(r"^  (\S+)  ", usage.split("Subcommands:", 1)[1], re.M)


def completion_of(script, *words):
    """What bash completion offers for the last of `words` (the word being typed)."""
    line = " ".join(f"'{w}'" for w in words)
    proc = subprocess.run(
        ["bash", "-c", f'source "{script}"; COMP_WORDS=(kernel-watchdog {line}); '
         f'COMP_CWORD={len(words)}; _kernel_watchdog; printf "%s\\n" "${{COMPREPLY[@]}}"'],
        capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_cmake_install_puts_every_file_where_the_system_looks_for_it(tmp_path):
    root = tmp_path / "root"
    proc = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", "/usr"],
                          env=dict(os.environ, DESTDIR=str(root)), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    usr = root / "usr"
    expected = ["bin/kernel-watchdog", "lib/kernel-watchdog/kernel-watchdog-http.so",
                "lib/kernel-watchdog/kernel-watchdog-crash.so",
                "share/man/man1/kernel-watchdog.1",
                "share/bash-completion/completions/kernel-watchdog",
                "share/zsh/vendor-completions/_kernel-watchdog",
                "lib/systemd/user/kernel-watchdog.service",
                "share/kernel-watchdog/launchd/org.kernel-watchdog.daemon.plist",
                "share/doc/kernel-watchdog/README.md"]
    missing = [f for f in expected if not (usr / f).is_file()]
    assert missing == [], proc.stdout
    unit = (usr / "lib/systemd/user/kernel-watchdog.service").read_text()
    assert "\nExecStart=/usr/bin/kernel-watchdog daemon\n" in unit
    assert "@KWD_EXECUTABLE@" not in unit.split("[Unit]", 1)[1]

    # The man page names every command there is, and renders without a warning.
    page = (usr / "share/man/man1/kernel-watchdog.1").read_text()
    commands = subcommands_in(help_of())
    assert {"run", "smoke", "reports", "daemon", "completion"} <= set(commands)
    assert [c for c in commands if not re.search(rf'^\.B[IR]? "?{c}\b', page, re.M)] == []
    pending = [[c] for c in commands]
    while pending:  # every command and subcommand: each of its options is in the page
        words = pending.pop()
        usage = help_of(*words)
        pending += [words + [sub] for sub in subcommands_in(usage)]
        options = set(re.findall(r"^\s+(?:-\w,)?(--[a-z][a-z-]*)", usage, re.M)) - {"--help"}
        missing = [o for o in options if o.replace("-", "\\-") not in page]
        assert missing == [], f"the man page lacks {' '.join(words)} {missing}"
    if shutil.which("groff"):
        render = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z",
                                 str(usr / "share/man/man1/kernel-watchdog.1")],
                                capture_output=True, text=True)
        assert render.returncode == 0 and render.stderr == "", render.stderr

    # Completion, from the program's own command tree.
    bash = usr / "share/bash-completion/completions/kernel-watchdog"
    assert completion_of(bash, "rep") == ["reports"]
    assert set(completion_of(bash, "reports", "")) >= {"list", "show", "html", "open",
                                                       "diagnose", "--report-dir"}
    assert "--memory-limit" in completion_of(bash, "run", "--mem")
    assert completion_of(bash, "--log-level", "de") == ["debug"]
    assert "latest" in completion_of(bash, "reports", "show", "")
    assert "latest" in completion_of(bash, "reports", "show", "--json", "")  # a flag takes no value
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    (notebooks / "train.ipynb").write_text("{}")
    (notebooks / "notes.txt").write_text("")
    assert completion_of(bash, "smoke", f"{notebooks}/") == [f"{notebooks}/train.ipynb"]
    assert completion_of(bash, "smoke", "--allow-errors", f"{notebooks}/") == \
        [f"{notebooks}/train.ipynb"]
    if shutil.which("zsh"):
        check = subprocess.run(["zsh", "-n", str(usr / "share/zsh/vendor-completions/_kernel-watchdog")],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_every_commands_help_shows_an_example_of_that_command():
    pending = [[c] for c in subcommands_in(help_of())]
    seen = 0
    while pending:
        words = pending.pop()
        usage = help_of(*words)
        pending += [words + [sub] for sub in subcommands_in(usage)]
        seen += 1
        assert "Example" in usage, f"`{' '.join(words)} --help` shows no example"
        examples = usage.split("Example", 1)[1]
        assert f"kernel-watchdog {' '.join(words)}" in examples, \
            f"`{' '.join(words)} --help`: its example is not of `{' '.join(words)}`:\n{examples}"
    assert seen >= 15


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None,
                    reason="installs a package: needs root and apt-get")
def test_the_deb_installs_and_its_program_reports_a_wrapped_kernels_crash(tmp_path, monkeypatch):
    out = tmp_path / "package"
    proc = subprocess.run(["cpack", "-G", "DEB", "-B", str(out)], cwd=BUILD,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (deb,) = out.glob("kernel-watchdog_*.deb")
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                             text=True, check=True).stdout
    assert "libzmq5" in depends and "libspdlog" in depends, depends
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    proc = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", str(deb)],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        installed = "/usr/bin/kernel-watchdog"
        version = subprocess.run([installed, "--version"], capture_output=True, text=True)
        assert version.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\s*", version.stdout)
        assert subprocess.run(["man", "-w", "kernel-watchdog"], capture_output=True,
                              text=True).stdout.startswith("/usr/share/man/man1/kernel-watchdog.1")

        # A user's first steps: wrap the python3 kernelspec with the installed program, run a
        # notebook kernel through jupyter_client, crash it.
        prefix = tmp_path / "prefix"
        reports = tmp_path / "reports"
        monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
        monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
        monkeypatch.setenv("KERNEL_WATCHDOG_REPORT_DIR", str(reports))
        wrap = subprocess.run([installed, "kernelspec", "wrap", PLAIN, "--prefix", str(prefix),
                               "--name", "python3-installed"], capture_output=True, text=True)
        assert wrap.returncode == 0, wrap.stderr
        spec = (prefix / "share/jupyter/kernels/python3-installed/kernel.json").read_text()
        assert f'"{installed}"' in spec
        k = Watched("python3-installed", dict(os.environ))
        try:
            k.execute_until_death("import ctypes; ctypes.string_at(0)")
        finally:
            k.close()
        (report,) = load_reports(reports)
        assert report["termination"]["signal_name"] == "SIGSEGV"
        show = subprocess.run([installed, "reports", "show", "latest"], capture_output=True,
                              text=True)
        assert show.returncode == 0 and "SIGSEGV" in show.stdout, show.stderr
    finally:
        subprocess.run(["apt-get", "purge", "-y", "kernel-watchdog"], env=env,
                       capture_output=True, text=True)
    assert not os.path.exists("/usr/bin/kernel-watchdog")
