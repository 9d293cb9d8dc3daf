"""The MCP hub: every configured server's state, and the blocking methods callers use.

`Hub(servers)` keeps one record per server and hands its sessions to `Sessions`, which
runs them on one background thread with its own asyncio loop. Callers use plain blocking
methods, safe from any thread but the loop's: `turn_tools` (start what the turn offers,
wait a bounded time, return `McpTool`s), `call`, `states` (a snapshot for the panel),
`close`.

A server starts lazily, at the first turn that offers its tools, or at `start()`
when `autostart` is set. A server that fails (at start, or its connection breaks
mid-call) is shown as failed with the last lines of its stderr, and started again at a
later call, after a backoff that doubles per failure. A server that hangs at start-up
only costs a turn `start_wait` seconds.

Secrets: what a server says (stderr, failures, tool descriptions) is shown in the panel
and written to logs with every configured secret masked (`Hub.mask`): the router's and
the providers' keys (`config_secrets`, given as `secrets`) and every server's env_vars
and header values.

Errors: `call` raises `McpError` (str(): a sentence) for `McpTool` to convert; nothing
else here raises into the tool loop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from llamachat import logs
from llamachat.api_keys import mask_secret
from llamachat.config import McpServerConfig
from llamachat.logs import RotatingLog
from llamachat.tools.mcp.mcp_config import (
    BACKOFF_CAP,
    BACKOFF_FIRST,
    FAILED,
    IDLE,
    OFF,
    READY,
    START_TIMEOUT,
    START_WAIT,
    STARTING,
    STDERR_LINES,
    Consent,
    McpError,
    ServerState,
    ToolInfo,
    server_secrets,
)
from llamachat.tools.mcp.mcp_session import ServerRecord, Sessions
from llamachat.tools.mcp.mcp_tool import McpTool

log = logging.getLogger(__name__)


class Hub:
    """Every MCP session, owned by one background thread with its own asyncio loop."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig] = (),
        *,
        log_dir: Path | None = None,
        start_timeout: float = START_TIMEOUT,
        start_wait: float = START_WAIT,
        on_change: Callable[[], None] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self._log_dir = log_dir or logs.log_dir()
        # Masked in everything servers say, beside the servers' own (config_secrets).
        self.secrets = tuple(secrets)
        self.start_wait = start_wait
        # Called from the loop thread whenever a state changes; the GUI posts it to its thread.
        self.on_change = on_change
        self._lock = threading.Lock()
        self._servers: dict[str, ServerRecord] = {}
        self._sessions = Sessions(
            start_timeout=start_timeout, mask=self.mask, set_state=self._set, failed=self._failed
        )
        self.configure(servers)

    @property
    def start_timeout(self) -> float:
        """Seconds a server has to answer `initialize` and `tools/list` (its sessions')."""
        return self._sessions.start_timeout

    # ------------------------------------------------------------------ any thread

    def configure(self, servers: Sequence[McpServerConfig]) -> None:
        """Follow a new server list: changed and removed servers stop, new ones wait to start."""
        wanted = {s.name: s for s in servers}
        with self._lock:
            for name in list(self._servers):
                server = self._servers[name]
                if wanted.get(name) != server.cfg:
                    self._sessions.submit(self._sessions.stop(server))
                    del self._servers[name]
            for name, cfg in wanted.items():
                if name not in self._servers:
                    status = IDLE if cfg.enabled else OFF
                    self._servers[name] = ServerRecord(
                        cfg,
                        ServerState(name, status, log_path=self._log_dir / f"mcp-{name}.log"),
                        RotatingLog(self._log_dir / f"mcp-{name}.log"),
                    )
        self._changed()

    def mask(self, text: str) -> str:
        """`text` with every configured secret masked (what a server says, before it is shown)."""
        with self._lock:
            configs = [server.cfg for server in self._servers.values()]
        for secret in (*self.secrets, *(s for cfg in configs for s in server_secrets(cfg))):
            text = mask_secret(text, secret)
        return text

    def start(self) -> None:
        """Start the servers marked `autostart` now, without waiting for them."""
        with self._lock:
            servers = [s for s in self._servers.values() if s.cfg.enabled and s.cfg.autostart]
        for server in servers:
            self._begin(server)

    def states(self) -> list[ServerState]:
        """Every configured server as it stands now, in config order."""
        with self._lock:
            return [server.state for server in self._servers.values()]

    def restart(self, name: str) -> None:
        """Stop server `name` if it runs and start it again, without waiting (the panel's)."""
        with self._lock:
            server = self._servers.get(name)
        if server is None or not server.cfg.enabled:
            return
        server.failures, server.retry_at = 0, 0.0
        with self._lock:
            server.ready.clear()
            server.state = replace(server.state, status=STARTING, error="")
        self._changed()
        self._sessions.submit(self._sessions.start(server))  # which stops it first

    def turn_tools(
        self,
        *,
        consent: Consent,
        disabled: Sequence[str] = (),
        cancel: threading.Event | None = None,
        skip: threading.Event | None = None,
        no_wait: Collection[str] = (),
        on_wait: Callable[[list[str]], None] | None = None,
    ) -> list[McpTool]:
        """The tools of every enabled server for one turn, starting those not started yet.

        Waits at most `start_wait` seconds for servers still starting (a hung one is left
        behind, still trying), but not for those named in `no_wait`, and no longer once
        `skip` is set; `on_wait` is called first with the names waited for, when there
        are any. `disabled` tools are left out.
        """
        with self._lock:
            servers = [s for s in self._servers.values() if s.cfg.enabled]
        for server in servers:
            if server.state.status in (IDLE, FAILED) and time.monotonic() >= server.retry_at:
                self._begin(server)
        waited = [s for s in servers if s.state.status == STARTING and s.cfg.name not in no_wait]
        if waited and on_wait is not None:
            on_wait([server.cfg.name for server in waited])
        deadline = time.monotonic() + self.start_wait
        for server in waited:
            while server.state.status == STARTING and time.monotonic() < deadline:
                if cancel is not None and cancel.is_set():
                    return []
                if skip is not None and skip.is_set():
                    break
                server.ready.wait(0.05)
        tools: list[McpTool] = []
        for server in servers:
            if server.state.status != READY:
                continue
            for info in server.state.tools:
                if info.problem or info.name in disabled:
                    continue
                tools.append(McpTool(self, info, server.cfg.timeout, consent))
        return tools

    def call(self, tool: ToolInfo, arguments: dict, timeout: float) -> Any:
        """Call `tool` and return the SDK's CallToolResult; McpError when there is none."""
        with self._lock:
            server = self._servers.get(tool.server)
        if server is None:
            raise McpError(f"the MCP server {tool.server} is no longer configured")
        if server.state.status != READY:
            wait = server.retry_at - time.monotonic()
            if server.state.status == FAILED and wait > 0:
                raise McpError(
                    f"the MCP server {tool.server} failed ({server.state.error}); it is "
                    f"started again in {wait:.0f} s"
                )
            if server.state.status != STARTING:
                self._begin(server)
            server.ready.wait(self.start_timeout)
            if server.state.status != READY:
                raise McpError(
                    f"the MCP server {tool.server} could not be started: "
                    f"{server.state.error or 'it did not answer in time'}"
                )
        future = self._sessions.submit(self._sessions.call(server, tool.tool, arguments, timeout))
        try:
            # The loop enforces `timeout`; this margin only guards against a stuck loop.
            return future.result(timeout + 5)
        except TimeoutError:
            future.cancel()
            raise McpError(f"{tool.name} did not answer within {timeout:g} s") from None

    def close(self, timeout: float = 5.0) -> None:
        """Stop every server (their processes end) and the loop thread."""
        if not self._sessions.running():
            return
        with self._lock:
            servers = list(self._servers.values())
        stops = [self._sessions.submit(self._sessions.stop(s)) for s in servers]
        deadline = time.monotonic() + timeout
        for stop in stops:
            with contextlib.suppress(Exception):
                stop.result(max(0.1, deadline - time.monotonic()))
        self._sessions.end(max(0.1, deadline - time.monotonic()))
        for server in servers:
            server.log.close()

    # ------------------------------------------------------------------ helpers

    def _set(self, server: ServerRecord, **changes: Any) -> None:
        with self._lock:
            server.state = replace(server.state, **changes)
        if server.state.status != STARTING:
            server.ready.set()
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("an MCP state listener failed")

    def _begin(self, server: ServerRecord) -> None:
        with self._lock:
            if server.state.status == STARTING:
                return
            server.ready.clear()
            server.state = replace(server.state, status=STARTING, error="")
        self._changed()
        self._sessions.submit(self._sessions.start(server))

    def _failed(self, server: ServerRecord, error: str) -> None:
        server.failures += 1
        delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (server.failures - 1))
        server.retry_at = time.monotonic() + delay
        tail = tuple(server.stderr)[-STDERR_LINES:]
        error = self.mask(error)
        log.warning("MCP server %s failed: %s", server.cfg.name, error)
        self._set(server, status=FAILED, error=error, stderr=tail)
