"""kernel-watchdog: a crash watchdog for Jupyter kernels.

The work is done by the `kernel-watchdog` program that this package carries; Python holds
the shim that runs it (`python -m kernel_watchdog`), a jupyter_client kernel provisioner
that starts kernels under it, a pytest plugin for notebook tests, and the Jupyter Server
extension with its JupyterLab / Notebook 7 frontend (the prebuilt labextension).
"""
from kernel_watchdog._binary import BinaryNotFound, find_binary

__all__ = ["BinaryNotFound", "find_binary"]


def _jupyter_server_extension_points():
    return [{"module": "kernel_watchdog.server_extension"}]
