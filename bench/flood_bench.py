"""Floods (issue 40): what a kernel that writes without pause costs when it is watched, side by
side in one run, against the same kernel alone.

- stderr: a process writes SIZE (1 GiB) to its fd 2 in 64 KiB writes, alone and under
  `kernel-watchdog run` (which passes stderr through to its own, as the kernelspec contract
  asks, and keeps the last 256 KiB for a report). The bench drains both ends the same way.
- IOPub: a real ipykernel prints LINES lines of 100 bytes in one cell; the client waits for
  the cell's idle. Alone it is python3's own kernelspec; watched, the same kernel under `run`,
  whose watch subscribes to IOPub and reads every message.

It prints each case's time, the ratio watched/alone (the goal: within 1.2x), and the
watchdog's peak RSS (VmHWM) against its RSS once the kernel started (the goal: bounded).

Usage: /usr/bin/python3 bench/flood_bench.py --watchdog build/kernel-watchdog
           [--stderr-size 1G] [--lines 200000] [--rounds 3]
"""
import argparse
import os
import subprocess
import sys
import threading
import time

import sandbox
from jupyter_client import KernelManager

WRITER = """
import os, sys
left = {size}
chunk = b'x' * 65535 + b'\\n'
while left > 0:
    left -= os.write(2, chunk[:min(left, len(chunk))])
"""

PRINTER = "import sys\nfor i in range({lines}):\n    print('%099d' % i)\n"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def drain(stream):
    while stream.read(1 << 20):
        pass


def stderr_flood(argv):
    """Seconds to write, and the first process's peak RSS (VmHWM, KiB) as last seen."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = threading.Thread(target=drain, args=(proc.stderr,))
    reader.start()
    peak = None
    while proc.poll() is None:
        peak = status_kib(proc.pid, "VmHWM") or peak
        time.sleep(0.02)
    reader.join()
    return time.monotonic() - started, peak


def iopub_flood(kernel_name, lines):
    """Seconds from execute to idle for the printing cell, and the launcher's RSS figures."""
    km = KernelManager(kernel_name=kernel_name)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        pid = km.provisioner.process.pid
        time.sleep(1)
        first = status_kib(pid, "VmRSS")
        started = time.monotonic()
        msg_id = kc.execute(PRINTER.format(lines=lines))
        while True:
            msg = kc.get_iopub_msg(timeout=300)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                break
        seconds = time.monotonic() - started
        return seconds, first, status_kib(pid, "VmHWM")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchdog", required=True)
    ap.add_argument("--stderr-size", default="1G")
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    watchdog = os.path.abspath(args.watchdog)
    size = parse_size(args.stderr_size)
    sandbox.wrapped_python3(watchdog, "kwd-flood-")
    writer = [sys.executable, "-c", WRITER.format(size=size)]
    # The watchdog's peak with a MiB written: what the flood adds is measured above it.
    small = [sys.executable, "-c", WRITER.format(size=1 << 20)]
    baseline = max(stderr_flood([watchdog, "run", "--", *small])[1] or 0 for _ in range(3))

    print(f"stderr flood: {size / (1 << 30):.2f} GiB in 64 KiB writes, {args.rounds} rounds "
          "alternating (median)")
    alone, watched, growth = [], [], []
    for _ in range(args.rounds):
        alone.append(stderr_flood(writer)[0])
        seconds, peak = stderr_flood([watchdog, "run", "--", *writer])
        watched.append(seconds)
        if peak and baseline:
            growth.append(peak - baseline)
    a, w = sorted(alone)[len(alone) // 2], sorted(watched)[len(watched) // 2]
    print(f"  alone {a:.2f} s ({size / a / (1 << 20):.0f} MiB/s), watched {w:.2f} s "
          f"({size / w / (1 << 20):.0f} MiB/s): {w / a:.2f}x (goal <= 1.2x)")
    if growth:
        print(f"  watchdog peak RSS (VmHWM) above its peak with 1 MiB written: at most "
              f"{max(growth) / 1024:.1f} MiB (baseline {baseline / 1024:.1f} MiB)")

    print(f"IOPub flood: one cell printing {args.lines} lines of 100 bytes, {args.rounds} rounds "
          "alternating (median)")
    alone, watched, growth = [], [], []
    for _ in range(args.rounds):
        alone.append(iopub_flood("python3", args.lines)[0])
        seconds, first, peak = iopub_flood("python3-watched", args.lines)
        watched.append(seconds)
        if first and peak:
            growth.append(peak - first)
    a, w = sorted(alone)[len(alone) // 2], sorted(watched)[len(watched) // 2]
    print(f"  alone {a:.2f} s, watched {w:.2f} s: {w / a:.2f}x (goal <= 1.2x)")
    if growth:
        print(f"  watchdog peak RSS above its RSS before the cell: at most "
              f"{max(growth) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
