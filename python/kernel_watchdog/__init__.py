"""kernel-watchdog: a crash watchdog for Jupyter kernels.

The work is done by the `kernel-watchdog` program that this package carries; Python holds
the shim that runs it (`python -m kernel_watchdog`), a jupyter_client kernel provisioner
that starts kernels under it, and a pytest plugin for notebook tests.
"""
from kernel_watchdog._binary import BinaryNotFound, find_binary

__all__ = ["BinaryNotFound", "find_binary"]
