"""The daemon on a GPU machine: an unwrapped ipykernel (no kernelspec wrap) found by
`kernel-watchdog daemon`, its GPU memory in `status --json` and in the metrics text, and a
segfault holding GPU memory reported with the cell's GPU delta.

On the device: bash .gpu/enter.sh python3 tests/gpu/daemon_check.py --out $OUT/gpu/daemon
"""
import argparse
import json
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from jupyter_client import KernelManager


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=pathlib.Path)
    args = ap.parse_args()
    kw = os.environ["KW"]
    args.out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="kwd-gpu-daemon-"))
    runtime, reports, sock = work / "runtime", work / "reports", work / "d.sock"
    textfile = work / "metrics.prom"
    runtime.mkdir()
    os.environ.update(JUPYTER_RUNTIME_DIR=str(runtime), PYDEVD_DISABLE_FILE_VALIDATION="1")
    log = open(args.out / "daemon.log", "w")
    daemon = subprocess.Popen([kw, "--log-format", "json", "daemon", "--runtime-dir",
                               str(runtime), "--report-dir", str(reports), "--status-socket",
                               str(sock), "--metrics-textfile", str(textfile)],
                              stdout=log, stderr=log)
    result = {}
    try:
        while not sock.exists():
            time.sleep(0.05)
        km = KernelManager(kernel_name="python3")
        km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)

        def run(code):
            msg_id = kc.execute(code)
            while True:
                try:
                    reply = kc.get_shell_msg(timeout=120)
                except queue.Empty:
                    return "timeout"
                if reply["parent_header"].get("msg_id") == msg_id:
                    return reply["content"]["status"]

        result["import"] = run("import ctypes")
        result["alloc"] = run("import torch\nx = torch.empty(6 * 2**30, dtype=torch.uint8, "
                              "device='cuda'); x.fill_(1); torch.cuda.synchronize()")
        time.sleep(3)  # a daemon samples an idle kernel every 5 s at most; the cell end asked
        status = subprocess.run([kw, "status", "--json", "--status-socket", str(sock)],
                                capture_output=True, text=True)
        (args.out / "status.json").write_text(status.stdout + status.stderr)
        time.sleep(2)
        if textfile.exists():
            shutil.copy(textfile, args.out / "metrics.prom")
        kc.execute("ctypes.string_at(0)")
        deadline = time.monotonic() + 30
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        deadline = time.monotonic() + 10
        found = []
        while time.monotonic() < deadline and not found:
            found = sorted(reports.glob("*.json")) if reports.is_dir() else []
            time.sleep(0.1)
        result["reports"] = len(found)
        if found:
            shutil.copy(found[-1], args.out / "report.json")
            report = json.loads(found[-1].read_text())
            result["headline"] = report["diagnosis"]["headline"]
            result["mode"] = report["watchdog"]["mode"]
            result["cells_gpu"] = [(c["execution_count"], c.get("gpu_delta"))
                                   for c in report["execution"]["last_cells"]]
            result["gpu_processes"] = report["gpu"]["processes"]
        kc.stop_channels()
        km.cleanup_resources()
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        log.close()
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
