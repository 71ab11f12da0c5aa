"""pytest plugin (entry point pytest11): with nbmake or nbval, a notebook whose kernel dies
fails with the crash report's cause, cell, peak memory and path, as text, JUnit properties
and (under GitHub Actions) an annotation. Off unless `--kernel-watchdog` or the ini option
`kernel_watchdog = true`; then every kernel jupyter_client starts in the session is started
by the kernel-watchdog provisioner.

Under pytest-xdist the workers also share a memory budget: a notebook's kernel starts when
its recorded peak fits beside the others' (_pytest_budget.py).

This file holds the options and turns the plugin on; _pytest_deaths.py and _pytest_budget.py
do the work."""
import os


def pytest_addoption(parser):
    group = parser.getgroup("kernel-watchdog", "crash reports for notebook kernels")
    group.addoption("--kernel-watchdog", action="store_true", default=None,
                    help="watch every kernel the tests start (kernel-watchdog provisioner) and "
                         "fail a test whose kernel died with the cause and report")
    group.addoption("--kernel-watchdog-report-dir", metavar="DIR", default=None,
                    help="where the crash reports go, one folder per test file "
                         "(default: $KERNEL_WATCHDOG_REPORT_DIR, else a folder in pytest's "
                         "temporary directory, which pytest deletes after three sessions)")
    group.addoption("--kernel-watchdog-run-options", metavar="OPTIONS", default=None,
                    help="options for `kernel-watchdog run`, e.g. \"--memory-limit=4G\"")
    group.addoption("--kernel-watchdog-history", metavar="FILE", default=None,
                    help="under pytest-xdist, each notebook's peak memory from this history "
                         "file of `kernel-watchdog smoke --durations FILE --store-durations` "
                         "(read only): the workers start a notebook when its peak fits in the "
                         "memory they share. Without it, notebooks of unknown memory start one "
                         "at a time")
    parser.addini("kernel_watchdog", type="bool", default=False,
                  help="turn the kernel-watchdog plugin on (as --kernel-watchdog)")
    parser.addini("kernel_watchdog_report_dir", default="",
                  help="as --kernel-watchdog-report-dir")
    parser.addini("kernel_watchdog_run_options", default="",
                  help="as --kernel-watchdog-run-options")
    parser.addini("kernel_watchdog_history", default="",
                  help="as --kernel-watchdog-history")


def pytest_configure(config):
    on = config.getoption("kernel_watchdog")
    if on is None:
        on = config.getini("kernel_watchdog")
    if not on:
        return
    from kernel_watchdog._pytest_budget import register as share_a_memory_budget
    from kernel_watchdog._pytest_deaths import KernelDeaths

    # The environment's store before pytest's temporary directory, which pytest deletes
    # after three sessions: a user who set it wants the reports kept there.
    report_dir = (config.getoption("kernel_watchdog_report_dir")
                  or config.getini("kernel_watchdog_report_dir")
                  or os.environ.get("KERNEL_WATCHDOG_REPORT_DIR") or None)
    run_options = (config.getoption("kernel_watchdog_run_options")
                   or config.getini("kernel_watchdog_run_options") or None)
    config.pluginmanager.register(
        KernelDeaths(config, report_dir=report_dir, run_options=run_options,
                     annotate=os.environ.get("GITHUB_ACTIONS") == "true"),
        "kernel-watchdog-deaths")
    # Under pytest-xdist: the workers' notebooks start when they fit in a shared budget.
    share_a_memory_budget(config)
