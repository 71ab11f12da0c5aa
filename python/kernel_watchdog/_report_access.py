"""The report store as the Jupyter Server extension reads it for a browser: the program lists
and renders the reports (one reader of the store); this module only decides which file a
request may name, and opens it so that what the program reads is that file.

A request names a report by its id. It is served only when the id is one that
`kernel-watchdog reports list --json` lists for this user's store, the id has no path in
it, and the file there is a regular file (not a link, which could point out of the store)
owned by the user the server runs as. Anything else is "no such report"."""
import asyncio
import json
import os
import re
import stat
from dataclasses import dataclass

from kernel_watchdog._binary import BinaryNotFound, find_binary
from kernel_watchdog._reports import report_store as store_dir

# Report ids are "<UTC time>-<kernel id>-<pid>[-<suffix>]": letters, digits, '.', '-', '_'.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,250}")
_TIMEOUT_S = 30


class NoSuchReport(LookupError):
    """The id names no report this user may read (or none at all)."""


class ProgramFailed(RuntimeError):
    """The kernel-watchdog program could not be run or said it could not answer."""


def valid_id(report_id):
    return bool(_ID.fullmatch(report_id)) and ".." not in report_id


@dataclass
class Listing:
    store: str
    reports: list  # the program's rows, newest first


async def run_program(args, pass_fds=()):
    """The program's standard output for `args`; ProgramFailed with its message otherwise."""
    try:
        binary = find_binary()
    except BinaryNotFound as e:
        raise ProgramFailed(str(e)) from e
    proc = await asyncio.create_subprocess_exec(
        binary, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, pass_fds=pass_fds)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), _TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise ProgramFailed(f"kernel-watchdog {' '.join(args)} took over {_TIMEOUT_S} s")
    if proc.returncode != 0:
        raise ProgramFailed(err.decode(errors="replace").strip() or
                            f"kernel-watchdog exited with status {proc.returncode}")
    return out


_cache = {}  # the last listing, under the store directory's (inode, mtime) when it was made


def store_stamp():
    """What changes when a report is written to or removed from the store (a rename into the
    directory changes its mtime), or None when there is no store yet."""
    try:
        st = os.stat(store_dir(os.environ))
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


async def list_reports():
    """The program's listing of the store, asked again only when the store changed: it reads
    every report, and browsers ask every few seconds."""
    stamp = store_stamp()
    if stamp is not None and _cache.get("stamp") == stamp:
        return _cache["listing"]
    doc = json.loads(await run_program(["reports", "list", "--json"]))
    listing = Listing(store=doc["store"], reports=doc["reports"])
    _cache.update(stamp=stamp, listing=listing)
    return listing


class OpenedReport:
    """A report file of the store held open by descriptor (closed on exit)."""

    def __init__(self, fd, row):
        self.fd = fd
        self.row = row

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)

    @property
    def program_path(self):
        """The path under which the program, given this descriptor, reads this very file."""
        return f"/dev/fd/{self.fd}"


async def open_report(report_id):
    """The user's own report `report_id`, opened; NoSuchReport when it is not one."""
    if not valid_id(report_id):
        raise NoSuchReport(report_id)
    listing = await list_reports()
    row = next((r for r in listing.reports if r.get("id") == report_id), None)
    if row is None:
        raise NoSuchReport(report_id)
    try:
        store_fd = os.open(listing.store, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise NoSuchReport(report_id) from e
    try:
        fd = os.open(report_id + ".json",
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=store_fd)
    except OSError as e:  # ELOOP: a link in the store
        raise NoSuchReport(report_id) from e
    finally:
        os.close(store_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise NoSuchReport(report_id)
    return OpenedReport(fd, row)


async def report_document(report_id):
    """(the program's listing row, the report's JSON document) of one report; the document is
    None when the program could not read it (the row then says why)."""
    with await open_report(report_id) as report:
        if not report.row.get("readable"):
            return report.row, None
        out = await run_program(["reports", "show", "--json", report.program_path],
                                pass_fds=(report.fd,))
        return report.row, json.loads(out)


async def report_html(report_id):
    """The report as the program's self-contained HTML page."""
    with await open_report(report_id) as report:
        return await run_program(["reports", "html", report.program_path, "-o", "-"],
                                 pass_fds=(report.fd,))


def summary(row, document=None):
    """What the browser's notification shows of one report: the program's row, and from the
    document (when it could be read) the cause, headline, cell and peak memory."""
    out = {"id": row.get("id"), "at_ms": row.get("at_ms"), "kernel_id": row.get("kernel_id") or None,
           "notebook": row.get("notebook") or None, "path": row.get("path"),
           "readable": bool(row.get("readable")), "headline": row.get("cause"),
           "cause": None, "cell": None, "peak_rss_bytes": None, "first_remedy": None,
           "first_action": None, "kind": None, "ended": None}
    if not isinstance(document, dict):
        return out
    diagnosis = document.get("diagnosis") or {}
    out["kind"] = document.get("kind")
    out["cause"] = diagnosis.get("cause")
    out["headline"] = diagnosis.get("headline") or out["headline"]
    remedies = [r for r in diagnosis.get("remedies") or []
                if isinstance(r, dict) and r.get("text")]
    out["first_remedy"] = remedies[0]["text"] if remedies else None
    # The first remedy's one-click step, where the program gave it one (docs/report-format.md).
    action = remedies[0].get("action") if remedies else None
    if isinstance(action, dict) and action.get("kind") in ("copy", "insert_cell") and \
            all(isinstance(action.get(k), str) and action.get(k) for k in ("label", "text")):
        out["first_action"] = {k: action[k] for k in ("kind", "label", "text")}
    cell = (document.get("execution") or {}).get("cell_in_flight")
    if isinstance(cell, dict):
        out["cell"] = {"execution_count": cell.get("execution_count"),
                       "code": (cell.get("code") or "")[:2000]}
    peak = ((document.get("memory") or {}).get("peak") or {}).get("rss")
    out["peak_rss_bytes"] = peak if isinstance(peak, int) else None
    termination = document.get("termination") or {}
    out["ended"] = termination.get("description") or termination.get("signal_name")
    kernel = document.get("kernel") or {}
    out["notebook"] = out["notebook"] or kernel.get("notebook")
    return out
