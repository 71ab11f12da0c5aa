"""A real Jupyter Server (or JupyterLab, which is one) from the framework virtualenv with the
package's extension enabled the way an installed wheel enables it: the wheel installed with
`pip --target` (test_python_package's `package` fixture), its etc/jupyter and share/jupyter on
the server's Jupyter paths. Kernels: `python3` under the kernel-watchdog provisioner (with a
memory limit), `unwatched` without it. Shared by test_jupyter_extension and
test_jupyterlab_ui."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from conftest import KWD_BINARY
from framework_corpus import VENV_PYTHON

TOKEN = "kwd-test-token"
LIMIT = 400 * 1024 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The server (`app`: the module that starts it, jupyter_server or jupyterlab) in `root`:
    notebooks in root/notebooks, its log in root/server.log."""

    def __init__(self, root, env, app="jupyter_server"):
        self.env = env
        self.reports = Path(env["KERNEL_WATCHDOG_REPORT_DIR"])
        self.root = root
        self.notebooks = root / "notebooks"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(root / "server.log", "w")
        self.proc = subprocess.Popen(
            [str(VENV_PYTHON), "-m", app, "--no-browser", f"--port={self.port}",
             "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
             "--ServerApp.allow_unauthenticated_access=False", "--allow-root",
             f"--ServerApp.root_dir={root / 'notebooks'}"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                self.get("api/status")
                return
            except (urllib.error.URLError, ConnectionError):
                assert self.proc.poll() is None, (root / "server.log").read_text()
                time.sleep(0.2)
        raise AssertionError("the server did not start: " + (root / "server.log").read_text())

    def request(self, path, method="GET", body=None, token=TOKEN):
        headers = {"Authorization": f"token {token}"} if token else {}
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}/{path}", data=data, method=method,
                                     headers=headers)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()

    def get(self, path, token=TOKEN):
        status, headers, body = self.request(path, token=token)
        return json.loads(body) if headers.get("Content-Type", "").startswith(
            "application/json") else body

    def status_of(self, path, token=TOKEN):
        try:
            return self.request(path, token=token)[0]
        except urllib.error.HTTPError as e:
            return e.code

    def start_session(self, notebook, kernel="python3"):
        _, _, body = self.request("api/sessions", "POST", {
            "path": notebook, "type": "notebook", "name": notebook, "kernel": {"name": kernel}})
        return json.loads(body)["kernel"]["id"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        # A kernel the server was restarting as it stopped outlives it (seen: a `run` and its
        # kernel, restarted after a test's crash, still there 14 minutes later, in every daemon's
        # count of the user's kernels). Whatever still runs with a file of this server's is ended.
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any((str(self.root) + "/").encode() in arg for arg in argv):
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass


def server_env(tmp_path, package):
    kernels = tmp_path / "jupyter" / "kernels"
    for name, provisioner in (("python3", "kernel-watchdog-provisioner"),
                              ("unwatched", "local-provisioner")):
        (kernels / name).mkdir(parents=True)
        (kernels / name / "kernel.json").write_text(json.dumps({
            "argv": [str(VENV_PYTHON), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": name, "language": "python",
            "metadata": {"kernel_provisioner": {"provisioner_name": provisioner}}}))
    (tmp_path / "notebooks").mkdir()
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "KERNEL_WATCHDOG", "PYTEST"))}
    env.update(
        PYTHONPATH=str(package), KERNEL_WATCHDOG_BINARY=KWD_BINARY,
        # The wheel's data files: its jupyter-config turns the extension on.
        JUPYTER_CONFIG_PATH=str(package / "etc" / "jupyter"),
        JUPYTER_PATH=f"{tmp_path / 'jupyter'}:{package / 'share' / 'jupyter'}",
        JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"), HOME=str(tmp_path),
        XDG_RUNTIME_DIR=str(runtime), TMPDIR=str(tmp_path),
        KERNEL_WATCHDOG_REPORT_DIR=str(tmp_path / "reports"),
        KERNEL_WATCHDOG_RUN_OPTIONS=f"--memory-limit={LIMIT}")
    return env


async def execute_on_websocket(server, kernel_id, code, events=None):
    """Sends one execute_request on the kernel's websocket, as JupyterLab does; with `events`
    (a list), also subscribes to the server's event bus first and fills the list."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    headers = {"Authorization": f"token {TOKEN}"}
    ws_url = server.url.replace("http", "ws")
    bus = None
    if events is not None:
        bus = await websocket_connect(HTTPRequest(f"{ws_url}/api/events/subscribe",
                                                  headers=headers))
    kernel = await websocket_connect(HTTPRequest(
        f"{ws_url}/api/kernels/{kernel_id}/channels?session_id={uuid.uuid4()}", headers=headers))
    msg_id = uuid.uuid4().hex
    kernel.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                   "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    return kernel, bus


def wait_for(predicate, timeout=60, what="it"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen in {timeout} s")
