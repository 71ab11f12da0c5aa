"""A stand-in kernel for the protocol tests, for what a real ipykernel cannot be made to do:
publish forged, truncated, oversized or CurveZMQ-encrypted IOPub traffic.

Run as the kernel under the watchdog (`kernel-watchdog run -- python3 iopub_publisher.py -f
CONNECTION_FILE --scenario NAME --result RESULT.json`). It binds an XPUB socket on the
connection file's iopub port (a CurveZMQ server with --server-secret-file), waits until the
watchdog has subscribed (XPUB hears subscriptions: no sleeping and hoping), publishes the
scenario, writes what it observed to RESULT.json and exits with status 3, so that the
watchdog writes a crash report holding its protocol counters.
"""
import argparse
import datetime
import hashlib
import hmac
import json
import os
import sys
import time
import uuid

import zmq

DELIM = b"<IDS|MSG>"


class Signer:
    def __init__(self, key, scheme="hmac-sha256"):
        self.key = key.encode()
        self.digest = getattr(hashlib, scheme.split("-", 1)[1])

    def sign(self, parts):
        if not self.key:
            return b""
        h = hmac.new(self.key, digestmod=self.digest)
        for p in parts:
            h.update(p)
        return h.hexdigest().encode()


def dumps(obj):
    return json.dumps(obj).encode()


def header(msg_type, msg_id=None):
    return {"msg_id": msg_id or uuid.uuid4().hex, "msg_type": msg_type, "username": "test",
            "session": "publisher", "version": "5.3",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}


def message(signer, msg_type, content, parent_id, buffers=()):
    parts = [dumps(header(msg_type)), dumps(header("execute_request", parent_id)), b"{}",
             dumps(content)]
    return [b"kernel.publisher." + msg_type.encode(), DELIM, signer.sign(parts), *parts,
            *buffers]


def wait_for_subscription(sock, timeout_s):
    """True once a subscription message (b'\\x01...') arrives within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sock.poll(50):
            if sock.recv().startswith(b"\x01"):
                return True
    return False


def watchdog_peak_rss_kb():
    """VmHWM of our parent, the watchdog: the most memory it ever held."""
    with open(f"/proc/{os.getppid()}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def cell(signer, request, count, code):
    return [message(signer, "status", {"execution_state": "busy"}, request),
            message(signer, "execute_input", {"code": code, "execution_count": count}, request)]


def scenario_forged(sock, signer, result):
    request = "request-1"
    good = cell(signer, request, 1, "print('believed')")
    for m in good:
        sock.send_multipart(m)
    forger = Signer("not-the-key")
    for i in range(3):  # signed with the wrong key
        sock.send_multipart(message(forger, "execute_input",
                                    {"code": f"FORGED-{i}", "execution_count": 99}, request))
    whole = message(signer, "stream", {"name": "stdout", "text": "TRUNCATED"}, request)
    sock.send_multipart(whole[:4])  # topic, delimiter, signature, header
    sock.send_multipart(whole[:6])  # ... parent, metadata, but no content
    sock.send_multipart([whole[0], *whole[2:]])  # no delimiter
    parts = [dumps(header("stream")), dumps(header("execute_request", request)), b"{}",
             b"\xff not json {"]
    sock.send_multipart([b"kernel.publisher.stream", DELIM, signer.sign(parts), *parts])
    unsigned = message(signer, "execute_input", {"code": "UNSIGNED", "execution_count": 98},
                       request)
    unsigned[2] = b""
    sock.send_multipart(unsigned)
    sock.send_multipart(good[1])  # a replay of a good message
    time.sleep(0.5)  # all of the above reaches the watchdog before the connection is cut

    # 100 MB in one frame: libzmq refuses it at the frame header and resets the connection;
    # the watchdog reconnects and subscribes again.
    big = message(signer, "display_data", {"data": {}, "metadata": {}}, request,
                  buffers=[b"\0" * (100 * 1024 * 1024)])
    sock.send_multipart(big, copy=False)
    result["resubscribed"] = wait_for_subscription(sock, 15)
    time.sleep(0.2)
    sock.send_multipart(message(signer, "stream", {"name": "stdout", "text": "after reset\n"},
                                request))
    sock.send_multipart(message(signer, "status", {"execution_state": "idle"}, request))
    result["sent_good"] = 4


def scenario_curve(sock, signer, result):
    for m in cell(signer, "request-curve", 1, "curve cell"):
        sock.send_multipart(m)
    sock.send_multipart(message(signer, "status", {"execution_state": "idle"}, "request-curve"))
    result["sent_good"] = 3


SCENARIOS = {"forged": scenario_forged, "curve": scenario_curve}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-f", dest="connection_file", required=True)
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    ap.add_argument("--result", required=True)
    # A file, not the key itself: a command line is public (and lands in the report's argv).
    ap.add_argument("--server-secret-file", help="CurveZMQ secret key: be a CurveZMQ server")
    ap.add_argument("--subscribe-timeout", type=float, default=20)
    args = ap.parse_args()
    with open(args.connection_file) as f:
        info = json.load(f)
    signer = Signer(info.get("key", ""), info.get("signature_scheme", "hmac-sha256"))

    ctx = zmq.Context()
    sock = ctx.socket(zmq.XPUB)
    sock.setsockopt(zmq.XPUB_VERBOSE, 1)
    sock.setsockopt(zmq.LINGER, 2000)
    if args.server_secret_file:
        with open(args.server_secret_file, "rb") as f:
            sock.curve_secretkey = f.read().strip()
        sock.curve_server = True
    sock.bind(f"tcp://{info['ip']}:{info['iopub_port']}")

    result = {"subscribed": wait_for_subscription(sock, args.subscribe_timeout)}
    SCENARIOS[args.scenario](sock, signer, result)
    time.sleep(0.5)  # let the watchdog read it all before we die
    result["watchdog_peak_rss_kb"] = watchdog_peak_rss_kb()
    with open(args.result, "w") as f:
        json.dump(result, f)
    sock.close()
    ctx.term()
    sys.stdout.flush()
    os._exit(3)


if __name__ == "__main__":
    main()
