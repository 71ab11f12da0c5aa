"""kernel-watchdog: Python tracebacks for kernels that die in native code.

The watchdog puts a private directory holding this file first on PYTHONPATH, so the
interpreter imports it as `sitecustomize` while it starts. It does six things and then
steps aside (keeping stderr whole, showing the notice of the previous kernel's death,
announcing cells and dumping every thread on request are _kernel_watchdog_keep_stderr,
_kernel_watchdog_show_notice, _kernel_watchdog_announce_cells and
_kernel_watchdog_dump_on_signal below):

1. Enables faulthandler (the crashing thread's stack) on the pipe the watchdog passed in
   $KERNEL_WATCHDOG_FAULT_FD, else on a *duplicate* of file descriptor 2 taken now. Not on
   fd 2 itself: ipykernel later dup2()s a pipe of its own over fd 2 and drains it from a
   thread; when the process dies of SIGSEGV/SIGABRT that thread dies too, and whatever
   faulthandler wrote to fd 2 would be lost. Then loads the watchdog's crash handler
   ($KERNEL_WATCHDOG_CRASH_LIBRARY), which lets the watchdog read the faulting thread's
   native stack before the kernel dies (_kernel_watchdog_crash_handler).
2. Imports the sitecustomize that would have been imported without us (Debian ships one),
   and removes every trace of itself from sys.path and PYTHONPATH, so the notebook sees
   the same interpreter it would have seen.

Nothing here may raise: a failure only means no traceback.
"""


def _kernel_watchdog_fault_fd(os):
    # A pipe of the watchdog's own for faulthandler's output, kept apart from stderr: a
    # library's dying message ("terminate called after...") goes to fd 2 while faulthandler
    # writes from the signal handler, and on one pipe the two came out interleaved mid-line.
    try:
        fd = int(os.environ.pop("KERNEL_WATCHDOG_FAULT_FD", ""))
        os.set_inheritable(fd, False)  # the kernel's own children do not get it
        return fd
    except Exception:
        return None


def _kernel_watchdog_forget_at_next_import(sys, shim):
    # site.py imports usercustomize right after this module: that is still its start.
    own_steps = ("sitecustomize", "usercustomize")

    class ForgetShim:
        def invalidate_caches(self):
            pass

        def find_spec(self, name, path, target=None):
            if name in own_steps:
                return None
            try:
                sys.meta_path.remove(self)
                if sys.modules.get("sitecustomize") is shim:
                    del sys.modules["sitecustomize"]
            except Exception:
                pass
            return None

    try:
        sys.meta_path.insert(0, ForgetShim())
    except Exception:
        pass


def _kernel_watchdog_crash_handler(os):
    """Loads kernel-watchdog-crash.so, after faulthandler, so that its handler of the fatal
    signals runs first: it tells the watchdog which thread faulted and waits (2 s at most)
    while the watchdog reads that thread's native stack from outside; then faulthandler's
    handler prints the Python frames and the kernel dies of its signal, as it would have.
    ipykernel imports ctypes anyway: loading it here costs a kernel nothing."""
    fd = os.environ.pop("KERNEL_WATCHDOG_CRASH_FD", "")
    library = os.environ.pop("KERNEL_WATCHDOG_CRASH_LIBRARY", "")
    if not fd or not library:
        return
    try:
        fd = int(fd)
        os.set_inheritable(fd, False)  # the kernel's own children do not get it
        import ctypes

        install = ctypes.CDLL(library).kernel_watchdog_crash_install
        install.argtypes = [ctypes.c_int]
        if install(fd) != 0:
            os.close(fd)
    except Exception:
        pass


def _kernel_watchdog_start():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))

    try:
        import faulthandler

        # os.dup() returns a non-inheritable descriptor (PEP 446): child processes of the
        # kernel do not get it. Only the crashing thread: walking the other threads' frames
        # from a signal handler races with those threads, and a second fault inside the dump
        # replaced a SIGABRT with a SIGSEGV (seen in CI, an uncaught C++ exception).
        fault_fd = _kernel_watchdog_fault_fd(os)
        faulthandler.enable(file=os.dup(2) if fault_fd is None else fault_fd, all_threads=False)
    except Exception:
        pass
    _kernel_watchdog_crash_handler(os)

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
    shim = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (now found further down sys.path, if anywhere)
    except ImportError as exc:
        if getattr(exc, "name", "sitecustomize") != "sitecustomize":
            raise
        # None further down (pyenv, python.org, conda, uv, Homebrew builds ship none). The
        # import machinery that is importing this file reads it back from sys.modules when it
        # returns (a KeyError, printed by site.py as "Error in sitecustomize", otherwise), so it
        # goes back there until the interpreter's start is over: the first import of anything
        # else then takes it out, and the notebook finds no sitecustomize, as without us.
        if shim is not None:
            sys.modules["sitecustomize"] = shim
            _kernel_watchdog_forget_at_next_import(sys, shim)


def _kernel_watchdog_patch_on_import(module_name, patch, _pending={}):
    """Calls patch(module) once `module_name` is imported (it is not yet: this runs while
    the interpreter starts). A patch that fails leaves the module as it is. Several patches
    of one module run in the order given, from one finder (`_pending` holds them: a second
    finder would never see the import the first one answered)."""
    # Not importlib.abc: its MetaPathFinder base would import importlib.resources, pathlib,
    # tempfile and typing while the interpreter starts (15 ms); sys.meta_path only needs an
    # object with find_spec.
    import importlib.machinery
    import sys

    patches = _pending.setdefault(module_name, [])
    patches.append(patch)
    if len(patches) > 1:
        return

    class PatchOnImport:
        def invalidate_caches(self):
            pass

        def find_spec(self, name, path, target=None):
            if name != module_name:
                return None
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            stock_exec = loader.exec_module

            def exec_module(module):
                stock_exec(module)
                for each in patches:
                    try:
                        each(module)
                    except Exception:
                        pass

            loader.exec_module = exec_module
            return spec

    try:
        if module_name not in sys.modules:
            sys.meta_path.insert(0, PatchOnImport())
    except Exception:
        pass


def _kernel_watchdog_on_each_shell(setup):
    """Calls setup(shell) with the IPython shell of each IPythonKernel made, once it is made
    (ipykernel is imported later: this runs while the interpreter starts)."""

    def patch(ipkernel):
        stock_init = ipkernel.IPythonKernel.__init__

        def __init__(self, *args, **kwargs):
            stock_init(self, *args, **kwargs)
            try:
                setup(self.shell)
            except Exception:
                pass

        ipkernel.IPythonKernel.__init__ = __init__

    _kernel_watchdog_patch_on_import("ipykernel.ipkernel", patch)


def _kernel_watchdog_keep_stderr():
    """3. Makes ipykernel's stderr forwarding lose nothing when the process dies.

    ipykernel points fd 2 at a pipe of its own and a thread reads it, publishes what it read
    to the notebook, then writes it to the original stderr (the watchdog's pipe). A library
    that writes its error to fd 2 and aborts at once ("terminate called after...", "Check
    failed:", CUDA_ERROR_OUT_OF_MEMORY) dies while those bytes sit in that thread: read, not
    yet passed on. Here the thread copies them to the original stderr with tee(2) the moment
    they arrive, before it reads them: one system call, no Python (and so no GIL) between
    the bytes arriving and the watchdog having them. The rest of what ipykernel does is
    unchanged. Linux only (tee), and only where both ends are pipes; anything unexpected
    leaves ipykernel as it is.
    """
    import sys

    if not sys.platform.startswith("linux"):
        return

    def patch(iostream):
        import ctypes
        import errno
        import os
        import stat

        libc = ctypes.CDLL(None, use_errno=True)
        tee = libc.tee
        tee.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
        tee.restype = ctypes.c_ssize_t
        stock = iostream.OutStream._watch_pipe_fd

        def is_pipe(fd):
            try:
                return stat.S_ISFIFO(os.fstat(fd).st_mode)
            except Exception:
                return False

        def watch_pipe_fd(self):
            source = getattr(self, "_fid", None)
            original = getattr(self, "_original_stdstream_copy", None)
            if (getattr(self, "name", None) != "stderr" or not isinstance(source, int)
                    or not isinstance(original, int) or not is_pipe(source)
                    or not is_pipe(original)):
                return stock(self)
            try:
                while self._should_watch:
                    copied = tee(source, original, 1000, 0)
                    if copied < 0 and ctypes.get_errno() == errno.EINTR:
                        continue
                    if copied < 0:
                        return stock(self)  # tee refused: ipykernel's own loop carries on
                    if copied == 0:
                        break  # every writer has gone
                    bts = os.read(source, copied)
                    if not bts:
                        break
                    self.write(bts.decode())
            except Exception:
                self._exc = sys.exc_info()

        iostream.OutStream._watch_pipe_fd = watch_pipe_fd

    def patch_stream(iostream):
        if hasattr(iostream.OutStream, "_watch_pipe_fd"):
            patch(iostream)

    _kernel_watchdog_patch_on_import("ipykernel.iostream", patch_stream)


def _kernel_watchdog_announce_cells():
    """4. Tells the watchdog that the shim runs, then which cell starts, before it runs.

    A cell that crashes the kernel within milliseconds dies before ipykernel's IOPub thread
    has published its execute_input, and the report could not say which cell ran. IPython's
    pre_run_cell event fires in the main thread just before the cell's code: there one record
    ("\x1ekwd-cell {json}\n" with the cell's number, code and start time, at most 4000
    bytes, so one atomic pipe write) goes to the watchdog's pipe for cells
    ($KERNEL_WATCHDOG_CELL_FD, non-blocking). The watchdog reads it when it wakes anyway (its
    next memory sample, a report, the death), not at each cell; a watchdog that has not read
    for a while costs the kernel a dropped record, never a wait.
    """
    import os

    try:
        channel = int(os.environ.pop("KERNEL_WATCHDOG_CELL_FD", ""))
        os.set_inheritable(channel, False)  # the kernel's own programs do not get it
        # First, that the shim runs at all: a kernel that never says so (an interpreter
        # started with -I, -E or -S, or not Python) is reported as one that could not.
        os.write(channel, b"\x1ekwd-shim {}\n")
    except Exception:
        return

    def announce_from(shell):
        import json

        def number_of_this_cell():
            # IPython 9 counts the cell before pre_run_cell fires, IPython 8 after it runs;
            # both have already written the cell's own number into the ExecutionResult that
            # run_cell_async (the frame that triggered the event) is filling.
            import sys

            frame = sys._getframe(2)
            for _ in range(4):
                if frame is None:
                    break
                result = frame.f_locals.get("result")
                if type(result).__name__ == "ExecutionResult" and \
                        isinstance(getattr(result, "execution_count", None), int):
                    return result.execution_count
                frame = frame.f_back
            return shell.execution_count

        def pre_run_cell(info=None):
            try:
                import time

                code = getattr(info, "raw_cell", None) or ""
                n = number_of_this_cell()
                for cap in (3000, 1000, 200, 0):
                    body = json.dumps({"n": n, "code": code[:cap],
                                       "truncated": len(code) > cap,
                                       "t": int(time.time() * 1000)}, ensure_ascii=True)
                    if len(body) <= 3900:
                        break
                os.write(channel, b"\x1ekwd-cell " + body.encode("ascii") + b"\n")
            except Exception:
                pass

        shell.events.register("pre_run_cell", pre_run_cell)
        # Cells will be announced: an IPython kernel. (Another kernel on this interpreter,
        # xeus-python's, never says so, and its cells are known from IOPub alone.)
        try:
            os.write(channel, b'\x1ekwd-shim {"cells": true}\n')
        except Exception:
            pass

    _kernel_watchdog_on_each_shell(announce_from)


def _kernel_watchdog_show_notice():
    """5. Says, once, why this notebook's previous kernel died.

    The kernel's manager restarted it after a crash (same connection file), and the watchdog
    that started it put the notice the dying one left in a file of this kernel's own, named by
    $KERNEL_WATCHDOG_NOTICE. It is shown above the output of the first cell that runs
    (Markdown where the front end renders it, text elsewhere), then never again: the file is
    removed as it is read and the hook removes itself.
    """
    import os

    try:
        path = os.environ.pop("KERNEL_WATCHDOG_NOTICE", "")
        if not path:
            return  # most starts: json is not imported for nothing
        import json

        with open(path, encoding="utf-8") as f:
            notice = json.load(f)
        os.unlink(path)
        text = str(notice["text"])
        markdown = str(notice.get("markdown") or text)
    except Exception:
        return

    def show_from(shell):
        shown = []

        def pre_run_cell(info=None):
            # A front end's own silent request (VS Code's, after a restart) is not where the
            # user looks: wait for a cell that goes into the history.
            if shown or not getattr(info, "store_history", True):
                return
            shown.append(True)
            try:
                shell.events.unregister("pre_run_cell", pre_run_cell)
            except Exception:
                pass
            try:
                from IPython.display import display

                display({"text/plain": text, "text/markdown": markdown}, raw=True)
            except Exception:
                pass

        shell.events.register("pre_run_cell", pre_run_cell)

    _kernel_watchdog_on_each_shell(show_from)


def _kernel_watchdog_dump_on_signal():
    """6. Lets the watchdog ask where every Python thread is, while the kernel lives.

    faulthandler dumps all threads' Python frames from a C signal handler on SIGRTMIN+10,
    so it answers even while the main thread is stuck in C with the GIL released, into a
    memory file (memfd "kernel-watchdog-python-stacks", O_APPEND) that a watchdog with the
    rights to trace the kernel opens through /proc/PID/fd: `run`, the daemon and
    `kernel-watchdog stacks` alike, and nothing lands in stderr or the crash's fault pipe.
    SIGRTMIN+10: a real-time signal nothing in Python, ipykernel, PyTorch (SIGUSR2 for its
    own thread dumps), TensorFlow or glibc (SIGRTMIN-2, SIGRTMIN-1) uses, away from the first
    few real-time signals libraries take when they want a free one. It is taken only when
    nobody holds it yet; the watchdog sends it only when /proc says the kernel catches it (an
    uncaught one would kill it). Linux only.
    """
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import faulthandler
        import fcntl
        import os
        import signal

        signum = signal.SIGRTMIN + 10
        if signal.getsignal(signum) != signal.SIG_DFL:
            return
        fd = os.memfd_create("kernel-watchdog-python-stacks", os.MFD_CLOEXEC)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        faulthandler.register(signum, file=fd, all_threads=True, chain=False)
    except Exception:
        pass


_kernel_watchdog_keep_stderr()
del _kernel_watchdog_keep_stderr
_kernel_watchdog_show_notice()
del _kernel_watchdog_show_notice
_kernel_watchdog_announce_cells()
del _kernel_watchdog_announce_cells
_kernel_watchdog_dump_on_signal()
del _kernel_watchdog_dump_on_signal
_kernel_watchdog_start()
del _kernel_watchdog_start
del _kernel_watchdog_forget_at_next_import
del _kernel_watchdog_on_each_shell
del _kernel_watchdog_patch_on_import
