"""Where a streaming reply stands in the server's copy of its stream (table reply_streams).

llama.cpp keeps a reply's stream under its `X-Conversation-Id`; a reply's row is saved
with the bytes of that stream read so far and how much of the row's text they brought
(`router.stream.Position`'s fields: conversation, offset, content, reasoning), so a
reply a crash left "streaming" is read on from there. `History.reply_streams` is a
`ReplyStreams` over History's own connection (its errors: History's).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence

UPSERT = (
    "INSERT INTO reply_streams"
    " (message_id, conversation, byte_offset, content_chars, reasoning_chars)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id) DO UPDATE SET"
    " conversation = excluded.conversation, byte_offset = excluded.byte_offset,"
    " content_chars = excluded.content_chars, reasoning_chars = excluded.reasoning_chars"
)
SELECT = (
    "SELECT conversation, byte_offset, content_chars, reasoning_chars"
    " FROM reply_streams WHERE message_id = ?"
)


def values(message_id: int, position: Mapping) -> tuple:
    """The UPSERT parameters for `position` of reply `message_id`."""
    return (
        message_id,
        str(position["conversation"]),
        int(position["offset"]),
        int(position["content"]),
        int(position["reasoning"]),
    )


def decoded(rows: Sequence[Sequence]) -> dict | None:
    """The position SELECT found (None: none saved)."""
    if not rows:
        return None
    conversation, offset, content, reasoning = rows[0]
    return {
        "conversation": conversation,
        "offset": offset,
        "content": content,
        "reasoning": reasoning,
    }


class ReplyStreams:
    """The reply_streams table, written and read through History's `write` and `read`."""

    def __init__(
        self,
        write: Callable[[str, tuple], sqlite3.Cursor],
        read: Callable[[str, tuple], list[sqlite3.Row]],
    ) -> None:
        self._write = write
        self._read = read

    def save(self, message_id: int, position: Mapping) -> None:
        """Keep where reply `message_id` stands in its server stream (save it after its text)."""
        self._write(UPSERT, values(message_id, position))

    def get(self, message_id: int) -> dict | None:
        """Where the reply `message_id` stood in its stream when last saved (None: unknown)."""
        return decoded(self._read(SELECT, (message_id,)))
