"""Reading the crash reports the program wrote: where its store is, which report belongs to
a death, and the few facts a test runner's log shows. The verdict (cause, headline) is the
report's own; nothing here decides anything."""
import json
import os
from dataclasses import dataclass
from pathlib import Path


def report_store(env):
    """The store the program writes to with this environment, in the order it documents
    (README, "The report store"): $KERNEL_WATCHDOG_REPORT_DIR, else
    $XDG_STATE_HOME/kernel-watchdog/reports, else ~/.local/state/kernel-watchdog/reports."""
    if env.get("KERNEL_WATCHDOG_REPORT_DIR"):
        return Path(env["KERNEL_WATCHDOG_REPORT_DIR"])
    state = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(state) / "kernel-watchdog" / "reports"


def report_files(store):
    """The finished reports in a store (temporaries have other names), oldest first."""
    try:
        return sorted(p for p in Path(store).glob("*.json") if p.is_file())
    except OSError:
        return []


@dataclass(frozen=True)
class Death:
    """What a runner's log says about one kernel death, taken from its report."""
    path: Path
    cause: str
    headline: str
    cell: str | None  # "cell [N]: first line of its code", or None when no cell was running
    peak_rss: int | None  # bytes, the kernel's whole process tree

    def log_line(self):
        context = [f"running {self.cell}"] if self.cell else []
        if self.peak_rss:
            context.append(f"peak memory {format_bytes(self.peak_rss)}")
        details = f" ({'; '.join(context)})" if context else ""
        return f"kernel-watchdog: the kernel died: {self.headline}{details}; report: {self.path}"


def read_death(path):
    """The Death a report file describes, or None if it is not a crash report one can read."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("kind") not in ("crash", "hang"):
        return None
    diagnosis = doc.get("diagnosis") or {}
    cell = (doc.get("execution") or {}).get("cell_in_flight") or None
    peak = ((doc.get("memory") or {}).get("peak") or {}).get("rss")
    return Death(path=Path(path), cause=diagnosis.get("cause") or "unknown",
                 headline=diagnosis.get("headline") or "(the report has no headline)",
                 cell=_describe_cell(cell) if cell else None,
                 peak_rss=peak if isinstance(peak, int) else None)


def watchdog_pid(path):
    """The pid of the `run` that wrote a report (what a kernel manager knows as the kernel's)."""
    try:
        return (json.loads(Path(path).read_text()).get("watchdog") or {}).get("pid")
    except (OSError, ValueError, AttributeError):
        return None


def _describe_cell(cell):
    lines = [line for line in (cell.get("code") or "").splitlines() if line.strip()]
    count = cell.get("execution_count")
    label = f"cell [{count}]" if count is not None else "a cell"
    return f"{label}: {lines[0].strip()}" if lines else label


def format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
