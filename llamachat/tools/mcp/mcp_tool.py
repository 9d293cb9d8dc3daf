"""An MCP server's tool as the tool loop calls it (`McpTool`), and what its results say.

`McpTool.run` asks consent, calls the server through the hub, and returns what the server
said as text for the model (capped at `RESULT_CAP`, the cut said) plus images for the user,
in a ``mcp_done`` event.

Errors: nothing here raises into the tool loop. A denial, a timeout, a dead server and a
tool error each become a tool result the model reads.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Protocol

from llamachat.tools.base import Tool, ToolError, ToolResult, json_arguments
from llamachat.tools.mcp.mcp_config import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    IMAGE_CAP,
    RESULT_CAP,
    Consent,
    McpError,
    ToolInfo,
)


class Caller(Protocol):
    """What a tool needs of the hub: a call, and the mask for what a server says."""

    def call(self, tool: ToolInfo, arguments: dict, timeout: float) -> Any:
        """Call `tool` and return the SDK's CallToolResult; McpError when there is none."""
        ...

    def mask(self, text: str) -> str:
        """`text` with every configured secret masked."""
        ...


def schema_text(info: ToolInfo) -> str:
    """The tool's entry as the request carries it (what its token cost is measured on)."""
    return json.dumps(info.schema, ensure_ascii=False)


@dataclass
class _Content:
    text: str
    images: list[dict]


def result_content(result: Any) -> _Content:
    """What a CallToolResult says, as text for the model plus images for the user."""
    parts: list[str] = []
    images: list[dict] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind == "image":
            data = str(getattr(block, "data", ""))
            size = len(data) * 3 // 4
            mime = str(getattr(block, "mime_type", "") or getattr(block, "mimeType", ""))
            parts.append(f"[image {mime}, {size:,} bytes: shown to the user]")
            if len(data) <= IMAGE_CAP:
                images.append({"mime": mime, "data": data})
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            uri = str(getattr(resource, "uri", ""))
            text = getattr(resource, "text", None)
            parts.append(f"[resource {uri}]\n{text}" if text else f"[binary resource {uri}]")
        elif kind == "resource_link":
            parts.append(
                f"[resource link: {getattr(block, 'uri', '')} {getattr(block, 'name', '')}]"
            )
        elif kind == "audio":
            data = str(getattr(block, "data", ""))
            parts.append(f"[audio, {len(data) * 3 // 4:,} bytes: not played]")
        else:
            parts.append(f"[{kind or 'unknown'} content: not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    if getattr(result, "is_error", False):
        text = f"error: {text or 'the tool failed'}"
    return _Content(text, images)


def capped(text: str, cap: int = RESULT_CAP) -> str:
    """`text` cut to `cap` characters, saying so (the model learns the cap and the size)."""
    if len(text) <= cap:
        return text
    return (
        text[:cap] + f"\n\n[cut: the result had {len(text):,} characters; results are cut "
        f"at {cap:,}. Ask for less (a narrower query, a smaller range) if you need the rest.]"
    )


class McpTool(Tool):
    """One tool of an MCP server, as the tool loop calls it (asks consent first)."""

    def __init__(self, hub: Caller, info: ToolInfo, timeout: float, consent: Consent) -> None:
        self.hub = hub
        self.info = info
        self.name = info.name
        self.schema = info.schema
        self._timeout = timeout
        self._consent = consent

    def run(self, arguments: str) -> ToolResult:
        """Ask consent, call the server, and return what it said (capped) with a ``mcp_done``."""
        record: dict[str, Any] = {
            "name": self.name,
            "server": self.info.server,
            "tool": self.info.tool,
            "arguments": arguments,
            "result": "",
            "status": "ok",
            "images": [],
        }
        try:
            parsed = json_arguments(arguments, "a JSON object matching its parameters")
        except ToolError as exc:
            record.update(status="error", result=f"error: {exc}")
            return ToolResult(record["result"], [("mcp_done", record)])
        answer = self._consent(self.name, arguments)
        if answer not in (ALLOW_ONCE, ALLOW_ALWAYS):
            text = (
                f"The user did not allow this call of {self.name}; it was not run. Do not "
                "call it again in this reply; answer without it, or ask the user."
            )
            record.update(status="denied", result=text)
            return ToolResult(text, [("mcp_done", record)])
        try:
            result = self.hub.call(self.info, parsed, self._timeout)
        except McpError as exc:
            status = "timeout" if "did not answer within" in str(exc) else "error"
            # The server's own error message may repeat a secret it was given.
            text = f"error: {self.hub.mask(str(exc))}. Carry on without it, and tell the user if the answer needed it."
            record.update(status=status, result=text)
            return ToolResult(text, [("mcp_done", record)])
        content = result_content(result)
        text = capped(content.text)
        record.update(
            status="error" if getattr(result, "is_error", False) else "ok",
            result=text,
            images=content.images,
        )
        return ToolResult(text, [("mcp_done", record)])


def decode_image(record_image: dict) -> bytes:
    """The bytes of an image a `mcp_done` record carries (b'' when it is garbled)."""
    try:
        return base64.b64decode(str(record_image.get("data", "")), validate=False)
    except ValueError:
        return b""
