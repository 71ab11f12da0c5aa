"""`python -m kernel_watchdog ARGS...` is `kernel-watchdog ARGS...`."""
import sys

from kernel_watchdog._binary import exec_binary

if __name__ == "__main__":
    exec_binary(sys.argv[1:])
