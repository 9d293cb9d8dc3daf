"""A streaming reply's text: what it has so far, and where it stands in the server's stream.

`ReplyText` is the reply's own copy of its answer, reasoning and MCP calls (what
History is given, kept until History has taken it). A reply that goes on from an
earlier one starts from that one's text: Continue (`continues`, its row) drops the
prefilled text llama.cpp streams back first (`_Echo`); a reply picked up again
(`resumes`, its saved place) is cut back to the text that place covers, so nothing
comes twice. `place` follows the worker's positions in the server's copy of the
stream, in terms of this text, for `History.reply_streams`.
"""

from __future__ import annotations

from collections.abc import Mapping


class ReplyText:
    """A reply's text so far, from a Continue or a resume, and its place in the stream."""

    def __init__(self, continues: Mapping | None = None, resumes: Mapping | None = None) -> None:
        # The reply's own copy of its text: what History is given, with or without a view,
        # and kept until History has taken it.
        self.content: list[str] = []
        self.reasoning: list[str] = []
        # The MCP calls made, as History stores them (`reply.stored_call`).
        self.tool_calls: list[dict] = []
        self._echo = _Echo("")
        self.place = _Place()
        if continues is not None:
            self.content = [continues.get("content") or ""]
            self.reasoning = [continues.get("reasoning") or ""]
            self.tool_calls = list(continues.get("tool_calls") or [])
            self._echo = _Echo(self.content[0])
        if continues is not None and resumes is not None:
            # What came after the saved place is read again: the text is cut back to it.
            self.content = [self.content[0][: int(resumes["content"])]]
            self.reasoning = [self.reasoning[0][: int(resumes["reasoning"])]]
            self._echo = _Echo("")

    def take_content(self, text: str) -> str:
        """Take answer text the worker gave; what of it is new ('' while it may be the echo)."""
        self.place.given["content"] += len(text)
        text = self._echo.past(text)
        if text:
            self.content.append(text)
        return text

    def take_reasoning(self, text: str) -> None:
        """Take reasoning text the worker gave."""
        self.place.given["reasoning"] += len(text)
        self.reasoning.append(text)

    def moved(self, position: dict) -> None:
        """Take the worker's `position`, given after all the text so far."""
        self.place.moved(position, self.content, self.reasoning)

    def has_text(self) -> bool:
        """Whether the reply has any answer or reasoning text."""
        return any(self.content) or any(self.reasoning)

    def answer(self) -> str:
        """The answer text, whole."""
        return "".join(self.content)

    def reasoning_text(self) -> str:
        """The reasoning text, whole."""
        return "".join(self.reasoning)


class _Place:
    """Where a reply stands in the server's copy of its stream, in terms of its own text."""

    def __init__(self) -> None:
        # The text the worker gave (before an echo is dropped), and the place last known.
        self.given = {"content": 0, "reasoning": 0}
        self.at: dict | None = None

    def moved(self, position: dict, content: list[str], reasoning: list[str]) -> None:
        """Take the worker's `position`, given after all of `content` and `reasoning` so far."""
        # Text given after the position (the same burst) is not covered by it.
        self.at = {
            "conversation": position["conversation"],
            "offset": position["offset"],
            "content": sum(map(len, content)) - (self.given["content"] - position["content"]),
            "reasoning": sum(map(len, reasoning))
            - (self.given["reasoning"] - position["reasoning"]),
        }


class _Echo:
    """Drops the prefilled text a server streams back first when a reply is continued."""

    def __init__(self, prefill: str) -> None:
        self._prefill = prefill
        self._held = ""
        self._done = not prefill

    def past(self, piece: str) -> str:
        """What of `piece` is new text: '' while it may still be the echo."""
        if self._done:
            return piece
        held = self._held + piece
        if len(held) < len(self._prefill) and self._prefill.startswith(held):
            self._held = held
            return ""
        self._done = True
        # A server that does not echo sends only the new text: kept whole.
        return held.removeprefix(self._prefill)
