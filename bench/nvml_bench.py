"""NVML sampling cost (issue: diagnosis, "NVML sampling cost"), measured side by side.

The watchdog's NVML worker (kwd-nvml-bench: NvmlWorker as `run` uses it) samples a GPU with
three compute processes for --seconds at 100 Hz; its thread's CPU time per sample is
printed next to the same NVML calls made from Python through ctypes, the way pynvml makes
them (nvmlDeviceGetMemoryInfo, then nvmlDeviceGetComputeRunningProcesses_v3 asked for the
count and then filled), on the same library: back to back, and paced at 100 Hz as a
monitor runs them (a wake-up per sample, as the worker has).

Here that library is the fake NVML (tests/fakes/fake_nvml.c, the real ABI): what is
measured is the watchdog's own overhead around the calls, not the driver's time inside
them. The fake's Xid events are turned off (device.0.events=3): its event wait polls its
script file every 10 ms, a cost of the fake that a driver's blocking wait does not have. On
a machine with a GPU pass --library /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1.

Then, at run's default GPU rate (2 Hz): the worker's CPU per second idle and with 10 cell
ends a second, and how long the event loop waits at a cell's end for the reading it asks
for (NvmlProbe::on_cell_edge: at most 2 ms, so that the next cell's work is not charged
to the one that ended).

Usage: /usr/bin/python3 bench/nvml_bench.py --build-dir build [--library PATH] [--seconds 5]
"""
import argparse
import ctypes
import json
import os
import pathlib
import subprocess
import tempfile
import time

SCRIPT = """driver=580.159.04
device.0.name=NVIDIA H100 80GB HBM3
device.0.uuid=GPU-11111111-2222-3333-4444-555555555555
device.0.total=85899345920
device.0.used=21474836480
device.0.reserved=536870912
device.0.process=4242:17179869184
device.0.process=4243:2147483648
device.0.process=665:2147483648
device.0.events=3
"""


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, what the _v3 call fills
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def python_calls(library, iterations, paced_seconds):
    nvml = ctypes.CDLL(str(library))
    assert nvml.nvmlInit_v2() == 0
    device = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)) == 0
    memory = Memory()
    count = ctypes.c_uint(0)

    def sample():
        assert nvml.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)) == 0
        count.value = 0
        nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, ctypes.byref(count), None)
        infos = (ProcessInfo * (count.value + 5))()
        count.value += 5
        assert nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, ctypes.byref(count),
                                                           infos) == 0
        return [(infos[i].pid, infos[i].usedGpuMemory) for i in range(count.value)]

    for _ in range(200):
        sample()
    t0 = time.process_time_ns()
    for _ in range(iterations):
        processes = sample()
    raw_us = (time.process_time_ns() - t0) / iterations / 1000
    # Paced as a monitor samples (the watchdog's worker sleeps between samples too): the
    # wake-up is part of what a sample costs.
    paced = max(1, int(paced_seconds * 100))
    t0 = time.process_time_ns()
    for _ in range(paced):
        sample()
        time.sleep(0.01)
    paced_us = (time.process_time_ns() - t0) / paced / 1000
    nvml.nvmlShutdown()
    return raw_us, paced_us, len(processes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--library")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--iterations", type=int, default=20000)
    args = ap.parse_args()
    build = pathlib.Path(args.build_dir)
    library = pathlib.Path(args.library or build / "fake-nvml" / "current" / "libnvidia-ml.so.1")
    with tempfile.TemporaryDirectory(prefix="kwd-nvml-bench-") as tmp:
        if args.library is None:
            script = pathlib.Path(tmp) / "script"
            script.write_text(SCRIPT)
            os.environ["FAKE_NVML_SCRIPT"] = str(script)
        out = subprocess.run([str(build / "bench" / "kwd-nvml-bench"), str(library),
                              str(args.seconds), "10"], capture_output=True, text=True,
                             check=True)
        ours = json.loads(out.stdout)
        raw_us, paced_us, processes = python_calls(library, args.iterations, args.seconds)
        at_2hz = {}
        for ends in ("0", "10"):
            out = subprocess.run([str(build / "bench" / "kwd-nvml-bench"), str(library),
                                  str(args.seconds), "500", ends], capture_output=True,
                                 text=True, check=True)
            at_2hz[ends] = json.loads(out.stdout)
        out = subprocess.run([str(build / "bench" / "kwd-nvml-bench"), str(library), "--calls",
                              str(args.iterations)], capture_output=True, text=True, check=True)
        our_calls_us = json.loads(out.stdout)["calls_cpu_us_per_sample"]
    print(f"NVML sampling, {ours['devices']} device(s) with {ours['processes']} compute "
          f"processes, library {library}:")
    print(f"  watchdog worker thread: {ours['worker_cpu_us_per_sample']:8.2f} us CPU per sample "
          f"({ours['samples']} samples at 100 Hz; publishing to the loop included)")
    print(f"  the same calls from Python (ctypes, as pynvml), back to back: {raw_us:8.2f} us "
          f"per sample ({args.iterations} samples, {processes} processes)")
    print(f"  the same calls from Python at 100 Hz (a sleep between samples, as a monitor): "
          f"{paced_us:8.2f} us per sample")
    ours_us = ours["worker_cpu_us_per_sample"]
    print(f"  ratio watchdog/python: {ours_us / paced_us:.2f} against the paced loop "
          f"(target <= 2), {ours_us / raw_us:.2f} against the back-to-back calls")
    print(f"  the watchdog's own calls (NvmlLibrary, as the worker makes them), back to back: "
          f"{our_calls_us:8.2f} us per sample: {our_calls_us / raw_us:.2f} x Python's; the rest "
          f"of a paced sample, in both, is the wake-up")
    edges = at_2hz["10"]
    print(f"  at 2 Hz (run's default), worker CPU per second: "
          f"{at_2hz['0']['worker_cpu_ms_per_s']:.3f} ms idle, "
          f"{edges['worker_cpu_ms_per_s']:.3f} ms with 10 cell ends a second")
    print(f"  the loop's wait for a cell end's reading: median {edges['cell_end_wait_us_p50']:.0f} us, "
          f"max {edges['cell_end_wait_us_max']:.0f} us; not read within 2 ms: "
          f"{edges['cell_ends_not_read_in_2ms']} of {edges['cell_ends']}")

if __name__ == "__main__":
    main()
