"""The live dashboard on 127.0.0.1: every request reads the store again, so a reload
shows what changed since.

Loopback only, GET only, and only for a ``Host`` naming the loopback address and this
port (a page elsewhere cannot read the dashboard through DNS rebinding). Every answer
carries the page's Content-Security-Policy: nothing but its own stylesheet and script.
"""

from __future__ import annotations

import socketserver
import sys
from collections.abc import Callable
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from verified_memory.dashboard.page import content_security_policy
from verified_memory.errors import NotFound, ValidationError, VerifiedMemoryError

__all__ = ["DEFAULT_PORT", "DashboardServer", "Pages", "start"]

DEFAULT_PORT = 8766
HOST = "127.0.0.1"


class Pages:
    """What the server answers with: the dashboard for a query string's ``repo`` (any
    number) and ``days``, and one memory's page. Errors are ours (``errors.py``)."""

    def __init__(self, dashboard: Callable[[list[str] | None, int | None], str],
                 memory: Callable[[str], str]) -> None:
        self.dashboard = dashboard
        self.memory = memory


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, port: int, pages: Pages) -> None:
        self.pages = pages
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer.server_bind``'s ``socket.getfqdn``: a reverse DNS
        look-up that can stall the start for seconds where no name server answers, for
        a name nothing here uses (the server answers only at ``HOST``)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.port

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"


def start(port: int, pages: Pages) -> DashboardServer:
    """A server listening on 127.0.0.1:``port`` (0: any free port); a port that cannot be
    listened on is one clear error, before anything is served."""
    try:
        return DashboardServer(port, pages)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise VerifiedMemoryError(
            f"cannot serve the dashboard on http://{HOST}:{port}/: {why} (is another vmem "
            "dashboard running?); pick a free port with --port N") from exc


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "vmem-dashboard"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        allowed = {f"{HOST}:{self.server.port}", f"localhost:{self.server.port}"}
        if self.headers.get("Host", "") not in allowed:
            self._send(HTTPStatus.MISDIRECTED_REQUEST, "This dashboard answers only at "
                       f"{self.server.url}", body=body)
            return
        url = urlsplit(self.path)
        try:
            if url.path == "/":
                query = parse_qs(url.query)
                repos = query.get("repo") or None
                days = _days(query.get("days"))
                self._send(HTTPStatus.OK, self.server.pages.dashboard(repos, days), body=body,
                           page=True)
            elif url.path.startswith("/memory/"):
                memory_id = unquote(url.path.removeprefix("/memory/"))
                self._send(HTTPStatus.OK, self.server.pages.memory(memory_id), body=body,
                           page=True)
            else:
                self._send(HTTPStatus.NOT_FOUND, f"Nothing at {url.path}.", body=body)
        except NotFound as exc:
            self._send(HTTPStatus.NOT_FOUND, str(exc), body=body)
        except ValidationError as exc:
            self._send(HTTPStatus.BAD_REQUEST, str(exc), body=body)
        except VerifiedMemoryError as exc:  # the store: unreachable, locked, ...
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, str(exc), body=body)

    def _send(self, status: HTTPStatus, text: str, *, body: bool, page: bool = False) -> None:
        html = text if page else (
            f"<!doctype html><title>{status.value} {escape(status.phrase)}</title>"
            f"<p>{escape(text)}</p>")
        data = html.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy",
                         f"{content_security_policy()}; frame-ancestors 'none'")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Only failures, one line each on stderr (a page load is not news)."""
        if len(args) >= 2 and str(args[1]).startswith(("4", "5")):
            sys.stderr.write(f"vmem: dashboard: {format % args}\n")


def _days(values: list[str] | None) -> int | None:
    if not values:
        return None
    if not values[-1].isdigit():
        raise ValidationError(f"days must be a whole number, got {values[-1]!r}")
    return int(values[-1])
