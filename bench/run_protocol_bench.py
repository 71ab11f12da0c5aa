#!/usr/bin/python3
"""IOPub decoding: the watchdog vs jupyter_client, on the same recorded messages, in one run.

1. Records raw IOPub traffic from a real ipykernel (Debian's, through jupyter_client): a SUB
   socket of our own takes the frames exactly as they travel, for a mix of cells — prints,
   rich displays, results, errors with tracebacks.
2. Decodes the recording, HMAC-verified and JSON-parsed:
   - by the watchdog's decoder (bench/protocol_bench.cpp, one thread), and through its whole
     receive path (libzmq SUB over TCP loopback, decoder, cell bookkeeping);
   - by jupyter_client's Session.feed_identities + Session.deserialize, what every Python
     front end runs on each IOPub message (one thread);
   - by a minimal Python decoder (hmac + four json.loads, no date parsing), a floor for what
     any Python implementation of the same checks could cost.
   Each pass over the recording uses a fresh Session / decoder: both refuse a signature they
   have seen, and the passes replay the same messages.
3. No loss: a watched kernel prints in a loop with a flush per line, as fast as it can
   publish; the watchdog's count of believed messages (from its report) is set against what
   the front end received.

Usage: bench/run_protocol_bench.py [--build-dir build] [--seconds 3]
Timings are for this machine, this run; nothing here is asserted by tests.
"""
import argparse
import glob
import hashlib
import hmac
import json
import os
import pathlib
import queue
import struct
import subprocess
import sys
import tempfile
import time

import zmq
from jupyter_client import KernelManager
from jupyter_client.session import Session

REPO = pathlib.Path(__file__).resolve().parents[1]

CELLS = [
    "for i in range(3000):\n    print(i, flush=True)",
    "import sys\nfor i in range(500):\n    print('warning', i, file=sys.stderr, flush=True)",
    "from IPython.display import display, HTML\n"
    "for i in range(300):\n    display(HTML(f'<table><tr><td>{i}</td></tr></table>'))",
    *[f"{i} * 2" for i in range(300)],
    *["1 / 0" for _ in range(100)],
]


def record(path):
    """Runs CELLS in a real kernel and writes every IOPub message's raw frames to `path`.
    Returns (key, message count, message types seen)."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    info = km.get_connection_info()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.connect(f"tcp://{info['ip']}:{info['iopub_port']}")
    time.sleep(0.5)  # subscription propagation
    messages = []
    for code in CELLS:
        msg_id = kc.execute(code)
        while True:  # until this cell's idle reached the client...
            msg = kc.get_iopub_msg(timeout=60)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                break
        while sub.poll(200):  # ...and our socket has everything up to it
            messages.append(sub.recv_multipart())
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    sub.close()
    ctx.term()
    with open(path, "wb") as f:
        for frames in messages:
            f.write(struct.pack("<I", len(frames)))
            for frame in frames:
                f.write(struct.pack("<I", len(frame)))
                f.write(frame)
    types = {}
    for frames in messages:
        i = frames.index(b"<IDS|MSG>")
        t = json.loads(frames[i + 2])["msg_type"]
        types[t] = types.get(t, 0) + 1
    return info["key"], len(messages), types, messages


def python_session_rate(messages, key, seconds):
    n = 0
    passes = 0
    start = time.perf_counter()
    while True:
        session = Session(key=key, signature_scheme="hmac-sha256")  # fresh digest history
        for frames in messages:
            _, rest = session.feed_identities(frames, copy=True)
            session.deserialize(rest, content=True, copy=True)
            n += 1
        passes += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed, passes


def python_minimal_rate(messages, key, seconds):
    n = 0
    start = time.perf_counter()
    while True:
        seen = set()
        for frames in messages:
            i = frames.index(b"<IDS|MSG>")
            signature, parts = frames[i + 1], frames[i + 2:i + 6]
            h = hmac.new(key, digestmod=hashlib.sha256)
            for p in parts:
                h.update(p)
            if not hmac.compare_digest(signature, h.hexdigest().encode()) or signature in seen:
                raise AssertionError("recording does not verify")
            seen.add(signature)
            [json.loads(p) for p in parts]
            n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def no_loss(binary, workdir, lines):
    """A watched kernel prints `lines` lines, one flush each; returns what the front end and
    the watchdog each counted."""
    prefix = workdir / "prefix"
    reports = workdir / "reports"
    env = dict(os.environ, JUPYTER_PATH=str(prefix / "share" / "jupyter"),
               KERNEL_WATCHDOG_REPORT_DIR=str(reports), JUPYTER_RUNTIME_DIR=str(workdir / "rt"))
    subprocess.run([binary, "kernelspec", "wrap", "python3", "--prefix", str(prefix), "--name",
                    "python3-bench"], check=True, env=env, capture_output=True)
    os.environ.update(env)
    km = KernelManager(kernel_name="python3-bench")
    km.start_kernel(env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        return count_without_loss(km, reports, lines)
    finally:
        if km.is_alive():
            km.shutdown_kernel(now=True)


def count_without_loss(km, reports, lines):
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    received = 0
    try:
        while True:  # whatever start-up left on IOPub
            kc.get_iopub_msg(timeout=0.5)
            received += 1
    except queue.Empty:
        pass
    msg_id = kc.execute(f"for i in range({lines}):\n    print(i, flush=True)")
    streams = 0
    t_first = t_last = None
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        received += 1
        if msg["msg_type"] == "stream":
            streams += 1
            t_last = time.perf_counter()
            t_first = t_first or t_last
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            break
    # Crash it, so that the watchdog writes down what it counted.
    kc.execute("import ctypes, time\ntime.sleep(0.3)\nctypes.string_at(0)")
    try:
        while True:
            kc.get_iopub_msg(timeout=2)
            received += 1
    except queue.Empty:
        pass
    deadline = time.monotonic() + 30
    while km.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    kc.stop_channels()
    (report_path,) = glob.glob(str(reports / "*.json"))
    report = json.loads(pathlib.Path(report_path).read_text())
    return {
        "stream_messages": streams,
        "kernel_publish_rate_per_s": (streams - 1) / (t_last - t_first) if streams > 1 else None,
        "front_end_received": received,
        "watchdog_believed": report["protocol"]["messages_seen"],
        "watchdog_dropped": report["protocol"]["dropped"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=str(REPO / "build"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--lines", type=int, default=20000, help="prints in the no-loss run")
    args = ap.parse_args()
    build = pathlib.Path(args.build_dir).resolve()
    bench = build / "bench" / "kwd-protocol-bench"
    binary = build / "kernel-watchdog"

    with tempfile.TemporaryDirectory(prefix="kwd-protocol-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        recording = tmp / "iopub.rec"
        key, count, types, messages = record(recording)
        key_file = tmp / "key"
        key_file.write_bytes(key)
        size = recording.stat().st_size
        print(f"recorded {count} IOPub messages from ipykernel ({size / count:.0f} bytes on "
              f"average): {json.dumps(dict(sorted(types.items(), key=lambda kv: -kv[1])))}")

        ours = json.loads(subprocess.run([str(bench), str(recording), str(key_file),
                                          str(args.seconds)], check=True, capture_output=True,
                                         text=True).stdout)
        session_rate, _ = python_session_rate(messages, key, args.seconds)
        minimal_rate = python_minimal_rate(messages, key, args.seconds)
        rate = ours["messages_per_second"]
        print(f"watchdog decoder (C++, 1 thread):        {rate:12,.0f} msg/s  "
              f"({ours['dropped']} dropped)")
        print(f"jupyter_client Session.deserialize:      {session_rate:12,.0f} msg/s")
        print(f"minimal Python (hmac + 4 x json.loads):  {minimal_rate:12,.0f} msg/s")
        print(f"ratio vs Session.deserialize:            {rate / session_rate:12.1f} x   "
              f"(target >= 20 x, >= 200,000 msg/s)")
        print(f"ratio vs minimal Python:                 {rate / minimal_rate:12.1f} x")
        wire = ours["through_zmq"]
        print(f"watchdog receive path (libzmq SUB over TCP loopback + decoder + cell "
              f"bookkeeping, publisher in the same process): {wire['messages_per_second']:,.0f} "
              f"msg/s, {wire['believed']} of {wire['messages']} believed, "
              f"{wire['dropped']} dropped")

        loss = no_loss(str(binary), tmp / "noloss", args.lines)
        print(f"no loss: kernel printed {loss['stream_messages']} stream messages at "
              f"{loss['kernel_publish_rate_per_s'] or 0:,.0f}/s; front end received "
              f"{loss['front_end_received']} IOPub messages, watchdog believed "
              f"{loss['watchdog_believed']}, dropped {loss['watchdog_dropped'] or 'none'}")


if __name__ == "__main__":
    main()
