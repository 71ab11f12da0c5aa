"""kernel-watchdog: Python tracebacks for kernels that die in native code.

The watchdog puts a private directory holding this file first on PYTHONPATH, so the
interpreter imports it as `sitecustomize` while it starts. It does two things and then
steps aside:

1. Enables faulthandler on a *duplicate* of file descriptor 2 taken now. ipykernel later
   dup2()s a pipe of its own over fd 2 and drains it from a thread; when the process dies
   of SIGSEGV/SIGABRT that thread dies too, and whatever faulthandler wrote to fd 2 is lost.
   The duplicate still points at the watchdog's stderr pipe, which outlives the kernel.
2. Imports the sitecustomize that would have been imported without us (Debian ships one),
   and removes every trace of itself from sys.path and PYTHONPATH, so the notebook sees
   the same interpreter it would have seen.

Nothing here may raise: a failure only means no traceback.
"""


def _kernel_watchdog_start():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))

    try:
        import faulthandler

        # os.dup() returns a non-inheritable descriptor (PEP 446): child processes of the
        # kernel do not get it.
        faulthandler.enable(file=os.dup(2), all_threads=True)
    except Exception:
        pass

    def is_here(entry):
        try:
            return os.path.abspath(entry or os.curdir) == here
        except Exception:
            return False

    sys.path[:] = [p for p in sys.path if not is_here(p)]
    try:
        if os.environ.pop("KERNEL_WATCHDOG_FAULTHANDLER_ADDED", None) == "1":
            # Set by the watchdog for Python processes this shim does not reach; the
            # notebook (and what it starts) should not inherit it.
            os.environ.pop("PYTHONFAULTHANDLER", None)
        if os.environ.pop("KERNEL_WATCHDOG_PYTHONPATH_UNSET", None) == "1":
            os.environ.pop("PYTHONPATH", None)
        elif "PYTHONPATH" in os.environ:
            rest = [p for p in os.environ["PYTHONPATH"].split(os.pathsep) if not is_here(p)]
            os.environ["PYTHONPATH"] = os.pathsep.join(rest)
    except Exception:
        pass

    # Chain to the real sitecustomize; site.py treats its errors as it would have anyway.
    sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (now found further down sys.path, if anywhere)
    except ImportError as exc:
        if getattr(exc, "name", "sitecustomize") != "sitecustomize":
            raise


_kernel_watchdog_start()
del _kernel_watchdog_start
