"""What the MCP client's parts share: its figures, server states and consent answers, the
secrets a config holds, and the records the panel reads (`ToolInfo`, `ServerState`).

Errors: `McpError` (str(): a sentence the model reads) is the one exception of the MCP
client; `McpTool` turns it into a tool result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llamachat.config import Config, McpServerConfig

# What the model reads of one result at most; the rest is cut, and the cut is said.
RESULT_CAP = 20_000
# Images larger than this are described to the user, not kept in the history.
IMAGE_CAP = 1_000_000
# Seconds a server has to answer `initialize` and `tools/list`.
START_TIMEOUT = 30.0
# Seconds a turn waits for servers that are still starting before it goes on without them.
START_WAIT = 10.0
# Seconds before a failed server is started again: doubles per failure in a row, up to the cap.
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0
STDERR_LINES = 12
# A stderr "line" longer than this is logged in pieces of this size.
STDERR_LINE_CAP = 65536
# Characters of one line llamachat writes to a server's log about it.
NOTE_CAP = 500


# Consent answers (`Consent` callbacks return one).
ALLOW_ONCE = "once"
ALLOW_ALWAYS = "always"
DENY = "deny"
Consent = Callable[[str, str], str]
"""Asked before a call runs with (tool name, JSON arguments); answers ALLOW_ONCE, ALLOW_ALWAYS or DENY."""

# Server states, as the panel shows them.
OFF = "off"  # disabled in the config
IDLE = "not started"
STARTING = "starting"
READY = "ready"
FAILED = "failed"


def config_secrets(cfg: Config) -> tuple[str, ...]:
    """The router's and the providers' keys that are set: what a Hub's `secrets` should be."""
    keys = [cfg.api_key(), *(provider.api_key() for provider in cfg.providers)]
    return tuple(key for key in keys if key)


def server_secrets(cfg: McpServerConfig) -> list[str]:
    """The secret values a server is given: its env_vars' values and its headers' values."""
    environment = cfg.environment()
    return [
        *(environment.get(name, "") for name, _variable in cfg.env_vars),
        *cfg.headers().values(),
    ]


class McpError(Exception):
    """A call that could not be made or answered; str() is the sentence the model reads."""


@dataclass(frozen=True)
class ToolInfo:
    """One tool a server lists: its wire name in the turn and the schema offered."""

    server: str
    tool: str  # the server's own name for it
    name: str  # <server>_<tool>, as the model calls it
    description: str
    schema: dict  # the OpenAI `tools` entry; {} when the server's schema is unusable
    problem: str = ""  # why it cannot be offered ('' when it can)


@dataclass(frozen=True)
class ServerState:
    """A server as the panel shows it: its state, last stderr lines and tools."""

    name: str
    status: str
    error: str = ""
    stderr: tuple[str, ...] = ()
    tools: tuple[ToolInfo, ...] = ()
    log_path: Path | None = None
