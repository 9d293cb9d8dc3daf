"""Which tools a turn offers: the built-in ones, listed once in `BUILTIN`, then any extra (MCP) ones.

A built-in tool is its module, one line in `BUILTIN` and its config key. The entry names
the key that turns the tool on (a chat may say otherwise: `Inputs.switches`, its web search
toggle), or none when its inputs do (a skills store, a library), and its module's `make`,
which makes the turn's tools from the turn's `Inputs` (none when they would offer nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llamachat.tools import documents, remember, skill_tools, web_search
from llamachat.tools.base import Tool
from llamachat.tools.inputs import Inputs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Builtin:
    """One built-in tool (or family of tools) in `BUILTIN`."""

    key: str
    """The config key that turns it on ('': its inputs do)."""
    make: Callable[[Inputs], Sequence[Tool]]
    """Its tools for one turn, from the turn's inputs."""


BUILTIN: list[Builtin] = [
    Builtin("search_enabled", web_search.make),
    Builtin("", skill_tools.make),
    Builtin("", documents.make),
    Builtin("memory_enabled", remember.make),
]
"""The built-in tools, in the order a request offers them."""


def offered(inputs: Inputs, extra: Sequence[Tool] = ()) -> tuple[Tool, ...]:
    """A turn's tools: the built-in ones `inputs` turn on, in `BUILTIN`'s order, then the
    `extra` (MCP) tools, those of a name already offered left out."""
    builtin = [
        tool
        for entry in BUILTIN
        if not entry.key or inputs.on(entry.key)
        for tool in entry.make(inputs)
    ]
    return joined(builtin, extra)


def joined(tools: Sequence[Tool], extra: Sequence[Tool]) -> tuple[Tool, ...]:
    """`tools`, then each of `extra` whose name none of them has (the first one wins)."""
    out = list(tools)
    names = {tool.name for tool in out}
    for tool in extra:
        if tool.name in names:
            log.warning("the tool %s is not offered: another tool has its name", tool.name)
            continue
        names.add(tool.name)
        out.append(tool)
    return tuple(out)
