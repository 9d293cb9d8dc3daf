"""Each chat's draft: what is typed in the composer stays with the chat it was typed in.

`Drafts(composer, chat)` saves the composer's text as the open chat's draft a moment
after typing stops (`SAVE_DELAY_MS`: never on each key), and at once when the window
switches chats (`leave`) or closes (`save`); `show` puts the draft of the chat opened
next into the composer. The new chat keeps its draft too (History's session 0), so it
survives a quit; once its first message is sent, the session made for it takes over and
the new chat's draft is forgotten. Attachments waiting in the composer stay with their
chat as well, for as long as the window is open (they are not saved). Sending clears
the composer, which clears the draft.

A draft is kept in the history of the chat it was typed in, taken when the chat is
shown: a temporary chat's goes to its History in memory (its session ids are that
database's, and mean other chats in the file), so nothing of it reaches the history
file; keeping the chat copies its draft with it (`temporary.keep`).

A question held while the chat is compacted (`Compaction.waiting`) left the composer
but is not sent yet: it stays the chat's draft until its send has begun (the compaction
ended, the question saved or put back), so a crash meanwhile loses nothing.

Edit puts a sent message in the composer: that text is not a draft. While a message is
edited nothing is saved, and when the editing ends (Esc, or the edit sent) the composer
gets back what it held before Edit, which stayed the chat's draft all along.

Errors: none raised; a draft History cannot take is logged and said once (`status`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from llamachat.history.store import History, HistoryError

if TYPE_CHECKING:
    from llamachat.ui.chat.conversation import Conversation
    from llamachat.ui.views.composer import Attachment, Composer

log = logging.getLogger(__name__)

# Typing pauses this long before the draft is saved: one write per pause, not per key.
SAVE_DELAY_MS = 800


class Drafts(QObject):
    """Keeps the composer's text (and attachments) with the chat they were typed in."""

    status = Signal(str, int)  # text, how long to show it in ms
    drafted = Signal(object, bool)  # a chat (None: the new chat), whether it holds a draft now

    def __init__(
        self,
        composer: Composer,
        chat: Conversation,
        *,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._composer = composer
        self._chat = chat
        # The chat whose draft the composer holds, the History it is kept in, and its
        # text as that History has it.
        self._shown: int | None = chat.session_id
        self._history: History = chat.history
        self._saved = ""
        self._attachments: dict[int | None, list[Attachment]] = {}
        self._failed = False
        # The chat and question a compaction holds: its draft while the composer is empty.
        self._held: tuple[int | None, str] | None = None
        # What the composer held when Edit put a sent message in it (None: not editing).
        self._before_edit: tuple[str, list[Attachment]] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self.save)
        composer.editor.textChanged.connect(self._timer.start)
        chat.temporary_changed.connect(self._on_temporary_changed)
        chat.compaction.started.connect(self._on_compaction_started)
        # Queued: the question that waited is saved (or put back) first, in the same slot.
        chat.compaction.ended.connect(self._on_compaction_ended, Qt.ConnectionType.QueuedConnection)
        chat.editing.connect(self._on_editing)

    def save(self) -> None:
        """Save the composer's text as its chat's draft now ('' forgets the draft)."""
        self._timer.stop()
        if self._before_edit is not None:
            return  # the box holds a sent message being edited: the draft is unchanged
        session_id = self._chat.session_id
        if session_id != self._shown:
            # Only sending changes the session under the composer: the new chat got a
            # session for its first message, and what it had typed was that message.
            if self._shown is None:
                self._write(None, "")
            self._shown, self._saved = session_id, ""
        text = self._composer.text()
        if not text and self._held is not None and self._held[0] == session_id:
            text = self._held[1]
        if text != self._saved and self._write(session_id, text):
            self._saved = text

    def leave(self, *, carry: bool = False) -> None:
        """The window is about to show another chat: save this one's draft.

        `carry`: the text goes along to the next chat instead (it is no longer this one's).
        """
        self.save()
        if carry:
            self._write(self._shown, "")
        elif self._history is self._chat.app.history:
            # A temporary chat's attachments end with it (its ids are another database's);
            # while a message is edited, the box holds its attachments, not the draft's.
            before = self._before_edit
            kept = before[1] if before is not None else self._composer.attachments()
            self._attachments[self._shown] = kept
        self._before_edit = None

    def show(self, session_id: int | None, *, carry: bool = False) -> None:
        """The window shows `session_id` now (None: a new chat): put its draft in the composer.

        `carry`: keep the composer as it is, its text now this chat's draft.
        """
        self._shown, self._saved = session_id, ""
        self._history = self._chat.history
        if carry:
            self.save()
            return
        try:
            text = self._history.draft(session_id)
        except HistoryError as exc:
            log.warning("the draft of chat %s could not be read: %s", session_id, exc)
            text = ""
        self._composer.set_text(text)
        temporary = self._history is not self._chat.app.history
        self._composer.set_attachments([] if temporary else self._attachments.pop(session_id, []))
        self._timer.stop()
        self._saved = text

    def _on_temporary_changed(self, began: bool) -> None:
        # The new chat shown became a temporary one: from now on its draft is the memory's.
        if began:
            self.leave()
            self.show(None)

    def _on_compaction_started(self) -> None:
        held = self._chat.compaction.waiting()
        if held:
            self._held = (self._shown, held)
            self.save()

    def _on_compaction_ended(self) -> None:
        if self._held is not None:
            self._held = None
            self.save()

    @Slot(object)
    def _on_editing(self, message_id: object) -> None:
        if message_id is not None:
            if self._before_edit is None:
                self.save()
                self._before_edit = (self._composer.text(), self._composer.attachments())
            return
        before, self._before_edit = self._before_edit, None
        if before is not None:
            # Later in this turn of the event loop: an edit that was sent clears the
            # composer after it stops being edited.
            QTimer.singleShot(0, self, lambda: self._put_back(before, self._shown))

    def _put_back(self, before: tuple[str, list[Attachment]], session_id: int | None) -> None:
        """Show the draft held before Edit again, if its chat is still the one shown."""
        if session_id != self._shown or self._before_edit is not None:
            return
        self._composer.set_text(before[0])
        self._composer.set_attachments(before[1])
        self._timer.stop()
        self._saved = before[0]

    def _write(self, session_id: int | None, text: str) -> bool:
        try:
            self._history.set_draft(session_id, text)
        except HistoryError as exc:
            log.warning("the draft of chat %s could not be saved: %s", session_id, exc)
            if not self._failed:
                self._failed = True
                self.status.emit(f"The draft could not be saved: {exc}", 8000)
            return False
        self._failed = False
        self.drafted.emit(session_id, bool(text))
        return True
