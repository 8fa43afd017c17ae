"""The HTTP/1.1 connection below the ASGI app: uvicorn's h11 protocol (the one BentoML's
server runs: httptools is not installed) with the edges uvicorn leaves open, and the
listening socket closed when the server is told to stop.

- A request head must arrive within R2A_HEADER_TIMEOUT_S (10 s) of its first byte or of
  the connection (uvicorn waits for ever); then a 408 and the connection closes.
- A head over h11's limit (16 KiB) is a 431, any other malformed head a 400, both in the
  error shape `{"error", "field"}` (uvicorn: text/plain "Invalid HTTP request received.");
  what the client sends after is read and dropped for up to 2 s before the close, so the
  client reads the answer instead of a reset.
- A request with both `Content-Length` and `Transfer-Encoding` is framed by the latter (h11)
  and its connection closed after the response (RFC 9112 §6.3: what follows on it could be
  a smuggled request as a proxy in front framed it).
- On SIGTERM or SIGINT the listening socket stops listening before the in-flight requests
  drain (`--timeout-graceful-shutdown`): the socket belongs to BentoML's arbiter, which
  keeps it open until its workers are gone, so a connection made during the drain was
  accepted by the kernel and then hung; now it is refused at once and the client (or the
  load balancer) goes elsewhere. The socket is shared, so one worker's shutdown stops it
  for all: only a stopping server sends its workers these signals (a crashed worker is
  respawned without one; `r2a serve` runs no `--reload`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import typing as t
from types import FrameType

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from serving.errors import dumps
from serving.middleware import CLIENT_ERRORS, _env_float

log = logging.getLogger("r2a.serving")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
CLOSE = (b"connection", b"close")


def _raw_error(status: int, reason: str, error: str) -> bytes:
    body = dumps({"error": error, "field": None}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _framing_conflict(event: h11.Request) -> bool:
    names = {name.lower() for name, _ in event.headers}
    return b"content-length" in names and b"transfer-encoding" in names


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a head deadline, heads refused in the error shape and
    a framing conflict's connection closed (the module's docstring says why)."""

    header_timeout_s = _env_float("R2A_HEADER_TIMEOUT_S", 10.0)
    drain_s = 2.0

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._hint: int | None = None
        self._why = ""
        self._draining = False
        next_event = self.conn.next_event

        def noted() -> t.Any:  # the status h11 suggests for a bad head (431: too large)
            try:
                event = next_event()
            except h11.RemoteProtocolError as e:
                self._hint, self._why = e.error_status_hint, str(e)
                raise
            if isinstance(event, h11.Request) and _framing_conflict(event):
                # uvicorn answers `Connection: close` (and h11 then closes) to a request
                # that asked for it: this one is made to ask
                log.info(
                    "Content-Length with Transfer-Encoding from %s: closed after the answer",
                    _peer(self.client),
                )
                return h11.Request(
                    method=event.method,
                    target=event.target,
                    headers=[*event.headers, CLOSE],
                    http_version=event.http_version,
                )
            return event

        self.conn.next_event = noted  # type: ignore[method-assign]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._draining:
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # a head begun and not complete: its deadline runs (once armed)
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.our_state is not h11.IDLE:  # a response is still going out
            return
        msg = f"the request head was not received within {self.header_timeout_s:g} s"
        log.info("408 from %s: %s", _peer(self.client), msg)
        CLIENT_ERRORS.labels(endpoint="other", status="408").inc()
        self.transport.write(_raw_error(408, "Request Timeout", msg))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if self._hint == 431:
            limit = self.conn._max_incomplete_event_size  # noqa: SLF001 - h11's own limit
            status, reason = 431, "Request Header Fields Too Large"
            error = f"the request head is larger than {limit} bytes"
        else:
            status, reason = 400, "Bad Request"
            why = self._why.strip().splitlines()[0][:200] if self._why.strip() else msg
            error = f"malformed request head: {why}"
        log.info("%d from %s: %s", status, _peer(self.client), error)
        CLIENT_ERRORS.labels(endpoint="other", status=str(status)).inc()
        self.transport.write(_raw_error(status, reason, error))
        self._disarm()
        self._draining = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(self.drain_s, self.transport.close)


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"


def stop_listening(servers: t.Iterable[asyncio.AbstractServer]) -> None:
    """Shut the listening sockets of `servers` for reading: Linux then refuses the
    connections waiting in the backlog and every new one, in every process sharing them."""
    for server in servers:
        for sock in getattr(server, "sockets", None) or ():
            try:
                with socket.socket(fileno=os.dup(sock.fileno())) as s:
                    s.shutdown(socket.SHUT_RD)
            except OSError:  # already shut (another worker), or closed
                continue


def install_http_guards() -> None:
    """Make uvicorn (which BentoML starts with `http="auto"`) run GuardedH11, and stop
    listening when a stop signal arrives."""
    from uvicorn import config, server

    for name in ("auto", "h11"):
        config.HTTP_PROTOCOLS[name] = "serving.connection:GuardedH11"
    base = server.Server.handle_exit
    if getattr(base, "r2a_stops_listening", False):
        return

    def handle_exit(self: server.Server, sig: int, frame: FrameType | None) -> None:
        if sig in STOP_SIGNALS and not self.should_exit:
            stop_listening(self.servers)
            log.info("signal %d: no new connections; draining those in flight", sig)
        base(self, sig, frame)

    handle_exit.r2a_stops_listening = True  # type: ignore[attr-defined]
    server.Server.handle_exit = handle_exit  # type: ignore[method-assign]
