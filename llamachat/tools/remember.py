"""The `remember` tool: the model keeps a short fact for later chats (the Memory panel shows it).

Offered only while memory is on for the chat (`memory_enabled`: the config's, the chat's
own switch, never in a temporary chat nor for a provider not allowed `memory_providers`).
The tool runs in the reply's worker thread, and the history's SQLite connection belongs
to the GUI thread: it never writes. Its call becomes a ``remembered`` event carrying the
text, which the window saves on the GUI thread (as load_skill's ``skill_loaded`` loads a
skill there), and a ``tool_done`` event that shows "Remembered: …" in the reply.
"""

from __future__ import annotations

from llamachat.history.memories import MAX_CHARS
from llamachat.tools.base import Tool, ToolError, ToolResult, json_arguments
from llamachat.tools.inputs import Inputs

NAME = "remember"

TOOL_SCHEMA: dict = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": (
            "Keep one short fact about the user or their work for later conversations "
            "(a preference, a name, a decision), when the user asks you to remember it or "
            "it will clearly matter again. The user sees and can undo every memory. Not "
            "for passing details of this conversation."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "fact": {
                    "type": "string",
                    "description": "The fact, one short sentence "
                    '(e.g. "Prefers answers in metric units").',
                }
            },
            "required": ["fact"],
        },
    },
}


class Remember(Tool):
    """`remember`: hands a fact to the window to keep; the model reads that it was kept."""

    name = NAME
    schema = TOOL_SCHEMA

    def run(self, arguments: str) -> ToolResult:
        """A ``remembered`` event for the window to save, and the reply's note of it."""
        fact = json_arguments(arguments, '{"fact": "<one short sentence>"}').get("fact")
        if not isinstance(fact, str) or not fact.strip():
            raise ToolError('give the fact to remember, as {"fact": "<one short sentence>"}')
        fact = " ".join(fact.split())
        if len(fact) > MAX_CHARS:
            raise ToolError(f"a memory is one short sentence (at most {MAX_CHARS} characters)")
        shown = {"title": "Remembered", "query": fact, "results": [], "error": ""}
        return ToolResult(
            f"Remembered: {fact}. The user can see and undo it in the Memory panel.",
            [("tool_done", shown), ("remembered", fact)],
        )


def make(inputs: Inputs) -> list[Tool]:
    """The turn's remember tool (its key, memory_enabled, said it is on)."""
    return [Remember()]
