"""What the chat window and the quick window say of their conversation, declared once.

Both windows hold a `conversation.Conversation` as `chat` and a composer as `composer`.
`ConversationSeams`, a mixin of both, answers the questions asked of a window (its
configuration, history, open session, model, streaming state and skills) from that
conversation, and carries the draft between the composer and it: `_submit_draft` hands
the typed message over, `_put_back` returns a sent one for editing. What differs (what
to say when nothing was sent, stopping before a retry) stays in each window.
Loads no widget module. Errors: none raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamachat.config import Config
from llamachat.history.store import History, MessageRow
from llamachat.turn import Attachment
from llamachat.ui.chat.conversation import COMPACTING, HELD, SENT, Conversation
from llamachat.ui.chat.send_check import COUNTING

if TYPE_CHECKING:
    from llamachat.ui.views.composer import Composer


class ConversationSeams:
    """A window's face for its `chat` (a Conversation) and `composer`; mixed into the window."""

    chat: Conversation
    composer: Composer

    @property
    def cfg(self) -> Config:
        """The configuration in effect: the App's (never a copy of it)."""
        return self.chat.cfg

    @property
    def history(self) -> History:
        """The chat history: the App's."""
        return self.chat.history

    @property
    def session_id(self) -> int | None:
        """The open session's id; None until the first message of a new chat is sent."""
        return self.chat.session_id

    def current_model(self) -> str:
        """The id of the model new replies come from ('' when none is known yet)."""
        return self.chat.model

    def is_streaming(self) -> bool:
        """True while a reply streams."""
        return self.chat.is_streaming()

    def running_workers(self) -> int:
        """Worker threads not yet ended (a stopped stream may still be closing its socket)."""
        return self.chat.threads.running()

    def loaded_skills(self) -> list[str]:
        """The skills in effect, in load order (one-shot: for the next or the current answer)."""
        return self.chat.loaded_skills()

    def load_skill(self, name: str) -> bool:
        """Load a skill into the conversation; True when it was not loaded before."""
        return self.chat.load_skill(name)

    def _submit_draft(self) -> str:
        """Hand the composer's message to the conversation; what it did (`conversation.SENT`...).

        The composer is cleared once the conversation took the message (SENT, HELD,
        COUNTING or COMPACTING: a question that is not sent after all is `returned`).
        """
        attachments = [item.to_dict() for item in self.composer.attachments()]
        outcome = self.chat.submit(self.composer.text(), attachments)
        if outcome in (SENT, HELD, COUNTING, COMPACTING):
            self.composer.clear()
        return outcome

    def _put_back_unsent(self, message: dict) -> None:
        """Put back a question held for compacting and not sent, unless the user typed anew."""
        if self.composer.is_empty():
            self._put_back(message)  # type: ignore[arg-type]

    def _put_back(self, message: MessageRow | None) -> None:
        """Put a sent message (its text and attachments) back in the composer to edit."""
        if message is None:
            return
        self.composer.set_text(message["content"])
        self.composer.set_attachments(
            [Attachment.from_dict(item) for item in message.get("attachments") or []]
        )
        self.composer.editor.setFocus()
