"""A jupyter_client kernel provisioner that starts every kernel under `kernel-watchdog run`.

It is jupyter_client's LocalProvisioner with one change, the command that starts the kernel.
Interrupts, restarts, shutdown and kill are LocalProvisioner's own: they signal the process
group, which the watchdog shares with its kernel, and the watchdog ends as its kernel ended.
When the kernel dies, the provisioner's log gets one line with the report's headline and path.

Turned on with JUPYTER_DEFAULT_PROVISIONER_NAME=kernel-watchdog-provisioner, or per kernelspec:
    "metadata": {"kernel_provisioner": {"provisioner_name": "kernel-watchdog-provisioner",
                                        "config": {"run_options": ["--memory-limit=8G"]}}}
"""
import logging
import os
import shlex
import signal
import sys

from jupyter_client.provisioning import LocalProvisioner
from traitlets import List, Unicode, default

from kernel_watchdog._launch import watched_command
from kernel_watchdog._names import RUN_OPTIONS_ENV
from kernel_watchdog._reports import read_death, report_files, report_store, watchdog_pid


class WatchdogProvisioner(LocalProvisioner):
    run_options = List(Unicode(), config=True, help=(
        "Options for `kernel-watchdog run` (e.g. --memory-limit=8G). Default: "
        f"${RUN_OPTIONS_ENV}, split as a shell would."))

    @default("run_options")
    def _run_options_from_env(self):
        return shlex.split(os.environ.get(RUN_OPTIONS_ENV, ""))

    _store = None  # the report store of the running kernel, None when it is not watched
    _reports_before = frozenset()
    _death_seen = False
    _manager_told = False  # SIGUSR2 sent: the manager is ending this kernel

    async def launch_kernel(self, cmd, **kwargs):
        command, unwatched_because = watched_command(cmd, self.run_options)
        if unwatched_because:
            self._say(f"kernel-watchdog: starting the kernel unwatched: {unwatched_because}")
            self._store = None
        else:
            self._store = report_store(kwargs.get("env") or os.environ)
            self._reports_before = frozenset(report_files(self._store))
        self._death_seen = False
        self._manager_told = False
        return await super().launch_kernel(command, **kwargs)

    async def send_signal(self, signum):
        self._tell_watchdog_if_ending()
        return await super().send_signal(signum)

    async def kill(self, restart=False):
        self._tell_watchdog_if_ending()
        return await super().kill(restart=restart)

    async def terminate(self, restart=False):
        self._tell_watchdog_if_ending()
        return await super().terminate(restart=restart)

    def _tell_watchdog_if_ending(self):
        """jupyter_client's shutdown (and restart) interrupts the kernel before it asks it to
        shut down: a kernel still starting dies of that SIGINT, which the watchdog would
        report. SIGUSR2 to the watchdog alone, before any signal of the shutdown, tells it
        that the end to come is the manager's (see `kernel-watchdog run --help`)."""
        if (self._store is None or self._manager_told or self.process is None
                or not getattr(self.parent, "shutting_down", False)):
            return
        self._manager_told = True
        # Popen's own check: a process already reaped may have a reused pid.
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR2)

    async def poll(self):
        status = await super().poll()
        if status is not None and self.process is not None and not self._death_seen:
            self._death_seen = True
            if status != 0 and self._store is not None and not self._manager_told:
                self._log_death()
        return status

    def _log_death(self):
        """The one line for the runner's log, when the watchdog wrote a report: it writes none
        for an end that was asked for (shutdown, SIGTERM, SIGKILL to the group)."""
        # The report is on disk before the watchdog mirrors the kernel's end.
        for path in reversed(report_files(self._store)):
            if path in self._reports_before or watchdog_pid(path) != self.pid:
                continue
            death = read_death(path)
            if death:
                self._say(death.log_line())
            return

    def _say(self, line):
        """A warning in the manager's log, or on stderr where that log goes nowhere (a bare
        script's: older traitlets give their logger only a NullHandler)."""
        self.log.warning("%s", line)
        if not _reaches_a_handler(self.log):
            print(line, file=sys.stderr, flush=True)


def _reaches_a_handler(logger):
    """Whether a WARNING record of this logger is written somewhere (logging's last resort,
    used when no handler exists at all, counts)."""
    if isinstance(logger, logging.LoggerAdapter):
        logger = logger.logger
    if not logger.isEnabledFor(logging.WARNING):
        return False
    found_any = False
    while logger:
        for handler in logger.handlers:
            found_any = True
            if not isinstance(handler, logging.NullHandler) and handler.level <= logging.WARNING:
                return True
        if not logger.propagate:
            break
        logger = logger.parent
    return not found_any and logging.lastResort is not None
