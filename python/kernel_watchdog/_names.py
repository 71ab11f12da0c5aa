"""Names the provisioner and the pytest plugin share, importable without jupyter_client."""
PROVISIONER = "kernel-watchdog-provisioner"  # its entry point in jupyter_client.kernel_provisioners
RUN_OPTIONS_ENV = "KERNEL_WATCHDOG_RUN_OPTIONS"  # options for `kernel-watchdog run`, shell-split
