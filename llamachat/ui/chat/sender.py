"""What a conversation sends and stops: a typed message, a retry, a Continue, each once checked.

`Sender(builder, watch, ...)` belongs to one `conversation.Conversation`, which forwards
`submit`, `retry`, `continue_reply` and `stop` to it. A typed message has the skills it
names loaded (`skill_loader.SkillLoader.take`; `/compact` compacts and `/remember`
remembers instead: `remember`), the replies
History could not take saved first (no request goes out while one is left, or the model
would be given another conversation than the one on screen), and is checked against the
context (`send_check.SendCheck`: it may be held while the server counts it or the chat is
compacted for it, then sent again) before the outbox saves it and starts its reply. A
retry and a Continue have their whole request checked the same way.

It reads the conversation's `ChatState` through the builder and asks its writer for the
one change it makes (`ask_editing`: a message sent, or Stop, ends editing); it drives
the helpers it is handed (`skills`, `outbox`, `compaction`) and emits the
conversation's signals through callables. It never reaches back into the conversation.

Errors: none raised. History failures become a `notice` and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from llamachat import turn
from llamachat.history.store import History, HistoryError
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.compaction import COMPACTING, SEND, Compaction
from llamachat.ui.chat.context_watch import ContextWatch
from llamachat.ui.chat.memory import COMMAND
from llamachat.ui.chat.outbox import Outbox
from llamachat.ui.chat.send_check import COMPACTED, COUNTED, GO, SendCheck
from llamachat.ui.chat.skill_loader import SkillLoader
from llamachat.ui.chat.state import CHAT, ONESHOT

# What `submit` did with a draft; the window clears its composer after SENT and HELD.
SENT = "sent"  # the message was saved and its reply started
HELD = "held"  # only skills were named: loaded, nothing sent
BUSY = "busy"  # a reply is still coming
NO_MODEL = "no_model"  # no model to answer (the window says what to do)
NOT_SENT = "not_sent"  # History could not take it; a notice said why
EMPTY = "empty"  # nothing to send
TOO_BIG = "too_big"  # it would overflow the model's context; `too_big` said so, nothing sent
# COMPACTING (from compaction): held while the chat is compacted, then sent (or `returned`).
# A COUNTING or COMPACTING question that is not sent after all is `returned`.


class Sender(QObject):
    """Sends a conversation's messages, retries and continuations once checked; stops them."""

    def __init__(
        self,
        builder: TurnBuilder,
        watch: ContextWatch,
        *,
        skills: SkillLoader,
        outbox: Outbox,
        compaction: Compaction,
        remember: Callable[[str], bool],
        history: Callable[[], History],
        cancel_warmup: Callable[[], None],
        ask_editing: Callable[[int | None], None],
        added: Callable[[object], None],
        reset: Callable[[object], None],
        returned: Callable[[object], None],
        notice: Callable[[str, int], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._state = builder.state
        self._watch = watch
        self._skills = skills
        self._outbox = outbox
        self._compaction = compaction
        self._remember = remember
        self._history = history
        self._cancel_warmup = cancel_warmup
        self._ask_editing = ask_editing
        self._added = added
        self._reset = reset
        self._returned = returned
        self._notice = notice
        # The check before each send: counted first where only estimated, else the policy.
        self.check = SendCheck(watch, compaction, notice=notice, unload=skills.unload, parent=self)
        compaction.send.connect(self._send_again)

    def next_turn(self, model: str | None = None, *, before: int | None = None) -> turn.Turn:
        """The next request to `model` (default: the conversation's), whole as it is sent.

        `before` leaves out that message and those after it (a retry's earlier reply).
        """
        model = self._state.model if model is None else model
        return self._builder.next_turn(model, before=before, n_ctx=self._watch.context_size())

    def submit(self, text: str, attachments: list[dict] | None = None, *, again: str = "") -> str:
        """Send a typed message (loading the skills it names); what was done (SENT, HELD...).

        `again`: why it is sent again (`send_check.COUNTED`, `COMPACTED`), once held."""
        attachments = list(attachments or [])
        if self._outbox.reply is not None or self._compaction.running() or self.check.counting:
            return BUSY
        if not text.strip() and not attachments:
            return EMPTY
        command, _, focus = text.strip().partition(" ")
        if command in ("/compact", COMMAND) and not attachments and self._state.mode == CHAT:
            run = self._remember if command == COMMAND else self._compaction.compact
            return HELD if run(focus.strip()) else NOT_SENT
        question = self._skills.take(text, self._builder.config().skill_mentions)
        if not question.text.strip() and not attachments:
            self._skills.held(question)
            return HELD
        self._skills.sending(question)
        if not self._state.model:
            return NO_MODEL
        if not self._outbox.save_unsaved():
            return NOT_SENT
        held = self.check.question(
            question.text,
            attachments,
            loaded=question.skills,
            edit_from=self._state.editing,
            held=again,
            again=lambda: self._send_again(question.text, attachments, COUNTED),
        )
        if held == COMPACTING:
            self._ask_editing(None)
        if held not in (GO, SEND):
            return held
        outcome = self._send(question.text, attachments)
        if outcome == SENT:
            self._skills.sent()
        return outcome

    def _send(self, text: str, attachments: list[dict]) -> str:
        """Save the question and start its reply (the context was checked); SENT or NOT_SENT."""
        edit_from = self._state.editing
        self._ask_editing(None)
        try:
            row = self._outbox.save_question(text, attachments, edit_from=edit_from)
        except HistoryError as exc:
            self._notice(f"Not sent: the message could not be saved. {exc}", 0)
            return NOT_SENT
        self._skills.asked()
        self._outbox.start(self._state.model, show=lambda: self._added(row))
        return SENT

    def _send_again(self, text: str, attachments: list[dict], why: str = COMPACTED) -> None:
        """The question held was counted or the chat compacted for it: send it now (it may
        still not fit), or put it back."""
        if self.submit(text, attachments, again=why) not in (SENT, COMPACTING):
            self._returned({"content": text, "attachments": attachments})

    def stop(self) -> bool:
        """Stop the reply now, keeping what arrived ("stopped"); True when one was streaming.

        With no reply, it leaves editing (sending adds a new message again).
        """
        stopped = self._outbox.stop() or self._compaction.stop()
        self._cancel_warmup()
        if stopped:
            return True
        if self._state.editing is not None:
            self._ask_editing(None)
            self._notice("No longer editing: sending adds a new message.", 8000)
        return False

    def retry(self, message_id: object, *, counted: bool = False) -> bool:
        """Ask again for a reply; once the new one has text it is shown in its place.

        A complete reply, or a stopped one with text, stays as an earlier version; a
        failed one, or one stopped before any text (and what followed it), is replaced.
        """
        state = self._state
        if state.session_id is None or not isinstance(message_id, int) or self.check.counting:
            return False
        self.stop()
        rows = self._history().messages(state.session_id)
        if not any(row["id"] == message_id for row in rows):
            return False
        if self._state.mode == ONESHOT:
            question = next((row for row in rows if row["role"] == "user"), None)
            model = (question["model"] if question else "") or self._state.model
            self._skills.ask_again()
        else:
            model = self._state.model
        if not model:
            self._notice("No model to answer: pick one in the Model list.", 8000)
            return False
        if not self._outbox.save_unsaved():
            return False
        if not self.check.request(
            self.next_turn(model, before=message_id),
            counted=counted,
            again=lambda: self.retry(message_id, counted=True),
        ):
            return False
        target = next(row for row in rows if row["id"] == message_id)
        return self._outbox.start(
            model,
            replaces=message_id,
            keep_replaced=target["status"] == "complete"
            or (target["status"] == "stopped" and bool(target["content"])),
            show=lambda: self._reset([row for row in rows if row["id"] < message_id]),
        )

    def continue_reply(self, message_id: object, *, counted: bool = False) -> bool:
        """Go on with the last reply, cut at the length limit, in that same reply."""
        outbox, state = self._outbox, self._state
        if outbox.reply is not None or self.check.counting or not state.model:
            return False
        if not outbox.save_unsaved():
            return False
        again = lambda: self.continue_reply(message_id, counted=True)
        fits = self.check.request(self.next_turn(), counted=counted, again=again)
        return fits and outbox.continue_reply(state.model, message_id)
