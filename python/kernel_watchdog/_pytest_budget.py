"""Under pytest-xdist with the plugin on: the workers' notebooks start when their memory fits
in a budget they share (_shared_budget.py), instead of all at once.

The controller measures the budget, makes the ledger in a private folder and hands its path
to each worker (`workerinput`). A worker, before a notebook's first test is set up, waits until
the notebook's estimate (smoke's history file, `--kernel-watchdog-history`) fits, adds it to
the ledger, and takes it out when the notebook's last test is torn down. Any error with the
ledger: the worker warns once and runs as it would without it (fail open)."""
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from kernel_watchdog import _shared_budget as shared
from kernel_watchdog._reports import format_bytes

LEDGER_KEY = "kernel_watchdog_ledger"
HISTORY_KEY = "kernel_watchdog_history"
BASES_KEY = "kernel_watchdog_history_bases"
POLL_S = 0.25
WAITED_PROPERTY = "kernel_watchdog_waited_seconds"


def history_option(config):
    return (config.getoption("kernel_watchdog_history")
            or config.getini("kernel_watchdog_history") or None)


def register(config):
    """The controller's or a worker's part, under xdist only; nothing otherwise."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if workerinput.get(LEDGER_KEY):
            config.pluginmanager.register(
                BudgetWorker(config, workerinput[LEDGER_KEY], workerinput.get(HISTORY_KEY),
                             workerinput.get(BASES_KEY) or []),
                "kernel-watchdog-budget-worker")
        return
    if (config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") != "no"
            and config.getoption("tx", None)):
        controller = BudgetController(config)
        if controller.ledger:
            config.pluginmanager.register(controller, "kernel-watchdog-budget")


class BudgetController:
    def __init__(self, config):
        self.config = config
        self.ledger = None
        self.header = None
        self.history = history_option(config)
        workers = len(config.getoption("tx"))
        try:
            self._make_ledger(workers)
        except Exception as e:  # fail open: the workers run as without the plugin's budget
            self._warn(f"no shared memory budget for the xdist workers ({e}); "
                       "they start their notebooks at once, as without it")

    def _make_ledger(self, workers):
        room = shared.memory_room()
        if room is None:
            raise RuntimeError("cannot tell how much memory this run has (no /proc/meminfo "
                               "nor a memory cgroup)")
        own = _own_rss()
        budget, margin = shared.budget_for_kernels(room, workers, own)
        limit, in_use, source = room
        self.folder = tempfile.mkdtemp(prefix="kwd-budget-")  # 0700, a name no one can guess
        self.ledger = str(shared.make_ledger(self.folder, budget, source))
        known = ""
        if self.history:
            try:
                known = f"; estimates from {self.history} " \
                        f"({len(shared.read_history(self.history))} notebooks of known peak)"
            except ValueError as e:
                self._warn(f"the history file is not read ({e}): every notebook is of "
                           "unknown memory")
                self.history = None
        if not self.history:
            known = "; no history file (--kernel-watchdog-history): notebooks of unknown " \
                    "memory start one at a time"
        self.header = (f"kernel-watchdog: the xdist workers' notebooks share "
                       f"{format_bytes(budget)}: {format_bytes(limit)} of {source}, less "
                       f"{format_bytes(in_use)} in use, {workers} workers of "
                       f"{format_bytes(own)} each and a {format_bytes(margin)} margin{known}")

    def _warn(self, text):
        self.config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"kernel-watchdog: {text}"), stacklevel=2)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        node.workerinput[LEDGER_KEY] = self.ledger
        node.workerinput[HISTORY_KEY] = self.history and str(Path(self.history).resolve())
        bases = [str(self.config.invocation_params.dir), str(self.config.rootpath)]
        if self.history:
            bases.append(str(Path(self.history).resolve().parent))
        node.workerinput[BASES_KEY] = bases

    def pytest_report_header(self, config):
        return self.header

    def pytest_unconfigure(self, config):
        shutil.rmtree(self.folder, ignore_errors=True)


def _own_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class BudgetWorker:
    def __init__(self, config, ledger, history, bases):
        self.config = config
        self.ledger = ledger
        self.worker = config.workerinput.get("workerid", f"pid {os.getpid()}")
        self.bases = bases
        self.broken = False
        self.holding = None  # the notebook (a Path) whose entry this worker has in the ledger
        self.peaks = {}
        if history:
            try:
                self.peaks = shared.read_history(history)
            except ValueError:
                pass  # the controller said so, once

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if self.broken or item.path.suffix != ".ipynb" or self.holding == item.path:
            return
        self._release()
        try:
            waited = self._admit(item)
        except Exception as e:
            self._give_up(e)
            return
        if waited is not None:
            item.user_properties.append((WAITED_PROPERTY, round(waited, 1)))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        yield
        if self.holding is not None and (nextitem is None or nextitem.path != self.holding):
            self._release()

    def pytest_sessionfinish(self, session):
        self._release()

    def _estimate(self, notebook):
        found = shared.estimate_for(notebook, self.peaks, self.bases)
        return found if found is not None else shared.declared_peak(notebook)

    def _admit(self, item):
        waited = shared.admit(self.ledger, self.worker, self._name(item.path),
                              self._estimate(item.path), self._say, POLL_S)
        self.holding = item.path
        return waited

    def _release(self):
        if self.holding is None or self.broken:
            self.holding = None
            return
        try:
            shared.release(self.ledger)
        except Exception as e:
            self._give_up(e)
        self.holding = None

    def _name(self, notebook):
        try:
            return str(notebook.relative_to(self.config.rootpath))
        except ValueError:
            return str(notebook)

    def _give_up(self, error):
        """Fail open: one warning, and from now on this worker starts its notebooks at once."""
        self.broken = True
        self.holding = None
        warnings.warn(pytest.PytestWarning(
            f"kernel-watchdog: {self.worker} leaves the shared memory budget ({error!r}); "
            "its notebooks start at once, as without it"))

    def _say(self, line):
        """A line on the terminal under -v, at once: the worker's stderr is the controller's,
        and pytest's capture of it is lifted while the line is written."""
        if self.config.getoption("verbose", 0) <= 0:
            return
        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is None:
            print(f"kernel-watchdog: {line}", file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(f"kernel-watchdog: {line}", file=sys.stderr, flush=True)
