"""kernel-watchdog demo: a real kernel under watch dies, and the report says why.

Wraps Debian's python3 kernelspec into a throwaway Jupyter path, starts it through
jupyter_client exactly as JupyterLab would, runs a few cells (the last one crashes the
kernel), then prints the crash report summary.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from jupyter_client import KernelManager


def run_cell(kc, code, timeout=60):
    msg_id = kc.execute(code)
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            print(f"    {content['text']}", end="")
        elif kind == "execute_result":
            print(f"    Out: {content['data']['text/plain']}")
        elif kind == "status" and content["execution_state"] == "idle":
            return


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--watchdog", required=True, help="path to the kernel-watchdog binary")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-demo-"))
    prefix = work / "prefix"
    os.environ["JUPYTER_PATH"] = str(prefix / "share" / "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = str(work / "runtime")
    os.environ["KERNEL_WATCHDOG_REPORT_DIR"] = str(work / "reports")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiets debugpy's banner

    print(f"$ kernel-watchdog kernelspec wrap python3 --prefix {prefix} --name python3-watched")
    subprocess.run([args.watchdog, "kernelspec", "wrap", "python3", "--prefix", str(prefix),
                    "--name", "python3-watched"], check=True)

    km = KernelManager(kernel_name="python3-watched")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    print(f"\nKernel started under watch: {' '.join(km.kernel_spec.argv[:4])} ...\n")

    cells = [
        "import numpy as np\nprint('numpy', np.__version__)",
        "data = [np.ones(40_000_000 // 8) for _ in range(8)]  # ~320 MB\nlen(data)",
        "def read_sensor(address):\n    import ctypes\n    return ctypes.string_at(address)\n\n"
        "baseline = sum(np.ones(5_000_000).cumsum())  # some work first\n"
        "read_sensor(0)  # a native crash, as a broken C extension would cause",
    ]
    for i, code in enumerate(cells, 1):
        print(f"In [{i}]: " + code.replace("\n", "\n        "))
        if i < len(cells):
            run_cell(kc, code)
            time.sleep(0.3)
        else:
            kc.execute(code)
    while km.is_alive():
        time.sleep(0.05)
    print(f"\nThe kernel died (jupyter_client sees returncode "
          f"{km.provisioner.process.returncode}); the front end would only say "
          "\"The kernel appears to have died\".\n")
    kc.stop_channels()

    print("$ kernel-watchdog reports show latest\n")
    sys.stdout.flush()
    subprocess.run([args.watchdog, "reports", "show", "latest"], check=True)
    km.cleanup_resources()


if __name__ == "__main__":
    main()
