"""A conversation's versions: editing a sent message, switching versions, forking.

Sending an edited message adds it as another version of the one edited (the old one and its
replies stay a branch, ‹ n/N › on the message); `show` makes another version's path the
one shown and sent from; `fork` copies the path up to a message into a new chat.

Errors: none raised. History failures become a `notice` and the action is not done.
"""

from __future__ import annotations

from collections.abc import Callable

from llamachat.history.store import History, HistoryError, MessageRow
from llamachat.ui.chat.state import CHAT, ONESHOT, ChatState


class Versions:
    """Edit, switch and fork the messages of the chat in `state`, through its history.

    It reads `state` and asks its writer (`state.ChatWriter`) to change which message is
    edited (`ask_editing`)."""

    def __init__(
        self,
        state: ChatState,
        *,
        history: Callable[[], History],
        stop: Callable[[], bool],
        is_streaming: Callable[[], bool],
        ask_editing: Callable[[int | None], None],
        reset: Callable[[object], None],
        notice: Callable[[str, int], None],
    ) -> None:
        self._state = state
        self._history = history
        self._stop = stop
        self._is_streaming = is_streaming
        self._ask_editing = ask_editing
        self._reset = reset
        self._notice = notice

    def edit(self, message_id: object) -> MessageRow | None:
        """The sent message to put back in the composer (None when there is none).

        In chat mode, sending next adds the new text as another version of it (the old
        one and its replies stay a branch); a one-shot question is asked again as a new one.
        """
        session_id = self._state.session_id
        if session_id is None:
            return None
        if self._state.mode == ONESHOT and self._is_streaming():
            return None
        messages = self._history().messages(session_id)
        message = next((m for m in messages if m["id"] == message_id), None)
        if message is None or message["role"] != "user":
            return None
        if self._state.mode == CHAT:
            self._stop()
            self._ask_editing(message["id"])
            self._notice(
                "Editing: sending makes a new version of this message; the old one stays "
                "(‹ › on the message switches).",
                8000,
            )
        return message

    def show(self, message_id: object) -> bool:
        """Show (and send from now on) the path through this version of a message."""
        session_id = self._state.session_id
        if session_id is None or not isinstance(message_id, int):
            return False
        if self._is_streaming():
            self._notice("Wait for the reply to finish, or stop it, to switch versions.", 8000)
            return False
        try:
            path = self._history().select_version(session_id, message_id)
        except HistoryError as exc:
            self._notice(f"That version could not be shown: {exc}", 0)
            return False
        self._ask_editing(None)
        self._reset(path)
        return True

    def fork(self, message_id: object) -> int | None:
        """A new chat with this chat's path up to `message_id`, its skills and prompt; its id."""
        session_id = self._state.session_id
        if session_id is None or not isinstance(message_id, int):
            return None
        try:
            return self._history().fork(session_id, message_id)
        except HistoryError as exc:
            self._notice(f"The new chat could not be made: {exc}", 0)
            return None
