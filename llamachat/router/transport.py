"""The client's HTTP plumbing: a connection pool whose sockets can be shut from another thread.

httpx cannot wake a thread blocked in recv() (a router loading a model, a long prompt, a
server that hangs); shutting the socket down can. `SocketTracker` remembers each thread's
socket, `Transport` runs httpx over an httpcore pool that uses it, and `Watchdog` shuts the
socket on cancel, on a stall mid-reply, or when the server does not begin its answer.
`ManagedKey` sends the key of the llama-server llamachat started. Nothing here raises
errors of its own: httpcore's are turned into httpx's, and the caller reads `Watchdog.reason`
to tell a cancel, a stall or a hang from a real network error.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import cache
from typing import Any

import httpcore
import httpx

from llamachat.router.lock import managed_key

log = logging.getLogger(__name__)


class SocketTracker(httpcore.NetworkBackend):
    """httpcore's default network backend, remembering the socket each thread last wrote.

    A request waiting for its response (a router loading a model, a long prompt being
    processed) sits in recv() on that socket, and no httpx call made from another thread
    wakes it; shutting the socket down does, at once, and tells the server to stop.
    """

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()
        self._writers: dict[int, socket.socket] = {}
        # Called, and dropped, at the first read a thread makes after writing: its request
        # is out then (httpcore writes a whole request before it reads the answer).
        self.on_sent: dict[int, Callable[[], None]] = {}
        # Called before each read a thread makes, for as long as it is set.
        self.before_read: dict[int, Callable[[], None]] = {}
        # Per thread, of the request it sent last: whether it went out on a connection that
        # had answered before (a reused one), and whether a byte of its answer came back.
        self._reused: dict[int, bool] = {}
        self._answered: dict[int, bool] = {}

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Open a TCP stream whose writes are tracked."""
        return _TrackedStream(
            self._backend.connect_tcp(
                host,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            ),
            self,
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        """Open a Unix socket stream whose writes are tracked."""
        return _TrackedStream(
            self._backend.connect_unix_socket(path, timeout=timeout, socket_options=socket_options),
            self,
        )

    def sleep(self, seconds: float) -> None:
        """Sleep, as the pool's retry logic asks."""
        self._backend.sleep(seconds)

    def socket_of(self, thread_id: int) -> socket.socket | None:
        """The socket `thread_id` last sent a request on."""
        return self._writers.get(thread_id)

    def unanswered_on_reused(self, thread_id: int) -> bool:
        """Whether `thread_id`'s last request went out on a reused connection and not one
        byte of its answer came back: the server closed the connection as it went out, and
        the request is safe to send once more (as browsers do)."""
        return self._reused.get(thread_id, False) and not self._answered.get(thread_id, False)


class _TrackedStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, tracker: SocketTracker) -> None:
        self._stream = stream
        self._tracker = tracker
        # HTTP/1.1 without pipelining: a write after a read begins the next request.
        self._between_requests = True
        self._has_answered = False

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._read(max_bytes, timeout)
        if data:
            self._between_requests = self._has_answered = True
            self._tracker._answered[threading.get_ident()] = True
        return data

    def _read(self, max_bytes: int, timeout: float | None) -> bytes:
        tracker = self._tracker
        if tracker.on_sent or tracker.before_read:
            thread = threading.get_ident()
            on_sent = tracker.on_sent.pop(thread, None)
            if on_sent is not None:
                on_sent()
            before_read = tracker.before_read.get(thread)
            if before_read is not None:
                before_read()
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        thread = threading.get_ident()
        if self._between_requests:
            self._between_requests = False
            self._tracker._reused[thread] = self._has_answered
            self._tracker._answered[thread] = False
        self._tracker._writers[thread] = self._stream.get_extra_info("socket")
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _TrackedStream(
            self._stream.start_tls(ssl_context, server_hostname, timeout), self._tracker
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


_CORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)


def _httpx_error(exc: Exception, request: httpx.Request) -> httpx.HTTPError:
    # httpcore's and httpx's transport exceptions share their names.
    kind = getattr(httpx, type(exc).__name__, httpx.TransportError)
    return kind(str(exc), request=request)


@cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle costs ~15 ms each time."""
    return httpx.create_ssl_context()


class Transport(httpx.BaseTransport):
    """httpx over an httpcore pool that uses SocketTracker (httpx cannot be given one)."""

    def __init__(self, sockets: SocketTracker) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=shared_ssl_context(),
            max_connections=100,
            max_keepalive_connections=20,
            # Under llama-server's own 5 s keep-alive, so an idle connection is never
            # reused at the moment the server closes it.
            keepalive_expiry=4.0,
            network_backend=sockets,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send one request through the pool."""
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = self._pool.handle_request(core)
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc, request) from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response, request),
            extensions=response.extensions,
        )

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_stream()
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc, self._request) from exc

    def close(self) -> None:
        self._response.close()


class Watchdog:
    """Shuts the request's socket down on cancel, on a stall, or when the server hangs.

    Cancel works from the moment the request is sent. The idle clock runs from then on
    too, but a wait for headers longer than idle_timeout first asks `probe` (on a thread
    of its own, so a cancel is not held up) whether the wait is a model loading, which
    may take minutes: yes starts the clock again, anything else means the server hangs
    (stopped, stuck, or a socket that accepts and never replies). The reader checks
    `reason` to tell a stall, a hang or a cancel from a real network error.

    The watch thread starts once the request is written (`start`; before that there is
    no socket to shut down, and starting a thread costs the request ~1 ms). It sleeps on
    the cancel event itself until the idle deadline, so a cancel wakes it at once and a
    streaming reply does not wake it at all (`feed` only moves the deadline); it looks
    again at least every MAX_REST seconds, which is also how long it may outlive `stop`.
    """

    MAX_REST = 1.0
    PROBE_TICK = 0.05

    def __init__(
        self,
        find_socket: Callable[[], socket.socket | None],
        idle_timeout: float | None,
        cancel: threading.Event | None,
        probe: Callable[[], bool] | None = None,
    ) -> None:
        self.reason = ""
        self._find_socket = find_socket
        self._idle = idle_timeout if idle_timeout and idle_timeout > 0 else None
        self._cancel = cancel
        self._probe = probe
        self._verdict: bool | None = None
        self._probing = False
        self._last = time.monotonic()
        self._armed = False
        self._stop = threading.Event()

    def start(self) -> None:
        """Start watching (the request has been written)."""
        self._last = time.monotonic()
        if (self._idle or self._cancel is not None) and not self._stop.is_set():
            threading.Thread(
                target=self._run, daemon=True, name="llamachat-stream-watchdog"
            ).start()

    def arm(self) -> None:
        """Start the idle clock (the response headers arrived)."""
        self._last = time.monotonic()
        self._armed = True

    def feed(self) -> None:
        """Note that bytes arrived."""
        self._last = time.monotonic()

    def stop(self) -> None:
        """End the watch (the round finished or was closed)."""
        self._stop.set()

    def _ask_probe(self) -> None:
        try:
            self._verdict = bool(self._probe and self._probe())
        except Exception:  # a probe that breaks says nothing about the server: wait on
            log.exception("the server status check failed")
            self._verdict = True

    def _waiting_hangs(self) -> bool:
        """Whether the wait for headers, past idle_timeout, is a hang (False: wait on)."""
        if self._probe is None:
            return False
        if not self._probing:
            self._probing, self._verdict = True, None
            threading.Thread(target=self._ask_probe, daemon=True, name="llamachat-probe").start()
            return False
        if self._verdict is None:
            return False
        self._probing = False
        if self._verdict:
            self._last = time.monotonic()
            return False
        return True

    def _rest(self) -> float:
        """How long to sleep before looking again."""
        if self._probing:
            return self.PROBE_TICK
        if self._idle is None:
            return self.MAX_REST
        left = self._last + self._idle - time.monotonic()
        # Past the deadline yet still watching: headers not in, the server looked at.
        return min(self.MAX_REST, left) if left > 0 else self.PROBE_TICK

    def _run(self) -> None:
        # Waiting on the cancel event wakes the thread the moment it is set; with no
        # cancel event, stop() wakes it.
        wake = self._cancel if self._cancel is not None else self._stop
        while True:
            wake.wait(self._rest())
            if self._stop.is_set():
                return
            silent = self._idle is not None and time.monotonic() - self._last > self._idle
            if self._cancel is not None and self._cancel.is_set():
                self.reason = "cancelled"
            elif self._armed and silent:
                self.reason = "stalled"
            elif not self._armed and silent and self._waiting_hangs():
                self.reason = "hung"
            else:
                continue
            sock = self._find_socket()
            if sock is not None and not self._stop.is_set():
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return


class ManagedKey(httpx.Auth):
    """Sends the key of the llama-server llamachat started, looked up at each request.

    Looked up late because the server usually starts after the client is made (the
    window lists models while it starts), and another llamachat may restart it with a new
    key. `on_key` is told each key sent, so the client masks it in its error messages.
    """

    def __init__(self, base_url: str, on_key: Callable[[str], None]) -> None:
        self._base_url = base_url
        self._on_key = on_key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the managed server's key, when `base_url` is one, to `request`."""
        key = managed_key(self._base_url)
        if key:
            self._on_key(key)
            request.headers["Authorization"] = f"Bearer {key}"
        yield request
