"""The Prometheus exporter behind `edgeinf.metrics.serve`: a small HTTP server of `render()`.

Kept apart from `edgeinf.metrics` so that loading a model never imports the HTTP server.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .errors import InputError
from .metrics import CONTENT_TYPE, render

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    # Seconds one read or write on a client's socket may block; the server sets it per instance.
    timeout = 10.0

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self.send_error(404, "only /metrics is served")
            return
        try:
            body = render().encode("utf-8")
        except Exception:  # a broken collector must not take the exporter down
            log.exception("exporter: rendering the metrics failed")
            self.send_error(500, "rendering the metrics failed; see the server's log")
            return
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        log.debug("exporter: " + format, *args)


class _Server(ThreadingHTTPServer):
    """One daemon thread per connection, at most ``max_connections`` at once.

    A client that connects and stalls holds only its own thread, for at most ``timeout_s``
    per read; the others keep being served. Past the connection cap, a new connection is
    closed at once rather than queued behind the stalled ones.
    """

    daemon_threads = True
    block_on_close = False  # close() must not wait for a stalled client's timeout

    def __init__(self, address, timeout_s: float, max_connections: int):
        handler = type("Handler", (_Handler,), {"timeout": timeout_s})
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            log.warning("exporter: %s refused, all connections busy", client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def handle_error(self, request, client_address) -> None:
        # A client that hangs up mid-answer is routine; log it instead of printing to stderr.
        log.debug("exporter: error while serving %s", client_address[0], exc_info=True)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class Exporter:
    """A small HTTP server of `render()` on ``/metrics``, a thread per client. Stop it with `close`.

    Args:
        port: TCP port; 0 picks a free one (read it back from ``port``).
        host: interface to bind; localhost by default.
        timeout_s: how long one read or write on a client connection may block before the
            connection is dropped.
        max_connections: clients served at once; more are disconnected immediately.
    """

    def __init__(
        self, port: int = 9464, host: str = "127.0.0.1", *, timeout_s: float = 10.0, max_connections: int = 32
    ):
        if not timeout_s > 0:
            raise InputError(f"timeout_s must be positive, got {timeout_s}")
        if max_connections < 1:
            raise InputError(f"max_connections must be at least 1, got {max_connections}")
        self._server = _Server((host, port), timeout_s, max_connections)
        bound_host, self.port = self._server.server_address[:2]
        # An AF_INET server's address is (str, int); the stubs allow bytes for other families.
        self.host = bound_host if isinstance(bound_host, str) else bytes(bound_host).decode()
        self._thread = threading.Thread(target=self._server.serve_forever, name="edgeinf-metrics", daemon=True)
        self._thread.start()
        log.info("serving metrics on %s", self.url)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop accepting and release the port (clients being served finish on their own). Idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
