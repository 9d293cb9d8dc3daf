"""MCP servers' tools in the tool loop: one hub owning every session, and its `Tool` entries.

`Hub(servers)` runs one background thread with its own asyncio loop; every MCP
session (the official `mcp` SDK, stdio or Streamable HTTP) lives there and nothing
of it touches the caller's thread. Callers use plain blocking methods, safe from any
thread but the loop's: `turn_tools` (start what the turn offers, wait a bounded
time, return `McpTool`s), `call`, `states` (a snapshot for the panel), `close`.

A server starts lazily, at the first turn that offers its tools, or at `start()`
when `autostart` is set. Its `tools/list` is cached and listed again on
`notifications/tools/list_changed`. A server that fails (at start, or its
connection breaks mid-call) is shown as failed with the last lines of its stderr,
and started again at a later call, after a backoff that doubles per failure. A
server that hangs at start-up only costs a turn `start_wait` seconds.

Child processes: each stdio server is started through `mcp_stdio`'s launcher, so neither
a server nor anything it started outlives llamachat, even one killed with SIGKILL. A server
whose stdout is not UTF-8 fails, saying which bytes it wrote. Its stderr
goes to a rotating log per server (`logs.RotatingLog`) in llamachat's log folder, and
so does one line for each thing the SDK complains of (garbage or invalid JSON-RPC on the server's stdout), which would
otherwise be a traceback on llamachat's stderr.

Secrets: what a server says (stderr, failures, tool descriptions) is shown in the panel
and written to logs with every configured secret masked (`Hub.mask`): the router's and
the providers' keys (`config_secrets`, given as `secrets`) and every server's env_vars
and header values.

Errors: nothing here raises into the tool loop. `McpTool.run` turns a denial, a
timeout, a dead server and a tool error into a tool result the model reads; `call`
raises `McpError` (str(): a sentence) for `McpTool` to convert.

The parts: `mcp_config` (the figures, states, consent answers, secrets and the records
the panel reads), `mcp_hub` (`Hub`: the servers' states and the blocking methods),
`mcp_session` (the loop thread and each server's session on it), `mcp_stdio` (the
launcher of a stdio server, and its stdout), `mcp_log` (each server's log: its stderr,
our notes, the SDK's complaints) and `mcp_tool` (`McpTool`, and what a result says).
This package re-exports the names a caller needs, so `mcp.Hub` and `mcp.ALLOW_ONCE` work.
"""

from llamachat.tools.mcp.mcp_config import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    BACKOFF_CAP,
    BACKOFF_FIRST,
    DENY,
    FAILED,
    IDLE,
    IMAGE_CAP,
    NOTE_CAP,
    OFF,
    READY,
    RESULT_CAP,
    START_TIMEOUT,
    START_WAIT,
    STARTING,
    STDERR_LINE_CAP,
    STDERR_LINES,
    Consent,
    McpError,
    ServerState,
    ToolInfo,
    config_secrets,
)
from llamachat.tools.mcp.mcp_hub import Hub
from llamachat.tools.mcp.mcp_tool import McpTool, capped, decode_image, result_content, schema_text

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "BACKOFF_CAP",
    "BACKOFF_FIRST",
    "DENY",
    "FAILED",
    "IDLE",
    "IMAGE_CAP",
    "NOTE_CAP",
    "OFF",
    "READY",
    "RESULT_CAP",
    "STARTING",
    "START_TIMEOUT",
    "START_WAIT",
    "STDERR_LINES",
    "STDERR_LINE_CAP",
    "Consent",
    "Hub",
    "McpError",
    "McpTool",
    "ServerState",
    "ToolInfo",
    "capped",
    "config_secrets",
    "decode_image",
    "result_content",
    "schema_text",
]
