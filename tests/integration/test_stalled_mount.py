"""A file system that stops answering, for real: a FUSE mount (Debian's bindfs) whose server is
stopped with SIGSTOP, so that every read that reaches it waits, as it does on a hard NFS mount
whose server is gone. The kernel-watchdog daemon reads a kernel's own files (its connection
file, its site-packages through its root): those reads run off the daemon's loop, so a kernel
whose files stall holds up no other kernel, and its report says what could not be read.

The kernels are real ipykernels started by jupyter_client; the daemon is the real binary."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import PLAIN, Watched
from test_daemon import daemon, kernels, the_report_for, world  # noqa: F401

pytestmark = [
    pytest.mark.skipif(shutil.which("bindfs") is None, reason="bindfs is not installed"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse on this machine"),
]


class StoppableMount:
    """`source` mounted at `mountpoint` through bindfs; stop() makes it stop answering."""

    def __init__(self, source, mountpoint):
        self.mountpoint = mountpoint
        mountpoint.mkdir()
        # Foreground, so that the process is bindfs itself, the one to stop.
        self.proc = subprocess.Popen(["bindfs", "-f", str(source), str(mountpoint)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not os.path.ismount(mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip("bindfs cannot mount here: " + self.proc.stderr.read().decode())
            time.sleep(0.05)
        self.stopped = False

    def stop(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.stopped = True
        # What the kernel cached of names and attributes (bindfs's default: a second) runs out:
        # every look from now on reaches the stopped server.
        time.sleep(1.5)

    def resume(self):
        if self.stopped:
            self.proc.send_signal(signal.SIGCONT)
            self.stopped = False

    def close(self):
        self.resume()
        subprocess.run(["fusermount", "-u", "-z", str(self.mountpoint)], check=False,
                       stderr=subprocess.DEVNULL)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def mount(world):
    source = world["tmp"] / "nfs-export"
    site = source / "site-packages"
    (site / "stallpkg").mkdir(parents=True)
    (site / "stallpkg" / "__init__.py").write_text("")
    (site / "stallpkg" / "blob.bin").write_bytes(b"\0" * (1 << 20))
    (site / "stallpkg-1.0.dist-info").mkdir()
    (site / "stallpkg-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: stallpkg\nVersion: 1.0\n\n")
    (source / "runtime").mkdir()
    m = StoppableMount(source, world["tmp"] / "nfs")
    yield m
    m.close()


def test_a_kernel_whose_site_packages_stop_answering_holds_up_no_other_kernel(world, daemon,
                                                                              kernels, mount):
    d = daemon()
    other = kernels()
    stalled = kernels(env={"PYTHONPATH": str(mount.mountpoint / "site-packages")})
    d.kernel(other.km.connection_file)
    d.kernel(stalled.km.connection_file)
    # The package is imported and its file opened while the mount answers.
    stalled.execute("import ctypes, stallpkg\n"
                    "blob = open(stallpkg.__file__.replace('__init__.py', 'blob.bin'), 'rb')")
    mount.stop()
    try:
        # Mapped with the descriptor it has (mmap itself asks the file system nothing), so a
        # new file under site-packages shows in the kernel's maps: the daemon looks up which
        # distribution installed it, and that read waits on the stopped server.
        stalled.execute("libc = ctypes.CDLL(None)\n"
                        "libc.mmap.restype = ctypes.c_void_p\n"
                        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,"
                        " ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
                        "mapped = libc.mmap(None, 1 << 20, 1, 2, blob.fileno(), 0)\n"
                        "assert mapped not in (None, ctypes.c_void_p(-1).value)")
        time.sleep(2)  # the daemon has seen the new mapping, and its lookup is stuck
        # Every other kernel is watched as ever, its own lookups too (the package index they
        # share waits on no one's read): NumPy, imported now, is in its report.
        other.execute("import numpy")
        # The daemon reads a kernel's maps at its samples (the next cell's start is one; an idle
        # kernel's come every 5 s), never after its death: a cell after the import lets it see.
        time.sleep(0.5)
        other.execute("x = 1")
        time.sleep(1)
        other.execute_until_death("import ctypes; ctypes.string_at(0)")
        report = the_report_for(world, d, other.km.connection_file)
        assert report["diagnosis"]["cause"] == "native_crash"
        assert "stalled" not in report["fingerprint"]
        assert "numpy" in [f["name"] for f in report["fingerprint"]["frameworks"]], \
            report["fingerprint"]["frameworks"]
        # And so is the stalled kernel: its report is written, and says what it could not read.
        stalled.execute_until_death("ctypes.string_at(0)")
        report = the_report_for(world, d, stalled.km.connection_file)
        assert report["diagnosis"]["cause"] == "native_crash"
        stall = report["fingerprint"]["stalled"]
        assert stall["path"].startswith(str(mount.mountpoint / "site-packages")), stall
        assert stall["waiting_ms"] >= 1000, stall
        missing = "\n".join(report["diagnosis"]["missing"])
        assert "fingerprint: the kernel's files stopped answering" in missing, missing
        assert str(mount.mountpoint) in missing
        # What was known before the stall stands.
        assert report["fingerprint"]["available"] is True
        assert report["fingerprint"]["python"]["executable"]
    finally:
        mount.resume()
    # The mount answers again: the daemon goes on, and nothing of the stall is left.
    assert d.proc.poll() is None
    assert d.status()["kernels"] is not None


def test_a_connection_file_on_a_stalled_mount_holds_up_no_other_kernel(world, daemon,
                                                                       kernels, mount):
    other = kernels()
    stalled = Watched(PLAIN, dict(os.environ), manager_kwargs={
        "connection_file": str(mount.mountpoint / "runtime" / "kernel-stalled.json")})
    mount.stop()
    try:
        # Found at the daemon's start, both: the one whose file answers is watched at once.
        d = daemon()
        d.kernel(other.km.connection_file)
        # The other is not while its read waits (the scans, every second, ask again and say
        # it in the log once it has waited a second).
        time.sleep(3)
        assert not [row for row in d.status()["kernels"]
                    if row["connection_file"] == stalled.km.connection_file]
        other.execute_until_death("import ctypes; ctypes.string_at(0)")
        report = the_report_for(world, d, other.km.connection_file)
        assert report["diagnosis"]["cause"] == "native_crash"
    finally:
        mount.resume()
    try:
        # Answering again, the file is read at a later scan and the kernel is watched.
        d.kernel(stalled.km.connection_file, timeout=30)
    finally:
        stalled.close()
    log_lines = d.stop().splitlines()
    said = [line for line in log_lines if "kernel-stalled.json" in line and
            "its file system does not answer" in line]
    assert len(said) == 1, "\n".join(log_lines)


def test_a_kernel_dying_with_its_connection_file_on_a_stalled_mount_holds_up_no_other_kernel(
        world, daemon, kernels, mount):
    """At a death the daemon asks whether the connection file is still there (a manager removes
    it as it ends its kernel): asked off its loop, a stalled mount leaves it unknown."""
    d = daemon()
    other = kernels()
    stalled = Watched(PLAIN, dict(os.environ), manager_kwargs={
        "connection_file": str(mount.mountpoint / "runtime" / "kernel-dies-stalled.json")})
    try:
        d.kernel(other.km.connection_file)
        d.kernel(stalled.km.connection_file)
        mount.stop()
        try:
            os.kill(stalled.km.provisioner.process.pid, signal.SIGSEGV)
            time.sleep(1)
            other.execute_until_death("import ctypes; ctypes.string_at(0)")
            report = the_report_for(world, d, other.km.connection_file)
            assert report["diagnosis"]["cause"] == "native_crash"
            # The one whose file did not answer is reported too (unknown is no manager's end).
            report = the_report_for(world, d, stalled.km.connection_file)
            assert report["termination"]["signal_name"] == "SIGSEGV", report["termination"]
        finally:
            mount.resume()
    finally:
        stalled.close()
