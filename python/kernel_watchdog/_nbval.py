"""nbval waits for a dead kernel's reply until its cell timeout (2000 s by default): it never
asks whether the kernel is alive while a cell runs. With the plugin on, its wait for a
message is cut into one-second slices with that question between them, so a death fails
the cell at once and the plugin can say why."""
import queue

SLICE_S = 1.0


def fail_fast_on_death():
    """Patches nbval's RunningKernel.get_message when nbval is installed; returns whether it did."""
    try:
        from nbval.kernel import RunningKernel
    except ImportError:
        return False
    if getattr(RunningKernel.get_message, "_kernel_watchdog", False):
        return True
    original = RunningKernel.get_message

    def get_message(self, stream, timeout=None):
        left = timeout
        while True:
            wait = SLICE_S if left is None else min(SLICE_S, left)
            try:
                return original(self, stream, timeout=wait)
            except queue.Empty:
                if left is not None:
                    left -= wait
                    if left <= 0:
                        raise
                if not self.is_alive():
                    raise RuntimeError("Kernel died") from None

    get_message._kernel_watchdog = True
    RunningKernel.get_message = get_message
    return True
