"""What the pytest plugin does once on: start kernels under the watchdog, give each test
file a report folder of its own, and tell a failed test about the kernel deaths in it."""
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
from _pytest._code.code import ReprFileLocation, TerminalRepr

from kernel_watchdog._reports import format_bytes, read_death, report_files
from kernel_watchdog._names import PROVISIONER, RUN_OPTIONS_ENV
from kernel_watchdog._nbval import fail_fast_on_death

PROVISIONER_ENV = "JUPYTER_DEFAULT_PROVISIONER_NAME"
REPORT_DIR_ENV = "KERNEL_WATCHDOG_REPORT_DIR"
PROPERTY = "kernel_watchdog_"
MAX_ANNOTATIONS = 10  # GitHub shows ten error annotations a step


class KernelDeaths:
    def __init__(self, config, report_dir, run_options, annotate):
        self.config = config
        self.report_dir = Path(report_dir).resolve() if report_dir else None
        self.annotate = annotate
        self.annotations = []
        self._saved_env = {name: os.environ.get(name)
                           for name in (PROVISIONER_ENV, REPORT_DIR_ENV, RUN_OPTIONS_ENV)}
        if os.environ.get(PROVISIONER_ENV, PROVISIONER) not in (PROVISIONER, "local-provisioner"):
            # Someone's own provisioner: theirs starts the kernels, unwatched.
            self.config.issue_config_time_warning(pytest.PytestConfigWarning(
                f"kernel-watchdog: {PROVISIONER_ENV} names {os.environ[PROVISIONER_ENV]}; "
                "kernels are started by it, unwatched"), stacklevel=2)
        else:
            self._make_default_provisioner()
        if run_options is not None:
            os.environ[RUN_OPTIONS_ENV] = run_options
        fail_fast_on_death()

    @staticmethod
    def _make_default_provisioner():
        """Environment for kernels started in this process and its children. jupyter_client
        reads it once, when its provisioner factory (a singleton) is first made: one made
        already (a conftest started a kernel) is told directly."""
        os.environ[PROVISIONER_ENV] = PROVISIONER
        factory = sys.modules.get("jupyter_client.provisioning.factory")
        if factory and factory.KernelProvisionerFactory.initialized():
            factory.KernelProvisionerFactory.instance().default_provisioner_name = PROVISIONER

    def pytest_unconfigure(self, config):
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _folder_for(self, item):
        """One report folder per test file (a notebook): nbval's cells share one kernel,
        started when the file's first cell is set up. Under xdist each worker has its own
        base folder."""
        if self.report_dir is None:
            factory = getattr(self.config, "_tmp_path_factory", None)
            base = factory.getbasetemp() if factory else Path(tempfile.mkdtemp(prefix="kwd-"))
            self.report_dir = base / "kernel-watchdog-reports"
        try:
            name = str(item.path.relative_to(self.config.rootpath))
        except ValueError:
            name = str(item.path)
        return self.report_dir / re.sub(r"[^A-Za-z0-9._-]+", "_", name)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item):
        folder = self._folder_for(item)
        os.environ[REPORT_DIR_ENV] = str(folder)
        item.stash[_BEFORE] = (folder, frozenset(report_files(folder)))
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if not report.failed or _BEFORE not in item.stash:
            return
        folder, before = item.stash[_BEFORE]
        deaths = [d for d in map(read_death, report_files(folder))
                  if d and d.path not in before and d.path not in item.stash.get(_TOLD, ())]
        if not deaths:
            return
        # A death is told once, at the first failed phase that sees it.
        item.stash[_TOLD] = {*item.stash.get(_TOLD, ()), *(d.path for d in deaths)}
        properties = [(PROPERTY + key, value) for d in deaths for key, value in (
            ("cause", d.cause), ("headline", d.headline), ("cell", d.cell or ""),
            ("peak_memory_bytes", d.peak_rss or ""), ("report", str(d.path)))]
        item.user_properties.extend(properties)
        report.user_properties = [*report.user_properties, *properties]
        report.longrepr = _WithDeaths(report.longrepr, deaths,
                                      show_original=self.config.getoption("verbose", 0) > 0)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        # Here, not in makereport: under xdist this runs in the controller, whose output
        # is the step's log, and whose JUnit file and summary come after this.
        if not report.failed:
            return
        props = [(k, v) for k, v in report.user_properties if str(k).startswith(PROPERTY)]
        headlines = [v for k, v in props if k == PROPERTY + "headline"]
        if headlines and isinstance(report.longrepr, str):
            # From an xdist worker the failure arrives as its text: its summary is put back.
            report.longrepr = _Text(report.longrepr, f"kernel died: {headlines[0]}")
        if not self.annotate:
            return
        for headline, path in zip(headlines, (v for k, v in props if k == PROPERTY + "report")):
            self.annotations.append((report.location[0], headline, path))

    def pytest_terminal_summary(self, terminalreporter):
        for file, headline, path in self.annotations[:MAX_ANNOTATIONS]:
            terminalreporter.write_line(
                f"::error file={_escape_property(file)},title=kernel died::"
                f"{_escape_data(f'{headline} (report: {path})')}")


_BEFORE = pytest.StashKey[tuple]()
_TOLD = pytest.StashKey[set]()


class _WithDeaths(TerminalRepr):
    """The deaths that explain a failure; its one-line summary is the first death's headline
    (in place of "Kernel died" or a cell timeout). The runner's own text for it (nbmake's
    "NBMAKE INTERNAL ERROR" and a traceback through pytest's internals, nbval's) says only
    that the kernel died, so it follows under -v alone."""

    def __init__(self, original, deaths, show_original):
        self.original = original
        self.deaths = deaths
        self.show_original = show_original
        crash = getattr(original, "reprcrash", None)
        self.reprcrash = ReprFileLocation(getattr(crash, "path", ""), getattr(crash, "lineno", 0),
                                          f"kernel died: {deaths[0].headline}")

    def toterminal(self, tw):
        for d in self.deaths:
            tw.line(f"kernel-watchdog: the kernel died: {d.headline}", red=True, bold=True)
            tw.line(f"  cause:       {d.cause}")
            tw.line(f"  cell:        {d.cell or '(none running)'}")
            if d.peak_rss:
                tw.line(f"  peak memory: {format_bytes(d.peak_rss)}")
            tw.line(f"  report:      {d.path}")
            tw.line(f"  see why:     kernel-watchdog reports show {d.path}")
        if self.original is None:
            return
        if not self.show_original:
            tw.line("  (the test runner's own text for this failure: run pytest with -v)")
            return
        tw.line("")
        if hasattr(self.original, "toterminal"):
            self.original.toterminal(tw)
        elif self.original is not None:
            tw.line(str(self.original))


class _Text(TerminalRepr):
    """A failure's text with the one-line summary it had before it was sent as text."""

    def __init__(self, text, summary):
        self.text = text
        self.reprcrash = ReprFileLocation("", 0, summary)

    def toterminal(self, tw):
        for line in self.text.splitlines():
            tw.line(line)


def _escape_data(text):
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text):
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
