"""`smoke -j auto`: notebooks packed by the memory they really use, in a real memory cgroup of
this machine with a real limit, real kernels allocating real memory, and the real OOM killer
when the packing is blind. Each run of smoke is started inside a fresh child of the test's own
memory cgroup (cgroup v1, as the CI machine has), so that the budget smoke finds is the limit
set here."""
import json
import os
import pathlib
import subprocess
import time
import uuid

import nbformat
import pytest

from conftest import KWD_BINARY, intervals, overlaps, own_memory_cgroup_dir

MiB = 1024 * 1024
LIMIT = 1536 * MiB
# A heavy notebook holds ~700 MiB at its highest (plus its kernel): two of them do not fit
# under the limit together, one fits beside several light ones.
HEAVY_MIB = 700


def why_not():
    base = own_memory_cgroup_dir()
    if os.geteuid() != 0 or base is None or not base.is_dir():
        return "needs root and a cgroup v1 memory hierarchy"
    return None


pytestmark = pytest.mark.skipif(why_not() is not None, reason=str(why_not()))


class Cgroup:
    """A child of the test's own memory cgroup with LIMIT, removed at the end."""

    def __init__(self):
        self.dir = own_memory_cgroup_dir() / f"kwd-sched-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir()
        (self.dir / "memory.limit_in_bytes").write_text(str(LIMIT))

    def join(self):
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def oom_kills(self):
        fields = dict(line.split() for line in (self.dir / "memory.oom_control").read_text().splitlines())
        return int(fields.get("oom_kill", 0))

    def remove(self):
        for pid in (self.dir / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        for _ in range(100):
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)


@pytest.fixture
def suite(tmp_path, monkeypatch):
    """suite(*args) runs smoke in a fresh limited cgroup, in tmp_path; -> (proc, cgroup)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    made = []

    def _run(*args, timeout=300):
        cgroup = Cgroup()
        made.append(cgroup)
        proc = subprocess.run([KWD_BINARY, "smoke", "--output-dir", str(tmp_path / "out"),
                               *map(str, args)], capture_output=True, text=True, timeout=timeout,
                              cwd=tmp_path, preexec_fn=cgroup.join)
        print(proc.stdout, proc.stderr)
        return proc, cgroup

    yield _run
    for cgroup in made:
        cgroup.remove()


def notebook(path, *cells, metadata=None):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3", "language": "python"}
    nb.metadata.update(metadata or {})
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))
    return path.name


def logged(name, log, body):
    """Cells that write when the notebook's work starts and ends into `log`."""
    return (f"import time\nopen({str(log)!r}, 'a').write('{name} start %f\\n' % time.time())",
            body,
            f"open({str(log)!r}, 'a').write('{name} end %f\\n' % time.time())")


def heavy(tmp_path, name, log, hold_s=2.0):
    # Grows 20 MiB at a time, as a notebook loading data does, and holds what it took.
    body = (f"held = []\nfor _ in range({HEAVY_MIB // 20}):\n"
            f"    held.append(b'x' * (20 << 20))\n    time.sleep(0.1)\n"
            f"time.sleep({hold_s})")
    return notebook(tmp_path / name, *logged(name, log, body))


def light(tmp_path, name, log, metadata=None):
    return notebook(tmp_path / name, *logged(name, log, "time.sleep(1)\nx = sum(range(10**6))"),
                    metadata=metadata)


def table_rows(stdout):
    """The scheduling table's rows: {notebook: "estimate peak GPU-peak wait requeues GPU"}."""
    lines = stdout.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("notebook ") and "requeues" in l)
    rows = {}
    for line in lines[head + 1:]:
        if not line.strip() or line.startswith("  "):
            continue
        name, rest = line.split(None, 1)
        rows[name] = rest
    return rows


def test_a_suite_that_blind_parallelism_gets_oom_killed_in_passes_under_auto_cold_and_warm(
        suite, tmp_path):
    log = tmp_path / "log"
    names = [heavy(tmp_path, "heavy0.ipynb", log), heavy(tmp_path, "heavy1.ipynb", log)]
    names += [light(tmp_path, f"light{i}.ipynb", log) for i in range(3)]
    # A history of the first format (notebook: seconds) still reads, and is rewritten whole.
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"light0.ipynb": 2.5}))

    # Blind: the two heavy ones start together, and the OOM killer takes one.
    blind, cgroup = suite("-j", "3", *names)
    assert blind.returncode == 2, blind.stdout
    assert "oom_killed_cgroup" in blind.stdout
    assert cgroup.oom_kills() >= 1

    # Cold (no peaks known): the never-seen start one at a time and learn; a heavy one caught
    # beside the other is stopped or OOM-killed and runs again alone, at most once.
    log.unlink()
    cold, cgroup = suite("-j", "auto", "--durations", history, "--store-durations", "--json", *names)
    assert cold.returncode == 0, cold.stderr
    assert "of the memory cgroup " + str(cgroup.dir) + " (memory.limit_in_bytes)" in cold.stderr
    assert "5 notebooks, at most" in cold.stderr and "0 of known peak, 5 never seen" in cold.stderr
    result = json.loads(cold.stdout)
    for nb in result["notebooks"]:
        assert nb["outcome"] == "passed"
        assert len(nb["scheduling"]["requeues"]) <= 1, nb
        # Admitted unknown, or, run again, by the peak seen before it was stopped.
        assert (nb["scheduling"]["estimate_bytes"] is None) == (not nb["scheduling"]["requeues"])
    ran = intervals(log)
    assert not overlaps(ran["heavy0.ipynb"], ran["heavy1.ipynb"])
    stored = json.loads(history.read_text())
    assert stored["kernel-watchdog-history"] == 2
    for name in names:
        assert stored["notebooks"][name]["peak_rss"] > 0
        assert stored["notebooks"][name]["seconds"] > 0
    assert stored["notebooks"]["heavy0.ipynb"]["peak_rss"] > HEAVY_MIB * MiB

    # Warm: packed by the peaks just learnt; nothing is stopped, nothing OOM-killed.
    log.unlink()
    warm, cgroup = suite("-j", "auto", "--durations", history, *names)
    assert warm.returncode == 0, warm.stderr
    assert "5 of known peak, 0 never seen" in warm.stderr
    assert "predicted" in warm.stderr and "lower bound" in warm.stderr
    assert "runs again alone" not in warm.stderr
    assert cgroup.oom_kills() == 0
    ran = intervals(log)
    assert not overlaps(ran["heavy0.ipynb"], ran["heavy1.ipynb"])
    # The light ones ran beside a heavy one, not after both.
    assert any(overlaps(ran[f"light{i}.ipynb"], ran["heavy0.ipynb"]) or
               overlaps(ran[f"light{i}.ipynb"], ran["heavy1.ipynb"]) for i in range(3))
    rows = table_rows(warm.stdout)
    assert set(rows) == set(names)
    for name in names:
        estimate = stored["notebooks"][name]["peak_rss"]
        # estimate, peak, GPU peak (none), wait, requeues, GPU (none)
        cols = rows[name].split()
        assert cols[0] + " " + cols[1] == format_bytes(estimate), rows[name]
        assert cols[-2:] == ["0", "-"], rows[name]


def format_bytes(n):
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    value, unit = float(n), 0
    while abs(value) >= 1024 and unit + 1 < len(units):
        value /= 1024
        unit += 1
    return f"{value:.0f} B" if unit == 0 else f"{value:.1f} {units[unit]}"


def test_a_notebook_that_outgrows_its_recorded_peak_is_stopped_before_the_oom_killer(suite,
                                                                                    tmp_path):
    log = tmp_path / "log"
    names = [heavy(tmp_path, "heavy0.ipynb", log), heavy(tmp_path, "heavy1.ipynb", log)]
    # A history that lies: both said to peak at 100 MiB, so both start at once.
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"kernel-watchdog-history": 2, "notebooks": {
        n: {"seconds": 6, "peak_rss": 100 * MiB} for n in names}}))
    proc, cgroup = suite("-j", "auto", "--durations", history, "--json", *names)
    assert proc.returncode == 0, proc.stderr
    assert "runs again alone" in proc.stderr and "stopped at" in proc.stderr
    assert cgroup.oom_kills() == 0
    assert not list((tmp_path / "out" / "reports").glob("*.json"))  # no crash report
    requeues = [len(nb["scheduling"]["requeues"]) for nb in json.loads(proc.stdout)["notebooks"]]
    assert sorted(requeues) == [0, 1]
    ran = intervals(log)  # the stopped run never wrote its end
    assert not overlaps(ran["heavy0.ipynb"], ran["heavy1.ipynb"])


def test_a_notebook_bigger_than_the_budget_runs_alone(suite, tmp_path):
    log = tmp_path / "log"
    # Declared in its metadata (no history): more than the whole limit.
    big = light(tmp_path, "big.ipynb", log, metadata={"kernel_watchdog": {"peak_memory": "3G"}})
    others = [light(tmp_path, f"light{i}.ipynb", log) for i in range(3)]
    proc, _ = suite("-j", "4", "--memory-aware", big, *others)
    assert proc.returncode == 0, proc.stderr
    assert "big.ipynb peaked at 3.0 GiB, more than the whole budget: it runs alone" in proc.stderr
    ran = intervals(log)
    assert len(ran) == 4
    for name in others:
        assert not overlaps(ran["big.ipynb"], ran[name]), (name, ran)


def test_j_auto_refuses_what_is_not_a_count(suite, tmp_path):
    proc, _ = suite("-j", "lots", notebook(tmp_path / "a.ipynb", "1"))
    assert proc.returncode == 4
    assert "-j: 'lots' is not a number from 1 to 256, nor auto" in proc.stderr


def test_gpus_through_fake_nvml_each_kernel_sees_only_its_gpu_and_none_is_over_packed(
        tmp_path, monkeypatch):
    """Placement on GPUs with the fake libnvidia-ml.so.1 (NVML's ABI, through the same dlopen
    path): two visible devices of different free memory and a third the inherited
    CUDA_VISIBLE_DEVICES hides (by UUID). The history says how much GPU memory each notebook
    takes; each kernel writes what it was given."""
    from conftest import KWD_BUILD_DIR
    GiB = 1024 * MiB
    library = pathlib.Path(KWD_BUILD_DIR) / "fake-nvml" / "current" / "libnvidia-ml.so.1"
    script = tmp_path / "nvml-script"
    big, small, hidden = "GPU-aaaaaaaa-0000", "GPU-bbbbbbbb-1111", "GPU-cccccccc-2222"
    script.write_text(
        "driver=550.54.15\n"
        f"device.0.name=Fake A\ndevice.0.uuid={big}\ndevice.0.total={12 * GiB}\ndevice.0.used=0\n"
        f"device.1.name=Fake B\ndevice.1.uuid={small}\ndevice.1.total={6 * GiB}\ndevice.1.used=0\n"
        f"device.2.name=Fake C\ndevice.2.uuid={hidden}\ndevice.2.total={80 * GiB}\n"
        "device.2.used=0\n")
    budget = {big: 12 * GiB - 512 * MiB, small: 6 * GiB - 512 * MiB}
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(script))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{small},{big}")
    log = tmp_path / "log"
    needs = {"g0.ipynb": 8 * GiB, "g1.ipynb": 8 * GiB, "g2.ipynb": 4 * GiB, "g3.ipynb": 4 * GiB,
             "g4.ipynb": 1 * GiB}
    for name in needs:
        notebook(tmp_path / name,
                 "import os, time\n"
                 f"open({str(log)!r}, 'a').write('{name} %s %s %f\\n' % ("
                 "os.environ['CUDA_VISIBLE_DEVICES'], os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'],"
                 " time.time()))",
                 "time.sleep(2)",
                 f"open({str(log)!r}, 'a').write('{name} end - %f\\n' % time.time())")
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"kernel-watchdog-history": 2, "notebooks": {
        n: {"seconds": 3, "peak_rss": 80 * MiB, "peak_gpu": need} for n, need in needs.items()}}))
    proc = subprocess.run([KWD_BINARY, "smoke", "--output-dir", str(tmp_path / "out"), "-j", "5",
                           "--memory-aware", "--nvml-library", str(library), "--durations",
                           str(history), "--json", *needs], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    print(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert f"{small} (Fake B) 5.5 GiB; {big} (Fake A) 11.5 GiB" in proc.stderr
    assert hidden not in proc.stderr
    given, span = {}, {}
    for line in log.read_text().splitlines():
        name, what, preallocate, t = line.split()
        if what == "end":
            span[name] = (span[name][0], float(t))
        else:
            given[name] = what
            assert preallocate == "false"
            span[name] = (float(t), None)
    assert set(given) == set(needs)
    assert given["g0.ipynb"] == given["g1.ipynb"] == big  # only the big one fits them
    assert set(given.values()) <= {big, small}
    # At each start, what the notebooks running on that GPU need fits its free memory.
    for name, (start, _) in span.items():
        on_gpu = [n for n, (s, e) in span.items() if given[n] == given[name] and s <= start < e]
        assert sum(needs[n] for n in on_gpu) <= budget[given[name]], (name, on_gpu, given)
    for nb in json.loads(proc.stdout)["notebooks"]:
        assert nb["scheduling"]["gpu"] == given[nb["path"]]


def test_a_gpu_allocation_refused_beside_another_notebook_runs_again_alone(
        tmp_path, monkeypatch):
    """Seen on an H200 (tests/gpu/packing_check.py): notebooks never seen before start 1.5 s
    apart, and a framework asks for its GPU memory in one allocation that is refused at once,
    before any sample could show it coming. PyTorch raises it to the cell. Here the one fake
    GPU (NVML's ABI) stands in for the device, and the notebook raises what PyTorch 2.x raised
    there, whenever the other notebook is running beside it; smoke must run it again alone,
    where it passes, and say why."""
    from conftest import KWD_BUILD_DIR
    GiB = 1024 * MiB
    library = pathlib.Path(KWD_BUILD_DIR) / "fake-nvml" / "current" / "libnvidia-ml.so.1"
    script = tmp_path / "nvml-script"
    script.write_text("driver=550.54.15\ndevice.0.name=Fake A\ndevice.0.uuid=GPU-aaaaaaaa-0000\n"
                      f"device.0.total={8 * GiB}\ndevice.0.used=0\n")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(script))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    running, done = tmp_path / "holder-running", tmp_path / "holder-done"
    notebook(tmp_path / "holder.ipynb",
             f"import pathlib, time\nmark = pathlib.Path({str(running)!r})\nmark.touch()",
             f"time.sleep(4)\nmark.unlink()\npathlib.Path({str(done)!r}).touch()")
    refused = ("CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of "
               "8.00 GiB of which 1.50 GiB is free. Process 4242 has 6.00 GiB memory in use. "
               "Including non-PyTorch memory, this process has 518.00 MiB memory in use.")
    notebook(tmp_path / "heavy.ipynb",
             "import pathlib, time\n"
             f"mark, done = pathlib.Path({str(running)!r}), pathlib.Path({str(done)!r})\n"
             "deadline = time.time() + 30\n"
             "while not (mark.exists() or done.exists()) and time.time() < deadline:\n"
             "    time.sleep(0.05)",
             "class OutOfMemoryError(RuntimeError): pass\n"
             f"if mark.exists():\n    raise OutOfMemoryError({refused!r})")
    proc = subprocess.run([KWD_BINARY, "smoke", "--output-dir", str(tmp_path / "out"), "-j", "2",
                           "--memory-aware", "--nvml-library", str(library), "--json",
                           "heavy.ipynb", "holder.ipynb"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    print(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    said = ("heavy.ipynb: its framework could not get GPU memory while other notebooks held the "
            "same GPU (smoke's packing, not the notebook's fault); it runs again alone")
    assert said in proc.stderr
    by_name = {pathlib.Path(nb["path"]).name: nb for nb in json.loads(proc.stdout)["notebooks"]}
    assert len(by_name["heavy.ipynb"]["scheduling"]["requeues"]) == 1
    assert by_name["holder.ipynb"]["scheduling"]["requeues"] == []
    assert all(nb["outcome"] == "passed" for nb in by_name.values())


def test_a_ctest_resource_spec_places_one_notebook_a_slot_and_tells_it_as_ctest_does(
        tmp_path, monkeypatch):
    """--resource-spec-file in CTest's format: two GPUs of one slot each, three notebooks under
    a plain -j 3. No two run on one GPU at once, the third waits for a slot, and each kernel
    learns its GPU from CTEST_RESOURCE_GROUP_* with no CUDA_VISIBLE_DEVICES over it (as a test
    under ctest --resource-spec-file does)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = tmp_path / "resources.json"
    spec.write_text(json.dumps({"version": {"major": 1, "minor": 0}, "local": [
        {"gpus": [{"id": "0", "slots": 1}, {"id": "1", "slots": 1}]}]}))
    log = tmp_path / "log"
    names = ["r0.ipynb", "r1.ipynb", "r2.ipynb"]
    for name in names:
        notebook(tmp_path / name,
                 "import os, time\n"
                 f"open({str(log)!r}, 'a').write('{name} %s %s %s %f\\n' % ("
                 "os.environ['CTEST_RESOURCE_GROUP_COUNT'], os.environ['CTEST_RESOURCE_GROUP_0'], "
                 "os.environ['CTEST_RESOURCE_GROUP_0_GPUS'], time.time()))\n"
                 "assert 'CUDA_VISIBLE_DEVICES' not in os.environ",
                 "time.sleep(2)",
                 f"open({str(log)!r}, 'a').write('{name} end - - %f\\n' % time.time())")
    proc = subprocess.run([KWD_BINARY, "smoke", "--output-dir", str(tmp_path / "out"), "-j", "3",
                           "--resource-spec-file", str(spec), *names],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    print(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert ("GPUs of the resource spec, one slot a notebook: id 0 (1 slot); id 1 (1 slot)"
            in proc.stderr)
    assert "r2.ipynb waits: every GPU slot of the resource spec is taken" in proc.stderr
    given, span = {}, {}
    for line in log.read_text().splitlines():
        name, count, kind, gpus, t = line.split()
        if count == "end":
            span[name] = (span[name][0], float(t))
        else:
            assert (count, kind) == ("1", "gpus")
            given[name] = gpus
            span[name] = (float(t), None)
    assert set(given) == set(names)
    assert set(given.values()) == {"id:0,slots:1", "id:1,slots:1"}
    for name, (start, _) in span.items():
        beside = [n for n, (s, e) in span.items() if n != name and given[n] == given[name]
                  and s <= start < e]
        assert beside == [], (name, given, span)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": {"major": 1}, "local": [{"gpus": [{"id": "GPU-A"}]}]}))
    proc = subprocess.run([KWD_BINARY, "smoke", "--resource-spec-file", str(bad), names[0]],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 4
    assert f"--resource-spec-file {bad}: GPU id \"GPU-A\": lowercase letters" in proc.stderr
