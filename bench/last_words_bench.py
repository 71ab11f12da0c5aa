"""Last words kept: how many times out of N a native library's error, written to fd 2 just
before it aborts, reaches the crash report of a real ipykernel under the watchdog. Next to
it, the same count for what the kernel's own stderr (the Jupyter server's log) received:
what anyone had before.

Usage: /usr/bin/python3 bench/last_words_bench.py --watchdog build/kernel-watchdog [--runs 100]
"""
import argparse
import json
import time

import sandbox
from jupyter_client import KernelManager

CELL = """\
import ctypes
libc = ctypes.CDLL(None)
words = b"terminate called after throwing an instance of 'std::runtime_error'\\n  what():  run %d\\n" % {run}
libc.write(2, words, len(words))
libc.abort()
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchdog", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--run-option", action="append", default=[],
                    help="an option for `run` (e.g. --no-faulthandler: without the shim)")
    args = ap.parse_args()
    work, reports = sandbox.wrapped_python3(args.watchdog, "kwd-lastwords-", args.run_option)
    in_report = in_server_log = 0
    for run in range(args.runs):
        log = work / f"stderr-{run}.txt"
        with open(log, "wb") as server_log:
            km = KernelManager(kernel_name="python3-watched")
            km.start_kernel(stderr=server_log)
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=60)
            kc.execute(CELL.format(run=run))
            deadline = time.monotonic() + 30
            while km.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            kc.stop_channels()
            km.cleanup_resources()
        needle = f"what():  run {run}\n"
        found = [p for p in reports.glob("*.json")
                 if needle in json.loads(p.read_text())["stderr_tail"]["text"]]
        in_report += bool(found)
        # The watchdog passes recovered bytes on too: count only what came before its own
        # report line, i.e. what the kernel's pipe delivered while it lived.
        text = log.read_text(errors="replace")
        in_server_log += needle in text.split("report:")[0]
    print(f"last words in the crash report:            {in_report}/{args.runs}   (target >= 99/100)")
    print(f"last words forwarded while the kernel lived: {in_server_log}/{args.runs}   "
          "(what the server log had without the watchdog)")


if __name__ == "__main__":
    main()
