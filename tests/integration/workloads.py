"""Cells that exercise the watchdog, shared by the tests and the benchmarks in bench/."""


def busy_session_cell(seconds):
    """A cell that keeps the watchdog busy for `seconds`: a short-lived subprocess every
    ~50 ms (the tree is rescanned and members depart all the time), memory going up and down
    by 4-32 MiB, output on both streams. It returns how many rounds it made."""
    return (f"deadline = time.time() + {seconds}\n"
            "n = 0\n"
            "while time.time() < deadline:\n"
            "    subprocess.run(['true'])\n"
            "    block = np.ones((n % 8 + 1) * 4 * 1024 * 1024 // 8)\n"
            "    print('cell output', n)\n"
            "    print('cell stderr', n, file=sys.stderr)\n"
            "    del block\n"
            "    n += 1\n"
            "    time.sleep(0.05)\n"
            "n\n")


BUSY_SESSION_IMPORTS = "import numpy as np, subprocess, sys, time"
