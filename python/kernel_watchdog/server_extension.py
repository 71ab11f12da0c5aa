"""The Jupyter Server extension behind the JupyterLab / Notebook 7 extension: authenticated
handlers that serve the user's own crash reports and a kernel's live memory, and a feed that
announces new deaths on the server's event bus. Enabled by installing the package (its
jupyter-config file); the program reads and renders everything, nothing here diagnoses.

    GET  {base}kernel-watchdog/reports?since_ms=N   reports newer than N (the notification's
                                                    summaries), newest first
    GET  {base}kernel-watchdog/reports/ID           one report: its summary and its document
    GET  {base}kernel-watchdog/reports/ID/html      the program's HTML page of it (sandboxed)
    GET  {base}kernel-watchdog/kernels/KERNEL_ID    the kernel's live memory, or "not watched"
    POST {base}kernel-watchdog/kernels/KERNEL_ID/stacks
                                                    where the kernel is now: `kernel-watchdog
                                                    stacks` of it (every thread's native and
                                                    Python frames, what it waits on)

Every handler needs the server's own authentication (token or login): 403 otherwise. A report
id that is not one of the user's reports, has a path in it or is a link out of the store: 404.
"""
import json
import os
import time

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.ioloop import PeriodicCallback

from kernel_watchdog import _live_status, _report_access
from kernel_watchdog._report_access import NoSuchReport, ProgramFailed

EVENT_SCHEMA_ID = "https://events.jupyter.org/kernel_watchdog/kernel_death/v1"
EVENT_SCHEMA = {
    "$id": EVENT_SCHEMA_ID,
    "version": "1",
    "title": "A kernel died and kernel-watchdog wrote a report",
    "personal-data": True,
    "description": "The summary of a new crash or hang report in the user's store.",
    "type": "object",
    "required": ["id"],
    "properties": {
        "id": {"type": "string", "description": "The report id"},
        "kernel_id": {"type": ["string", "null"]},
        "notebook": {"type": ["string", "null"]},
        "headline": {"type": ["string", "null"]},
        "cause": {"type": ["string", "null"]},
        "readable": {"type": "boolean"},
        "at_ms": {"type": ["integer", "null"]},
        "path": {"type": ["string", "null"]},
    },
}
AUTH_RESOURCE = "kernel_watchdog"
# How often the store is looked at for new reports (one stat of its directory).
FEED_INTERVAL_MS = 500
SUMMARY_LIMIT = 20


async def _notebooks_by_kernel(serverapp):
    """{kernel id: notebook path} from the server's session manager."""
    try:
        sessions = await serverapp.session_manager.list_sessions()
    except Exception:  # a session store that cannot be read names no notebook
        return {}
    return {s["kernel"]["id"]: s.get("path") for s in sessions if s.get("kernel")}


async def _summaries(serverapp, rows):
    notebooks = await _notebooks_by_kernel(serverapp)
    out = []
    for row in rows:
        try:
            _, document = await _report_access.report_document(row["id"])
        except (NoSuchReport, ProgramFailed, ValueError):
            document = None
        item = _report_access.summary(row, document)
        if item["kernel_id"] in notebooks and notebooks[item["kernel_id"]]:
            item["notebook"] = notebooks[item["kernel_id"]]
        out.append(item)
    return out


class _Handler(APIHandler):
    auth_resource = AUTH_RESOURCE

    def write_error(self, status_code, **kwargs):
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": self._reason}))


class ReportsHandler(_Handler):
    @web.authenticated
    @authorized
    async def get(self):
        try:
            since = int(self.get_argument("since_ms", "0"))
        except ValueError:
            raise web.HTTPError(400, "since_ms is not a number") from None
        try:
            listing = await _report_access.list_reports()
        except ProgramFailed as e:
            raise web.HTTPError(500, str(e)) from None
        rows = [r for r in listing.reports if (r.get("at_ms") or 0) > since][:SUMMARY_LIMIT]
        self.finish({"now_ms": int(time.time() * 1000),
                     "reports": await _summaries(self.serverapp, rows)})


class ReportHandler(_Handler):
    @web.authenticated
    @authorized
    async def get(self, report_id):
        try:
            row, document = await _report_access.report_document(report_id)
        except NoSuchReport:
            raise web.HTTPError(404, "no such report") from None
        except (ProgramFailed, ValueError) as e:
            raise web.HTTPError(500, str(e)) from None
        [item] = await _summaries(self.serverapp, [row])
        self.finish({"summary": item, "document": document})


class ReportPageHandler(_Handler):
    def finish(self, *args, **kwargs):
        # A page, not JSON: APIHandler.finish would call it application/json.
        return JupyterHandler.finish(self, *args, **kwargs)

    @web.authenticated
    @authorized
    async def get(self, report_id):
        try:
            page = await _report_access.report_html(report_id)
        except NoSuchReport:
            raise web.HTTPError(404, "no such report") from None
        except ProgramFailed as e:
            raise web.HTTPError(500, str(e)) from None
        self.set_header("Content-Type", "text/html; charset=utf-8")
        # Opened on its own, the page still runs nothing and reaches nothing.
        self.set_header("Content-Security-Policy",
                        "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.finish(page)


class KernelHandler(_Handler):
    @web.authenticated
    @authorized
    async def get(self, kernel_id):
        if kernel_id not in self.serverapp.kernel_manager:
            raise web.HTTPError(404, "no such kernel")
        status = await _live_status.kernel_status(os.environ, kernel_id)
        notebooks = await _notebooks_by_kernel(self.serverapp)
        status["notebook"] = notebooks.get(kernel_id) or status.get("notebook")
        status["now_ms"] = int(time.time() * 1000)
        self.finish(status)


class StacksHandler(_Handler):
    """A POST, not a GET: it stops the kernel's threads for a moment (ptrace) and asks the
    kernel for its Python frames. Only a kernel of this server's, found by its own connection
    file: the request names nothing else."""

    @web.authenticated
    @authorized
    async def post(self, kernel_id):
        if kernel_id not in self.serverapp.kernel_manager:
            raise web.HTTPError(404, "no such kernel")
        connection_file = self.serverapp.kernel_manager.get_kernel(kernel_id).connection_file
        try:
            text = await _report_access.run_program(["stacks", connection_file])
        except ProgramFailed as e:
            raise web.HTTPError(500, str(e)) from None
        notebooks = await _notebooks_by_kernel(self.serverapp)
        self.finish({"kernel_id": kernel_id, "notebook": notebooks.get(kernel_id),
                     "taken_ms": int(time.time() * 1000),
                     "text": text.decode(errors="replace")})


class DeathFeed:
    """Looks at the store twice a second (one stat of its directory); when it changed, asks
    the program for the list and emits one event per report it had not seen."""

    def __init__(self, serverapp):
        self.serverapp = serverapp
        self.seen = None
        self.store_stamp = None
        self.busy = False
        self.callback = PeriodicCallback(self.tick, FEED_INTERVAL_MS)

    def start(self):
        self.callback.start()

    async def tick(self):
        if self.busy:
            return
        self.busy = True
        try:
            await self._look()
        finally:
            self.busy = False

    async def _look(self):
        stamp = _report_access.store_stamp()
        if stamp == self.store_stamp and self.seen is not None:
            return
        try:
            listing = await _report_access.list_reports()
        except (ProgramFailed, ValueError) as e:
            self.serverapp.log.debug("kernel-watchdog: %s", e)
            return
        self.store_stamp = stamp
        ids = {r["id"] for r in listing.reports}
        if self.seen is None:  # what was there when the server started is not news
            self.seen = ids
            return
        new = [r for r in listing.reports if r["id"] not in self.seen]
        self.seen |= ids
        for item in await _summaries(self.serverapp, new):
            self.serverapp.event_logger.emit(schema_id=EVENT_SCHEMA_ID, data={
                k: item[k] for k in EVENT_SCHEMA["properties"]})


def _jupyter_server_extension_points():
    return [{"module": "kernel_watchdog.server_extension"}]


def _load_jupyter_server_extension(serverapp):
    base = url_path_join(serverapp.web_app.settings["base_url"], "kernel-watchdog")
    report = r"(?P<report_id>[^/]+)"
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base, "reports"), ReportsHandler),
        (url_path_join(base, "reports", report), ReportHandler),
        (url_path_join(base, "reports", report, "html"), ReportPageHandler),
        (url_path_join(base, "kernels", r"(?P<kernel_id>[^/]+)"), KernelHandler),
        (url_path_join(base, "kernels", r"(?P<kernel_id>[^/]+)", "stacks"), StacksHandler),
    ])
    serverapp.event_logger.register_event_schema(EVENT_SCHEMA)
    feed = DeathFeed(serverapp)
    feed.start()
    serverapp.web_app.settings["kernel_watchdog_feed"] = feed
    serverapp.log.info("kernel-watchdog: reports and live memory at %s", base)
