"""A private Jupyter world for a benchmark: its own kernelspec path, runtime directory and
report store, with python3 wrapped by the watchdog under test as "python3-watched"."""
import os
import pathlib
import subprocess
import tempfile


def wrapped_python3(watchdog, prefix_name, run_options=()):
    """Sets the environment up and returns (work dir, report dir)."""
    work = pathlib.Path(tempfile.mkdtemp(prefix=prefix_name))
    prefix, reports = work / "prefix", work / "reports"
    # As in a default install, kernels may cache bytecode (the watchdog's shim included); a
    # PYTHONDONTWRITEBYTECODE=1 inherited from the shell running the bench would make every
    # watched start compile the shim again (+2.7 ms here) and measure a setting users rarely have.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.update(JUPYTER_PATH=str(prefix / "share" / "jupyter"),
                      JUPYTER_RUNTIME_DIR=str(work / "runtime"),
                      KERNEL_WATCHDOG_REPORT_DIR=str(reports),
                      PYDEVD_DISABLE_FILE_VALIDATION="1")
    subprocess.run([watchdog, "kernelspec", "wrap", "python3", "--prefix", str(prefix),
                    "--name", "python3-watched", *(f"--run-option={o}" for o in run_options)],
                   check=True, capture_output=True)
    return work, reports
