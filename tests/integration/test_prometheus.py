"""The alerts and the dashboard (deploy/prometheus, deploy/grafana) on a real Prometheus.

Debian's Prometheus, on loopback with a configuration written here (a 1 s scrape and rule
evaluation, the rules file loaded), scrapes a real `kernel-watchdog daemon` that watches real
ipykernel kernels started by jupyter_client. One kernel runs in a memory cgroup of its own
(made below this test's, v1 or v2) and grows toward its limit: the rules' about-to-hit-its-limit
alert must be active in /api/v1/alerts while the kernel still lives; then the kernel goes over
and the OOM killer ends it, and the deaths recording rule and alert must name the cause and
the report. The other kernel holds GPU memory beside it on a nearly full GPU (the fake
libnvidia-ml.so.1 of tests/CMakeLists.txt, NVML's ABI, read through the daemon's dlopen path):
the contention alert must be pending. A report the store cannot take fires its alert.
Every PromQL expression of every rule and dashboard panel is evaluated against that
Prometheus, and each must return series for these kernels at the moment it is meant to.
promtool checks the rules, runs their unit tests (deploy/prometheus/tests.yml) and lints a
real scrape; the dashboard's panels are drawn from the test's data (render_panels.py).

The daemon sees every kernel of this user, including those of tests running beside this one:
every check here is about this test's own kernels, or about series that are there whatever
others do."""
import importlib.util
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

from conftest import KWD_BUILD_DIR, REPO_ROOT, Watched, load_reports
from test_daemon import Daemon, world  # noqa: F401 (world is a fixture)

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="needs Debian's prometheus package (prometheus, promtool): scripts/setup.sh installs it")

MiB = 1 << 20
LIMIT = 400 * MiB
RULES_DIR = REPO_ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "kernel-watchdog.rules.yml"
PROMETHEUS_RULE = REPO_ROOT / "deploy" / "kubernetes" / "monitoring" / "prometheusrule.yaml"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "kernel-watchdog.json"
FAKE_NVML = pathlib.Path(KWD_BUILD_DIR) / "fake-nvml" / "current" / "libnvidia-ml.so.1"
GROWING, GPU = "work/grow.ipynb", "work/gpu.ipynb"


def renderer():
    spec = importlib.util.spec_from_file_location(
        "render_panels", REPO_ROOT / "deploy" / "grafana" / "render_panels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rules():
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


# --- the files themselves ------------------------------------------------------------------

def test_promtool_checks_the_rules_and_runs_their_unit_tests():
    check = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules())} rules found" in check.stdout
    unit = subprocess.run([PROMTOOL, "test", "rules", "tests.yml"], cwd=RULES_DIR,
                          capture_output=True, text=True, timeout=60)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr
    # Every alert has a unit test in which it fires, and one in which a series like those
    # that fire it does not (exp_alerts: [] at some time, or fewer alerts than series).
    tests = yaml.safe_load((RULES_DIR / "tests.yml").read_text())["tests"]
    firing = {t["alertname"] for case in tests for t in case.get("alert_rule_test", [])
              if t.get("exp_alerts")}
    assert firing == {r["alert"] for r in rules() if "alert" in r}


def test_every_alert_has_its_section_in_the_docs_and_a_severity():
    headings = {line[3:].strip().lower() for line in
                (REPO_ROOT / "docs" / "alerts.md").read_text().splitlines()
                if line.startswith("## ")}
    for r in rules():
        if "alert" not in r:
            continue
        url = r["annotations"]["runbook_url"]
        assert url == "https://github.com/kernel-watchdog/kernel-watchdog/blob/main/docs/" \
            f"alerts.md#{r['alert'].lower()}", url
        assert r["alert"].lower() in headings, r["alert"]
        assert r["labels"]["severity"] in ("info", "warning", "critical")


def test_the_prometheusrule_holds_the_rules_file_unchanged():
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"], \
        "deploy/kubernetes/monitoring/prometheusrule.yaml differs from the rules file: " \
        "make it again with deploy/prometheus/prometheusrule.py"
    kustomization = yaml.safe_load(PROMETHEUS_RULE.with_name("kustomization.yaml").read_text())
    assert PROMETHEUS_RULE.name in kustomization["resources"]


def test_the_dashboard_is_importable_as_it_is():
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"cluster", "node", "namespace", "notebook"} <= set(variables)
    # No datasource named by a UID of one Grafana: every reference is the variable.
    uids = re.findall(r'"uid":\s*("[^"]*"|null)', text)
    assert uids and set(uids) == {'"${datasource}"'}
    assert "uid" not in dashboard and "__inputs" not in dashboard
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in renderer().panels_of(dashboard):
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
    titles = " | ".join(p["title"] for p in dashboard["panels"])
    for wanted in ("Kernels by state", "Memory per kernel", "Time to limit", "deaths by cause",
                   "GPU memory per kernel", "GPU memory per node", "Daemon CPU",
                   "Daemon resident memory"):
        assert wanted.lower() in titles.lower(), wanted


# --- a real Prometheus, a real daemon, real kernels ----------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, tmp, target):
        self.url = f"http://127.0.0.1:{free_port()}"
        config = tmp / "prometheus.yml"
        # The labels a Kubernetes scrape gives a daemon: the ServiceMonitor's `node`, and the
        # `cluster` a federated or remote-written setup adds.
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "kernel-watchdog", "static_configs": [
                {"targets": [target], "labels": {"node": "test-node", "cluster": "test"}}]}]}))
        self.log = tmp / "prometheus.log"
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address={self.url.removeprefix('http://')}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Prometheus not ready: " + self.log.read_text()
            time.sleep(0.1)

    def api(self, path, **params):
        data = urllib.parse.urlencode(params).encode() if params else None
        try:
            with urllib.request.urlopen(self.url + path, data=data, timeout=10) as r:
                answer = json.loads(r.read())
        except urllib.error.HTTPError as e:  # a query Prometheus refuses: 400 with its error
            answer = json.loads(e.read())
        assert answer["status"] == "success", (path, params, answer)
        return answer["data"]

    def query(self, expr):
        return self.api("/api/v1/query", query=expr)["result"]

    def alerts(self, name, **labels):
        return [a for a in self.api("/api/v1/alerts")["alerts"]
                if a["labels"]["alertname"] == name and
                all(a["labels"].get(k) == v for k, v in labels.items())]

    def wait_for(self, what, check, timeout=30, alive=lambda: True):
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            assert alive(), f"waiting for {what}: the kernel died first"
            assert time.monotonic() < deadline, f"waiting for {what}: " + self.log.read_text()
            time.sleep(0.25)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class MemoryCgroup:
    """A memory cgroup below this test's own (cgroup v1's memory hierarchy, else v2's unified
    one with the memory controller delegated), with a limit and no swap."""

    def __init__(self, name, limit):
        lines = pathlib.Path("/proc/self/cgroup").read_text().splitlines()
        v1 = [l.split(":", 2)[2] for l in lines if "memory" in l.split(":", 2)[1].split(",")]
        if v1:
            self.dir = pathlib.Path("/sys/fs/cgroup/memory" + v1[0]) / name
            self.dir.mkdir()
            (self.dir / "memory.limit_in_bytes").write_text(str(limit))
            memsw = self.dir / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # swap counted too: an OOM kill, not a thrashing kernel
                memsw.write_text(str(limit))
            return
        unified = [l.split(":", 2)[2] for l in lines if l.startswith("0::")]
        parent = pathlib.Path("/sys/fs/cgroup" + unified[0]) if unified else None
        assert parent and "memory" in (parent / "cgroup.controllers").read_text().split(), \
            "no memory cgroup controller here (v1 memory hierarchy, or v2 with memory)"
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            try:
                (parent / "cgroup.subtree_control").write_text("+memory")
            except OSError as e:  # EBUSY: processes live in it (the no-internal-processes rule)
                pytest.fail(f"cannot delegate the memory controller below {parent}: {e}; run "
                            "the test in a cgroup of its own (systemd-run --scope ...)")
        self.dir = parent / name
        self.dir.mkdir()
        (self.dir / "memory.max").write_text(str(limit))
        if (self.dir / "memory.swap.max").exists():
            (self.dir / "memory.swap.max").write_text("0")

    def remove(self):
        for _ in range(100):
            pids = (self.dir / "cgroup.procs").read_text().split()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        self.dir.rmdir()


def limited_kernelspec(world, cgroup):
    """A kernelspec whose kernel enters the cgroup before it execs ipykernel: the daemon finds
    a plain ipykernel, in a cgroup with a limit (as a container's kernel is)."""
    spec = world["prefix"] / "share" / "jupyter" / "kernels" / "python3-limited"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/bin/sh", "-c",
                 f'echo $$ > {cgroup.dir}/cgroup.procs && '
                 f'exec {sys.executable} -m ipykernel_launcher -f "$0"', "{connection_file}"],
        "display_name": "Python 3 (limited)", "language": "python"}))
    return spec.name


def kernel_id(kernel):
    return pathlib.Path(kernel.km.connection_file).stem.removeprefix("kernel-")


# Every recording rule, alert and dashboard panel, and when its expression must return series
# (each is evaluated without error at every phase): "running" while the kernels run (the
# growing kernel near its limit, two kernels on the GPU), "dead" once the growing kernel died
# (its own series gone then, and the GPU shared no more), "quiet" never here (alerts that this
# test does not bring about; their firing is tests.yml's). A value "<phase>:<label>=<value>"
# says which series must be among them; "<phase>:" that there must be some.
MEANT = {
    "kernel_watchdog:kernel_deaths:increase5m": "dead:cause=oom_killed_cgroup",
    "kernel_watchdog:kernel_deaths:increase1h": "dead:cause=oom_killed_cgroup",
    "kernel_watchdog:kernel_memory_limit_usage:ratio": "running:kernel=growing",
    "KernelMemoryLimitNear": "running:kernel=growing",
    "KernelDied": "dead:cause=oom_killed_cgroup",
    "KernelDeathsHighRate": "quiet",
    "KernelDeathBurstOnNode": "quiet",
    "KernelDeathBurstInNamespace": "quiet",
    "KernelNodeRepeatedCause": "quiet",
    "KernelGpuMemoryContention": "running:node=test-node",
    "KernelWatchdogDown": "quiet",
    "KernelWatchdogAbsent": "quiet",
    "KernelWatchdogStalled": "quiet",
    "KernelWatchdogReportsNotWritten": "quiet",
    "Kernels watched": "running:",
    "Deaths in the time range": "running:",
    "Kernels under 5 min from a limit": "running:",
    "Daemons": "running:",
    "Reports not written": "running:",
    "Kernels left to their launcher": "running:",
    "Kernels by state, per node and namespace": "running:node=test-node",
    "Memory per kernel, against its cgroup limit": "running:kernel=growing",
    "Share of each limit in use, per kernel": "running:kernel=gpu",
    "Time to limit": "running:kernel=growing",
    "Kernels now": "running:kernel=growing",
    "Kernel deaths by cause (each in the 5 min before)": "dead:cause=oom_killed_cgroup",
    "Newest death of each cause, with its report": "dead:cause=oom_killed_cgroup",
    "GPU memory per kernel": "running:kernel=gpu",
    "GPU memory per node (all its devices)": "running:node=test-node",
    "Daemon CPU": "running:node=test-node",
    "Daemon resident memory": "running:node=test-node",
    "Reports written and not written": "running:node=test-node",
}


def expressions():
    """(name, [PromQL]) of every rule and dashboard panel, the panels' with Grafana's
    variables at their All value and a 15 s rate interval."""
    out = [(r.get("record") or r["alert"], [r["expr"]]) for r in rules()]
    render = renderer()
    dashboard = json.loads(DASHBOARD.read_text())
    variables = render.variables_of(dashboard)
    for p in render.panels_of(dashboard):
        out.append((p["title"], [render.expand(t["expr"], variables, 600, 15)
                                 for t in p["targets"]]))
    return out


def check_expressions(prom, phase, kernels, timeout=15):
    """Each expression evaluates without error; those meant to have series now have them,
    within `timeout` (a rate needs two scrapes of the series, an alert an evaluation)."""
    assert set(MEANT) == {name for name, _ in expressions()}, "MEANT names every expression"
    deadline = time.monotonic() + timeout
    while True:
        missing = []
        for name, exprs in expressions():
            results = [s for e in exprs for s in prom.query(e)]  # prom.query asserts success
            when, _, want = MEANT[name].partition(":")
            if when != phase:
                continue
            key, _, value = want.partition("=")
            if key == "kernel":
                key, value = "kernel_id", kernels[value]
            if not any(not key or s["metric"].get(key) == value for s in results):
                missing.append((name, want, results[:3]))
        if not missing:
            return
        assert time.monotonic() < deadline, \
            f"{phase}: expressions without the series they are meant to have: {missing}"
        time.sleep(0.5)


def grow_until(go_file):
    """A cell that grows 40 MiB/s to 200 MiB, then 2 MiB/s (its limit a minute away) until
    told to go, then asks for more than the limit at once: the OOM killer's."""
    return (
        "import os, time\n"
        "held = []\n"
        f"while not os.path.exists({str(go_file)!r}):\n"
        "    held.append(b'\\1' * (4 << 20))\n"
        "    time.sleep(0.1 if len(held) < 50 else 2.0)\n"
        f"held.append(b'\\1' * {2 * LIMIT})\n")


def test_alerts_and_panels_on_a_real_prometheus_before_and_after_an_oom_kill(world, tmp_path,
                                                                            monkeypatch):
    nvml_script = tmp_path / "nvml-script"
    gpu = ("driver=550.54.15\ndevice.0.name=NVIDIA H100 80GB HBM3\n"
           "device.0.uuid=GPU-11111111-2222-3333-4444-555555555555\n"
           "device.0.total=85899345920\ndevice.0.used=81604378624\n")  # 95% in use
    nvml_script.write_text(gpu)
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(nvml_script))
    cgroup = MemoryCgroup(f"kwd-prometheus-test-{os.getpid()}", LIMIT)
    d = prom = None
    started = []
    try:
        d = Daemon(world, ["--metrics-address", "127.0.0.1:0", "--nvml-library", FAKE_NVML])
        metrics_url = d.status()["daemon"]["metrics_url"]
        prom = Prometheus(tmp_path, metrics_url.removeprefix("http://").removesuffix("/metrics"))
        t0 = time.time()
        env = dict(os.environ, JPY_SESSION_NAME=GROWING)
        growing = Watched(limited_kernelspec(world, cgroup), env)
        started.append(growing)
        on_gpu = Watched("python3", dict(os.environ, JPY_SESSION_NAME=GPU))
        started.append(on_gpu)
        kernels = {"growing": kernel_id(growing), "gpu": kernel_id(on_gpu)}
        assert str(growing.km.provisioner.process.pid) in \
            (cgroup.dir / "cgroup.procs").read_text().split()
        tmp = nvml_script.with_suffix(".tmp")
        tmp.write_text(gpu + f"device.0.process={growing.km.provisioner.process.pid}:{30 << 30}\n"
                       f"device.0.process={on_gpu.km.provisioner.process.pid}:{40 << 30}\n")
        tmp.replace(nvml_script)
        for k in (growing, on_gpu):
            d.kernel(k.km.connection_file)
            k.execute("x = 1")  # a status on IOPub: the daemon's start-up of the kernel is over

        # Before the kill: the kernel grows toward its cgroup's limit, and the alert is
        # pending (its `for` is a minute) while the kernel lives.
        go = tmp_path / "go"
        growing.kc.execute(grow_until(go))
        if os.environ.get("KWD_DASHBOARD_PNG"):
            # For the README's picture, a longer climb than the test needs: the daemon
            # publishes every 5 s, and 15 s of data draw thin panels.
            time.sleep(30)
        near = prom.wait_for(
            "KernelMemoryLimitNear", lambda: prom.alerts(
                "KernelMemoryLimitNear", kernel_id=kernels["growing"], limit="cgroup"),
            alive=growing.km.is_alive)
        assert near[0]["state"] in ("pending", "firing")
        assert near[0]["labels"]["notebook"] == GROWING
        assert near[0]["labels"]["node"] == "test-node"
        assert 0 < float(near[0]["value"]) < 300
        remedy = near[0]["annotations"]["remedy"]
        assert near[0]["annotations"]["runbook_url"].endswith(
            "docs/alerts.md#kernelmemorylimitnear")
        # Two kernels on a GPU 95% full: contention, pending for its 5 minutes.
        contention = prom.wait_for(
            "KernelGpuMemoryContention", lambda: prom.alerts("KernelGpuMemoryContention",
                                                             node="test-node"))
        assert contention[0]["state"] == "pending"
        prom.wait_for("the GPU kernel's series", lambda: prom.query(
            f'kernel_watchdog_kernel_gpu_memory_bytes{{kernel_id="{kernels["gpu"]}"}} > 0'))
        check_expressions(prom, "running", kernels)
        # The daemon's exposition as Prometheus's own linter reads it, every family present.
        with urllib.request.urlopen(metrics_url, timeout=10) as r:
            scrape = r.read()
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=scrape, capture_output=True,
                              timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        for family in ("kernel_watchdog_kernel_memory_limit_bytes",
                       "kernel_watchdog_kernel_time_to_memory_limit_seconds",
                       "kernel_watchdog_kernel_gpu_memory_bytes",
                       "kernel_watchdog_report_write_failures_total"):
            assert f"# TYPE {family} ".encode() in scrape, family
        assert growing.km.is_alive()

        # The kill: the kernel asks for more than its limit at once.
        go.touch()
        growing.wait_for_death(timeout=30)
        deadline = time.monotonic() + 20
        while not (mine := [r for r in load_reports(world["reports"])
                            if r["kernel"]["kernel_id"] == kernels["growing"]]):
            assert time.monotonic() < deadline, d.stop()
            time.sleep(0.1)
        report = mine[0]
        assert report["diagnosis"]["cause"] == "oom_killed_cgroup", report["diagnosis"]
        report_id = report["id"]
        # The daemon's first publication of the death holds the dead kernel no more (its RSS
        # of 0 and its last time to the limit were left there until the next one).
        def published_death():
            with urllib.request.urlopen(metrics_url, timeout=10) as r:
                text = r.read().decode()
            counted = re.search(r'^kernel_watchdog_kernel_deaths_total\{cause="oom_killed_cgroup"'
                                r'\} [1-9]', text, re.M)
            return text if counted else None
        text = prom.wait_for("the death in the daemon's metrics", published_death)
        assert f'kernel_id="{kernels["growing"]}"' not in text
        assert f'kernel_id="{kernels["gpu"]}"' in text
        # The alert's remedy is the report's, as far as an alert can say it before the death.
        (raise_limit,) = [r["text"] for r in report["diagnosis"]["remedies"]
                          if r["id"] == "oom.raise_cgroup_limit"]
        assert raise_limit.startswith(remedy.split(",")[0]), (remedy, raise_limit)

        # After the kill: the deaths expression shows the cause, and the alert the report.
        deaths = prom.wait_for("the death in the deaths expression", lambda: [
            s for s in prom.query('kernel_watchdog:kernel_deaths:increase5m > 0')
            if s["metric"]["cause"] == "oom_killed_cgroup"])
        assert float(deaths[0]["value"][1]) >= 1
        died = prom.wait_for("KernelDied with the report", lambda: prom.alerts(
            "KernelDied", cause="oom_killed_cgroup", report_id=report_id))
        assert died[0]["state"] == "firing" and died[0]["labels"]["notebook"] == GROWING
        assert report_id in died[0]["annotations"]["description"]
        check_expressions(prom, "dead", kernels)
        # The end of the dashboard's picture (the kernels, then the OOM kill), once the death
        # has been scraped a few times: the picture's last steps see it.
        prom.wait_for("three scrapes since the death", lambda: prom.query(
            'count_over_time(kernel_watchdog_kernel_deaths_total{cause="oom_killed_cgroup"}[1m])'
            ' >= 3'))
        t1 = time.time()

        # A report the store cannot take: its directory is a file now. The next death's
        # report goes to the fallback store, and the alert fires.
        world["reports"].rename(world["reports"].with_name("reports.moved"))
        world["reports"].write_text("not a directory\n")
        on_gpu.km.provisioner.process.send_signal(signal.SIGKILL)
        on_gpu.wait_for_death(timeout=30)
        prom.wait_for("KernelWatchdogReportsNotWritten", lambda: [
            a for a in prom.alerts("KernelWatchdogReportsNotWritten", node="test-node")
            if a["state"] == "firing"])

        # The dashboard's panels drawn from this Prometheus's data (the README's picture:
        # KWD_DASHBOARD_PNG=path).
        out = pathlib.Path(os.environ.get("KWD_DASHBOARD_PNG") or tmp_path / "dashboard.png")
        summary_file = tmp_path / "summary.json"
        drawn = subprocess.run(
            [sys.executable, str(REPO_ROOT / "deploy" / "grafana" / "render_panels.py"),
             "--prometheus", prom.url, "--start", str(t0), "--end", str(t1), "--out", str(out),
             "--summary", str(summary_file)], capture_output=True, text=True, timeout=120)
        assert drawn.returncode == 0, drawn.stderr
        assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        summary = json.loads(summary_file.read_text())
        empty = [title for title, n in summary.items() if n == 0]
        assert not empty, f"panels drawn without data: {empty}"
    finally:
        for k in started:
            k.close()
        if prom:
            prom.stop()
        if d:
            d.stop()
        cgroup.remove()


def test_an_oom_kill_is_reported_when_the_client_cleans_up_at_once(world):
    """nbclient (papermill, nbconvert) shuts its kernel manager down as soon as it finds the
    kernel dead, and the connection file goes with it. The daemon takes a death by SIGKILL
    followed by that clean-up for the manager's own kill (no report); one that the OOM killer
    made is reported all the same."""
    cgroup = MemoryCgroup(f"kwd-oom-cleanup-test-{os.getpid()}", LIMIT)
    d = k = None
    try:
        d = Daemon(world)
        k = Watched(limited_kernelspec(world, cgroup), dict(os.environ))
        d.kernel(k.km.connection_file)
        k.execute("x = 1")
        k.kc.execute("held = b'x' * (1 << 30)")
        k.wait_for_death(timeout=30)
        k.km.shutdown_kernel(now=True)
        assert not pathlib.Path(k.km.connection_file).exists()
        deadline = time.monotonic() + 20
        while not (mine := [r for r in load_reports(world["reports"])
                            if r["kernel"]["kernel_id"] == kernel_id(k)]):
            assert time.monotonic() < deadline, d.stop()
            time.sleep(0.1)
        assert mine[0]["diagnosis"]["cause"] == "oom_killed_cgroup", mine[0]["diagnosis"]
    finally:
        if k:
            k.close()
        if d:
            d.stop()
        cgroup.remove()
