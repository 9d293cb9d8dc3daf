"""The tools a model can call: one small interface, and the tools the app offers.

A `Tool` has a `name`, a `schema` (the entry of the OpenAI `tools` list; empty: not
offered this round) and `run(arguments) -> ToolResult`: the text the model reads, plus
the stream events the window shows (``search_done``, ``skill_loaded``, and ``tool_done``,
any other tool's call and short result, shown as a search is). A tool may also
`announce` a call before it runs (``search_start``), so the window can say what is being
waited for. A turn holds its tools (`turn.Turn.tools`); `backend.Client.stream_chat` looks
them up there by name and knows nothing else about them: adding a built-in tool is its
module (a `Tool` and a `make`), one line in `offer.BUILTIN` and its config key. A tool may
keep what its calls did (the skills loaded) for the rest of its turn: a turn is sent once.

Errors: a tool raises `ToolError` for a failure the model should read (bad arguments,
an unknown skill); `answer` turns that, an unknown tool name and any other exception
raised by `run` into a tool *result*, so the model always gets an answer to its call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Event = tuple[str, object]
"""A stream event a tool hands the window: (kind, value), as `backend.StreamEvent`."""


class ToolError(Exception):
    """A tool call that cannot be answered; str() is the sentence the model reads."""


@dataclass
class ToolResult:
    """What one tool call produced: the text the model reads and the events the window shows."""

    text: str
    events: list[Event] = field(default_factory=list)


class Tool:
    """A function the model can call; subclasses set `name` and `schema` and implement `run`."""

    name: str
    schema: dict

    def announce(self, arguments: str) -> list[Event]:
        """Events to show before the call runs (none by default)."""
        return []

    def run(self, arguments: str) -> ToolResult:
        """Answer one call whose JSON arguments are `arguments`; raise ToolError to refuse."""
        raise NotImplementedError


def answer(tools: Sequence[Tool], name: str, arguments: str) -> tuple[list[Event], ToolResult]:
    """Run the call `name(arguments)`: its announce events and its result, failures included.

    Never raises (but for BaseExceptions such as KeyboardInterrupt): every failure
    becomes a result the model reads, as simonw/llm does, so a turn always goes on.
    """
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        names = ", ".join(sorted(t.name for t in tools))
        return [], ToolResult(f"error: unknown tool '{name}'. The tools you can call are: {names}.")
    announced: list[Event] = []
    try:
        announced = tool.announce(arguments)
        return announced, tool.run(arguments)
    except ToolError as exc:
        return announced, ToolResult(f"error: {exc}")
    except Exception as exc:
        log.exception("the %s tool failed", name)
        return announced, ToolResult(
            f"error: the {name} tool failed ({type(exc).__name__}: {exc}). "
            "Carry on without it, and tell the user if the answer needed it."
        )


def json_arguments(arguments: str, example: str) -> dict:
    """The call's arguments as a JSON object; else a ToolError showing `example`."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ToolError(f"the arguments were not a JSON object; call it with {example}")
    return parsed
