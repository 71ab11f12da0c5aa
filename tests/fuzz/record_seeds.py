"""Writes the seed corpora of the fuzz targets from real sources (run by hand, results are
committed under tests/fuzz/corpus/): connection files written by jupyter_client, IOPub frames
recorded from a real ipykernel, and procfs / cgroup / PSI / kmsg text of the machine it runs on.

    /usr/bin/python3 tests/fuzz/record_seeds.py tests/fuzz/corpus
    /usr/bin/python3 tests/fuzz/record_seeds.py tests/fuzz/corpus report   # the report seeds only
"""
import glob
import os
import shutil
import sys
import json
import subprocess
import tempfile
import uuid

import zmq
from jupyter_client.connect import write_connection_file
from jupyter_client.manager import start_new_kernel

SEP = b"\x1e"  # tests/fuzz/frames.hpp


def put(corpus, target, name, data):
    os.makedirs(os.path.join(corpus, target), exist_ok=True)
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def connection_files(corpus):
    tmp = tempfile.mkdtemp()
    key = str(uuid.uuid4()).encode()
    try:
        for transport in ("tcp", "ipc"):
            ip = "127.0.0.1" if transport == "tcp" else os.path.join(tmp, "kernel-ipc")
            fname, _ = write_connection_file(os.path.join(tmp, f"kernel-{transport}.json"),
                                             transport=transport, ip=ip, key=key)
            put(corpus, "connection_file", f"jupyter_client_{transport}.json", read(fname))
        fname, _ = write_connection_file(os.path.join(tmp, "kernel-sha512.json"), key=key,
                                         signature_scheme="hmac-sha512")
        put(corpus, "connection_file", "jupyter_client_sha512.json", read(fname))
        # CurveZMQ keys, as jupyter_client >= 8.9 adds them (real keys from libzmq).
        public, secret = zmq.curve_keypair()
        with open(fname) as f:
            info = json.load(f)
        info.update(curve_publickey=public.decode(), curve_secretkey=secret.decode())
        put(corpus, "connection_file", "curve.json", json.dumps(info, indent=1))
    finally:
        shutil.rmtree(tmp)


CELLS = [
    "x = 1 + 1\nx",
    "print('hello')",
    "import sys; print('warning: low memory', file=sys.stderr)",
    "from IPython.display import display, HTML; display(HTML('<b>bold</b>'))",
    "1/0",
    "import numpy as np; a = np.ones((3, 3)); a.sum()",
]


def iopub_session(corpus):
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        info = km.get_connection_info()
        ctx = zmq.Context.instance()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(f"tcp://{info['ip']}:{info['iopub_port']}")
        import time
        time.sleep(1.0)  # the subscription reaches the kernel
        for code in CELLS:
            kc.execute_interactive(code, timeout=30, output_hook=lambda m: None)
        kc.shutdown()
        time.sleep(1.0)
        messages = []
        while sub.poll(500):
            messages.append(sub.recv_multipart())
        key = info["key"] if isinstance(info["key"], bytes) else info["key"].encode()
        scheme = info["signature_scheme"].encode()
        session = []
        for i, frames in enumerate(messages):
            delim = frames.index(b"<IDS|MSG>")
            # As recorded, signature and all: verified with the real key.
            put(corpus, "wire", f"recorded_{i:02d}", SEP.join([scheme, key, *frames]))
            session.extend(frames[delim + 2:delim + 6])
        put(corpus, "iopub", "recorded_session", SEP.join(session))
        # The same messages for other schemes and keys, the signature left to the target
        # (a signature frame "SIGN" is replaced by the right one: see fuzz_wire.cpp).
        for i, (scheme, key) in enumerate([(b"hmac-sha256", b""), (b"hmac-sha512", b"k"),
                                           (b"hmac-md5", b"secret"), (b"hmac-sha3_256", b"x")]):
            frames = list(messages[(5 * i + 3) % len(messages)])
            frames[frames.index(b"<IDS|MSG>") + 1] = b"SIGN"
            put(corpus, "wire", f"resigned_{scheme.decode()}", SEP.join([scheme, key, *frames]))
        for i, frames in enumerate(messages):
            delim = frames.index(b"<IDS|MSG>")
            put(corpus, "iopub", f"recorded_{i:02d}", SEP.join(frames[delim + 2:delim + 6]))
        sub.close()
    finally:
        km.shutdown_kernel(now=True)


def nvml_answers(corpus):
    """Driver answers in the order fuzz_nvml.cpp asks and fuzz_nvml_driver.c reads them:
    one device with two processes, as test_probes_nvml scripts its fake; a current driver
    (v2 memory struct, _v3 processes) and an old one (v1 structs)."""
    import struct

    def text(t):
        return b"\0" + bytes([len(t)]) + t

    def answers(legacy, insufficient_first=False):
        out = [b"\1" if legacy else b"\0"]
        out.append(b"\0")  # nvmlInit
        out.append(text(b"550.54.15"))
        out.append(b"\0" + struct.pack("<I", 1))  # one device
        out.append(b"\0")  # its handle
        out.append(text(b"NVIDIA H100 80GB HBM3"))
        out.append(text(b"GPU-5a4e6c43-1c5b-4c7e-9f55-3f6b1d1e6a0b"))
        total, used = 80 << 30, 12 << 30
        for _ in range(2):
            if legacy:
                out.append(b"\0" + struct.pack("<QQQ", total, total - used, used))
            else:
                out.append(b"\0" + struct.pack("<IxxxxQQQQ", 0x02000028, total, 0,
                                                total - used, used))
            if insufficient_first:
                out.append(bytes([0x86]) + struct.pack("<I", 40))  # 7: INSUFFICIENT_SIZE
            procs = [(4242, 10 << 30), (4243, 0xFFFFFFFFFFFFFFFF)]
            out.append(b"\0" + struct.pack("<I", len(procs)))
            for pid, mem in procs:
                out.append(struct.pack("<IxxxxQ", pid, mem) if legacy else
                           struct.pack("<IxxxxQII", pid, mem, 0, 0))
        out.append(b"\0\0")  # event set, registration
        out.append(b"\0" + struct.pack("<QQQII", 0x1000, 8, 79, 0, 0))  # Xid 79
        out.append(bytes([0x88]) + bytes(32))  # 10: TIMEOUT
        return b"".join(out)

    put(corpus, "nvml", "current_driver", answers(False))
    put(corpus, "nvml", "legacy_driver", answers(True))
    put(corpus, "nvml", "processes_grow", answers(False, insufficient_first=True))
    put(corpus, "nvml", "driver_not_loaded", b"\0" + bytes([0x87]))  # 9


def machine_text(corpus):
    for path in ("/proc/self/stat", "/proc/self/statm", "/proc/self/status", "/proc/meminfo",
                 "/proc/self/smaps_rollup", "/proc/1/stat"):
        data = read(path)
        if data:
            put(corpus, "procfs", path.strip("/").replace("/", "_"), data)
    # A process may call itself anything: parentheses and spaces in comm.
    with open("/proc/self/comm", "w") as f:
        f.write("a) b (c")
    put(corpus, "procfs", "proc_self_stat_odd_comm", read("/proc/self/stat"))
    for path in ("/proc/self/mountinfo", "/proc/self/cgroup"):
        put(corpus, "cgroup", path.strip("/").replace("/", "_"), read(path))
    for pattern in ("/sys/fs/cgroup/memory.*", "/sys/fs/cgroup/*/memory.*",
                    "/sys/fs/cgroup/memory/memory.*"):
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            if name in ("memory.max", "memory.events", "memory.current", "memory.stat",
                        "memory.limit_in_bytes", "memory.usage_in_bytes", "memory.oom_control",
                        "memory.failcnt", "memory.max_usage_in_bytes", "memory.swap.max"):
                data = read(path)
                if data:
                    put(corpus, "cgroup", path.strip("/").replace("/", "_"), data)
    for path in ("/proc/pressure/memory", "/sys/fs/cgroup/memory.pressure",
                 "/sys/fs/cgroup/unified/memory.pressure"):
        data = read(path)
        if data:
            put(corpus, "pressure", path.strip("/").replace("/", "_"), data)
    oom_kill_in_cgroup()
    # The OOM killer's records as /dev/kmsg hands them out (one record a read), not the rest
    # of the log, which says more about the machine than the fuzzer needs.
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        records = []
        while True:
            try:
                records.append(os.read(fd, 8192))
            except BlockingIOError:
                break
        os.close(fd)
    except OSError:
        records = []
    wanted = (b"invoked oom-killer", b"oom-kill:", b"Killed process", b"oom_reaper",
              b"out of memory", b"memory: usage", b"memory+swap: usage")
    kept = [r for r in records if any(w in r for w in wanted)][-12:]
    for i, r in enumerate(kept):
        put(corpus, "kernel_log", f"dev_kmsg_oom_{i:02d}", r)


def oom_kill_in_cgroup():
    """A real OOM kill in a 60 MiB v1 memory cgroup (root only; skipped where it cannot)."""
    d = "/sys/fs/cgroup/memory/kwd-fuzz-seed"
    try:
        os.makedirs(d, exist_ok=True)
        for f in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            if os.path.exists(os.path.join(d, f)):
                with open(os.path.join(d, f), "w") as out:
                    out.write("60M")
    except OSError:
        return
    try:
        subprocess.run(["/bin/sh", "-c", f"echo $$ > {d}/tasks && exec {sys.executable} -c "
                        "'a = bytearray(300 << 20)'"], check=False)
        for f in ("memory.oom_control", "memory.failcnt", "memory.max_usage_in_bytes"):
            data = read(os.path.join(d, f))
            if data:
                put(corpus_dir, "cgroup", "after_oom_" + f, data)
    finally:
        os.rmdir(d)


def trimmed(value, keep=2, chars=120):
    """A report cut down to its shape: long arrays keep their ends, long strings their ends."""
    if isinstance(value, dict):
        return {k: trimmed(v, keep, chars) for k, v in value.items()}
    if isinstance(value, list):
        kept = value if len(value) <= 2 * keep else value[:keep] + value[-keep:]
        return [trimmed(v, keep, chars) for v in kept]
    if isinstance(value, str) and len(value) > 2 * chars:
        return value[:chars] + value[-chars:]
    return value


def report_seeds(corpus):
    """Every report the diagnosis fixtures and the H100 recordings hold, each section there but
    trimmed to a few KiB: the report views' fuzz target (which reads the whole file, up to
    230 KiB for a recording, per run) then runs on inputs of the size its mutations can use."""
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.path.join(here, "..", "fixtures")
    for path in sorted(glob.glob(os.path.join(fixtures, "diagnosis", "*.json")) +
                       glob.glob(os.path.join(fixtures, "gpu", "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        report = doc.get("report", doc) if "expect" in doc else doc
        name = os.path.basename(os.path.dirname(path)) + "_" + os.path.basename(path)
        put(corpus, "report", "trimmed_" + name, json.dumps(trimmed(report), separators=(",", ":")))


if __name__ == "__main__":
    if sys.argv[2:] == ["report"]:
        report_seeds(sys.argv[1])
        sys.exit(0)
    corpus = corpus_dir = sys.argv[1]
    connection_files(corpus)
    iopub_session(corpus)
    machine_text(corpus)
    nvml_answers(corpus)
