"""The memory budget that pytest-xdist workers share, so that their notebooks' kernels start
when they fit instead of all at once: the pytest plugin's side of `smoke -j auto`.

One ledger file, made by the xdist controller in a private folder, holds the budget and what
each worker's running notebook holds. A worker takes an flock on it, reads it, decides, adds
its notebook or waits, and lets go. Nothing here imports pytest: the hooks are in
_pytest_budget.py.

The rules are smoke's (src/smoke/smoke_runner.cpp memory_budget, src/platform/linux/
memory_room.cpp, src/smoke/admission.cpp); where one matches, the comment says so. What smoke
does and this does not: it stops nothing. Smoke stops a notebook that outgrows the budget and
runs it again alone; a worker here can only hold back new starts, so a notebook that grows past
its estimate while others run beside it can still meet the OOM killer."""
import fcntl
import json
import os
import re
import time
from pathlib import Path

from kernel_watchdog._reports import format_bytes

MiB = 1024 * 1024
LEDGER_NAME = "ledger.json"
HISTORY_FORMAT_KEY = "kernel-watchdog-history"
HISTORY_FORMAT_VERSION = 2


# --- the budget: smoke's rules ---------------------------------------------------------


def memory_room(proc="/proc"):
    """(limit, in_use, source) of the memory this process runs in, as smoke's memory_room()
    (src/platform/linux/memory_room.cpp): the machine's MemTotal less MemAvailable, or the
    memory cgroup's tightest limit up its path with its usage less inactive page cache,
    whichever leaves less free. None when neither can be read."""
    machine = _machine_room(proc)
    cgroup = _cgroup_room(proc)
    if cgroup and (not machine or cgroup[0] - cgroup[1] <= machine[0] - machine[1]):
        return cgroup
    return machine


def budget_for_kernels(room, workers, worker_rss):
    """What the kernels may hold together: smoke's memory_budget() (the room less what is in
    use and a margin of a tenth, at least 128 MiB), less the workers' own memory, which do not
    exist yet when the controller measures (each taken as the controller's size: a worker is
    the same pytest with the same plugins)."""
    limit, in_use, _ = room
    margin = max(limit // 10, 128 * MiB)
    return max(limit - in_use - margin - workers * worker_rss, 0), margin


def _machine_room(proc):
    try:
        fields = _kb_fields(Path(proc, "meminfo").read_text())
        total, available = fields["MemTotal"], fields["MemAvailable"]
    except (OSError, KeyError):
        return None
    return total, total - available, "the machine's available memory"


def _kb_fields(text):
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[name] = int(parts[0]) * 1024
    return out


def _cgroup_room(proc):
    found = _own_memory_cgroup(proc)
    if not found:
        return None
    version, directory, top = found
    limit_name = "memory.max" if version == 2 else "memory.limit_in_bytes"
    limit, limit_dir = None, None
    for d in _limiting_dirs(directory, top):
        value = _memory_limit(_read(Path(d, limit_name)))
        if value is not None and (limit is None or value < limit):
            limit, limit_dir = value, d
    usage = _number(_read(Path(directory, "memory.current" if version == 2
                               else "memory.usage_in_bytes")))
    if limit is None or usage is None:
        return None
    stat = _flat_keyed(_read(Path(directory, "memory.stat")) or "")
    reclaimable = stat.get("inactive_file" if version == 2 else "total_inactive_file", 0)
    return limit, max(usage - reclaimable, 0), f"the memory cgroup {limit_dir} ({limit_name})"


def _own_memory_cgroup(proc):
    """(version, directory, mount point) of this process's memory cgroup, as smoke's
    memory_cgroup_of (src/platform/linux/cgroup_fs.cpp): v2 where the memory controller is on
    in its directory, else v1's memory hierarchy."""
    membership = _read(Path(proc, "self", "cgroup"))
    mountinfo = _read(Path(proc, "self", "mountinfo"))
    if membership is None or mountinfo is None:
        return None
    v2_path = v1_path = None
    for line in membership.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    v2_mount = v1_mount = None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        head, tail = head.split(" "), tail.split(" ")
        if not sep or len(head) < 5 or len(tail) < 3:
            continue
        mount = (_unescape(head[3]), _unescape(head[4]))
        if tail[0] == "cgroup2" and not v2_mount:
            v2_mount = mount
        elif tail[0] == "cgroup" and "memory" in tail[2].split(",") and not v1_mount:
            v1_mount = mount
    if v2_mount and v2_path is not None:
        d = _cgroup_dir(v2_mount, v2_path)
        if d and Path(d, "memory.current").exists():
            return 2, d, v2_mount[1]
    if v1_mount and v1_path is not None:
        d = _cgroup_dir(v1_mount, v1_path)
        if d and Path(d, "memory.usage_in_bytes").exists():
            return 1, d, v1_mount[1]
    return None


def _cgroup_dir(mount, path):
    root, mount_point = mount
    if root != "/":
        if not path.startswith(root) or path[len(root):len(root) + 1] not in ("", "/"):
            return None
        path = path[len(root):]
    path = path.strip("/")
    return mount_point + ("/" + path if path else "")


def _limiting_dirs(directory, top):
    """The directory and each above it up to the mount point: a parent's limit binds too."""
    out = [directory]
    while directory != top and len(directory) > len(top):
        directory = os.path.dirname(directory)
        out.append(directory)
    return out


def _memory_limit(text):
    value = _number(text)
    # v1 says "no limit" as PAGE_COUNTER_MAX pages, near 2^63; v2 says "max" (not a number).
    return value if value is not None and value < (1 << 62) else None


def _number(text):
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _flat_keyed(text):
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out


def _unescape(text):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _read(path):
    try:
        return Path(path).read_text()
    except OSError:
        return None


# --- estimates: smoke's history file, read-only -----------------------------------------


def read_history(path):
    """{notebook key: peak_rss bytes} from smoke's `--durations` file (docs/smoke-history.md):
    the second format's records, or the first's (times only: no peaks). Raises ValueError
    with the file's name for a file that is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a history file (a JSON object; see docs/smoke-history.md)")
    if HISTORY_FORMAT_KEY not in data:
        return {}  # the first format: notebook -> seconds, no peaks
    if data[HISTORY_FORMAT_KEY] != HISTORY_FORMAT_VERSION:
        raise ValueError(f'{path}: "{HISTORY_FORMAT_KEY}" is {data[HISTORY_FORMAT_KEY]!r}, '
                         f"this plugin reads {HISTORY_FORMAT_VERSION}")
    notebooks = data.get("notebooks")
    if not isinstance(notebooks, dict):
        raise ValueError(f'{path}: no "notebooks" object')
    return {key: record["peak_rss"] for key, record in notebooks.items()
            if isinstance(record, dict) and isinstance(record.get("peak_rss"), int)
            and record["peak_rss"] >= 0}


def estimate_for(notebook, peaks, bases):
    """The recorded peak of a notebook, or None. smoke keys a notebook by its path as given
    to it, made lexically normal; a pytest item has an absolute path, so it is tried relative
    to each of `bases` (where pytest was started, its rootdir, the history file's folder)."""
    notebook = os.path.abspath(notebook)
    for base in bases:
        key = os.path.normpath(os.path.relpath(notebook, base))
        if key in peaks:
            return peaks[key]
    return peaks.get(notebook)


def declared_peak(notebook):
    """A peak the notebook declares for its first run, as smoke reads it:
    {"metadata": {"kernel_watchdog": {"peak_memory": "2G"}}} (powers of 1024), or None."""
    try:
        with open(notebook) as f:
            value = json.load(f)["metadata"]["kernel_watchdog"]["peak_memory"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return parse_size(value)


def parse_size(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", str(value), re.I)
    if not match:
        return None
    power = " KMGT".index(match.group(2).upper() or " ")
    return int(float(match.group(1)) * 1024 ** power)


# --- live memory of a worker's kernels: from /proc --------------------------------------


def start_time(pid, proc="/proc"):
    """The process's start time in clock ticks since boot (field 22 of stat): with the pid,
    names one process, not a later one that reused its pid. None when it is gone."""
    text = _read(Path(proc, str(pid), "stat"))
    if text is None:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    return int(text[text.rindex(")") + 2:].split()[19])


def descendants_rss(pid, proc="/proc"):
    """Resident bytes of every process below `pid` (not itself): the worker's kernels, with
    the `kernel-watchdog run` between it and each. As smoke's peak_rss, RSS summed over a
    tree (pages shared between them are counted in each)."""
    children = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        text = _read(Path(entry.path, "stat"))
        if text:
            ppid = int(text[text.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        todo.extend(children.get(child, []))
        statm = _read(Path(proc, str(child), "statm"))
        if statm:
            total += int(statm.split()[1]) * page
    return total


# --- the ledger ------------------------------------------------------------------------


def make_ledger(folder, budget, source):
    """A new ledger in `folder` (the controller's private folder, 0700): the budget and no
    notebook running. Returns its path."""
    path = Path(folder, LEDGER_NAME)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"budget": budget, "source": source, "running": []}, f)
    return path


class Ledger:
    """The ledger file under an exclusive flock, for one read-decide-write: `with
    Ledger(path) as state:` gives its content; what `state` holds at the end is written back.
    Everyone who touches it holds the lock, so it is rewritten in place."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.file = open(self.path, "r+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX)
            self.state = json.loads(self.file.read())
        except BaseException:
            self.file.close()
            raise
        return self.state

    def __exit__(self, kind, value, traceback):
        try:
            if kind is None:
                self.file.seek(0)
                self.file.truncate()
                json.dump(self.state, self.file)
                self.file.flush()
        finally:
            self.file.close()  # the lock goes with it


def admit(ledger, worker, notebook, estimate, say, poll_s=0.25):
    """Waits until a notebook of this estimate (bytes, None: unknown) fits beside those
    running, then adds it to the ledger under this process's pid. `say` gets a line when it
    first waits, again when who runs changes (not at every poll), and when it starts after
    waiting. Returns the seconds it waited, None when it did not."""
    began, said = time.monotonic(), None
    while True:
        with Ledger(ledger) as state:
            refresh(state)
            why = decide(state, notebook, estimate)
            if why is None:
                alone = estimate is not None and estimate > state["budget"]
                state["running"].append(entry_for(worker, notebook, estimate, alone))
                break
            running = [e["notebook"] for e in state["running"]]
        if said != running:
            said = running
            say(f"{worker} waits to start {notebook}: {why}")
        time.sleep(poll_s)
    if said is None:
        return None
    waited = time.monotonic() - began
    say(f"{worker} starts {notebook} after waiting {waited:.1f} s")
    return waited


def release(ledger, pid=None):
    """Takes this process's notebook out of the ledger."""
    pid = pid or os.getpid()
    with Ledger(ledger) as state:
        state["running"] = [e for e in state["running"] if e["pid"] != pid]


def entry_for(worker, notebook, estimate, alone, pid=None):
    pid = pid or os.getpid()
    return {"worker": worker, "notebook": notebook, "estimate": estimate, "alone": alone,
            "pid": pid, "pid_start": start_time(pid), "started": time.time(), "peak": 0,
            "used": 0}


def refresh(state, proc="/proc"):
    """Drops the entries of workers that are gone (a crashed worker must not hold the budget
    for ever) and sets each other's `used` to what its kernels hold now, `peak` to the most
    seen. The pid and its start time name the worker."""
    alive = []
    for entry in state["running"]:
        if start_time(entry["pid"], proc) != entry["pid_start"]:
            continue
        entry["used"] = descendants_rss(entry["pid"], proc)
        entry["peak"] = max(entry["peak"], entry["used"])
        alive.append(entry)
    state["running"] = alive


def reserved(entry):
    """What a running notebook holds of the budget: smoke's Admission::reserved, the most of
    its estimate, its peak so far and its use now."""
    return max(entry["estimate"] or 0, entry["peak"], entry["used"])


def growth_slack(estimate):
    """smoke's growth_slack: a kernel's memory moves a little from run to run."""
    return max(estimate // 20, 32 * MiB)


def decide(state, notebook, estimate):
    """None when a notebook of this estimate (None: unknown) may start beside the ones
    running, else why it waits. smoke's Admission::next for one notebook (a worker decides
    only its own; xdist chose the order), with one change for the unknown: smoke starts the
    next one 1.5 s after the last, and stops any that then outgrow the budget; no one stops a
    kernel here, so an unknown waits until no other unknown runs."""
    budget, running = state["budget"], state["running"]
    if not running:
        return None  # the first always starts; one bigger than the budget runs alone
    names = ", ".join(f"{e['worker']} running {e['notebook']}" for e in running)
    for e in running:
        if e["alone"]:
            return f"{e['worker']} runs {e['notebook']} alone"
    for e in running:
        if e["estimate"] is not None and e["used"] > e["estimate"] + growth_slack(e["estimate"]):
            return (f"{e['worker']}'s {e['notebook']} holds {format_bytes(e['used'])}, past "
                    f"its estimate of {format_bytes(e['estimate'])}")
    if estimate is not None and estimate > budget:
        return f"it runs alone: needs {format_bytes(estimate)}, more than the whole budget ({names})"
    free = budget - sum(reserved(e) for e in running)
    if estimate is None:
        unknown = [e for e in running if e["estimate"] is None]
        if unknown:
            return (f"its memory is unknown, and so is that of "
                    f"{', '.join(e['notebook'] for e in unknown)} ({names})")
        # smoke's floor for an unknown: room for a kernel to start in at least.
        if free < min(budget // 10, 256 * MiB):
            return f"its memory is unknown, and {format_bytes(max(free, 0))} are free ({names})"
        return None
    if estimate > free:
        return f"needs {format_bytes(estimate)}, {format_bytes(max(free, 0))} free ({names})"
    return None

