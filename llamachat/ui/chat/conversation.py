"""One conversation's actions and state, shared by the chat window and the quick window.

`Conversation(app, mode=...)` owns the open session, the loaded skills and the edit
state (its `state.ChatState`, which its `write`, a `state.ChatWriter`, alone writes: a
helper that changes it asks the writer, through a method it is handed such as
`session_made` or a signal such as `temporary.changed`) and hands them to its helpers:
`builder` (`builder.TurnBuilder`, every request built whole with `turn`), `outbox`
(`outbox.Outbox`: saves the question, sends the request, streams its reply),
`context` (`context_watch.ContextWatch`, the meter's count of that same request) and
`sending` (`sender.Sender`: a message, a retry or a Continue, each once checked against
the context; Stop) and `switch` (`session_switch.SessionSwitch`: a new, a stored or no
chat opened, and the chat's parameters). Windows forward what the user does (`submit`, `stop`, `retry`, `edit`,
`load_skill`, `unload_skill`, `new_session`, `open_session`) and turn its signals
into widgets: `message_added` (show a sent message), `messages_reset` (show these
rows instead), `versions_changed` (a message gained a version), `reply_started`
(attach a view to the reply), `reply_ended`, `skills_changed`, `skills_suggested`
(mentions to offer, not load), `store_changed`, `session_changed` and `notice` (say
something); `memory` (`memory.ChatMemory`) keeps the chat's memories and says so.
It loads no widget module, so a test drives it with no window at all.

A session is a tree (`db`): Regenerate adds another version of a reply, sending an
edited message adds another version of it with a fresh reply, and `show_version`
switches the path shown (and sent) to another one. `fork` copies the path up to a
message into a new chat.

Two modes:
    chat     one session for many turns; the loaded skills are the session's
             (`History.set_skills`) and the system message is cached, byte-identical
             from turn to turn until the preset, web search or the skills change.
    oneshot  every question is a new session of mode "oneshot"; the skills named in
             it (and those the model loads) serve that one reply and are dropped after.

What the model is sent is what the user sees: a reply that could not be saved (a
full disk) is saved again before the next request, and no request goes out while
it is not. A retry keeps the earlier reply until the new one has answer text.

Errors: none raised. History failures become a `notice` and the action is not done.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, Slot

from llamachat import prompts, turn
from llamachat.config import Config
from llamachat.history.store import History, MessageRow, ProjectRow, SessionRow
from llamachat.skills import SkillStore
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.compaction import COMPACTING, Compaction
from llamachat.ui.chat.comparison import Comparer
from llamachat.ui.chat.context_watch import ContextWatch
from llamachat.ui.chat.memory import ChatMemory
from llamachat.ui.chat.outbox import Outbox
from llamachat.ui.chat.sender import BUSY, EMPTY, HELD, NO_MODEL, NOT_SENT, SENT, TOO_BIG, Sender
from llamachat.ui.chat.session_switch import SessionSwitch
from llamachat.ui.chat.skill_loader import SkillLoader
from llamachat.ui.chat.state import CHAT, ONESHOT, AppState, ChatState, ChatWriter
from llamachat.ui.chat.temporary import ConversationApp, TemporaryChat
from llamachat.ui.chat.versions import Versions
from llamachat.ui.chat.warmup import Warmer
from llamachat.ui.chat.worker import WorkerThreads


class Conversation(QObject):
    """A conversation's session, skills, edit state and reply, driven by a window (or a test)."""

    session_changed = Signal(object)  # the session id now (None: a chat not saved yet)
    temporary_changed = Signal(bool)  # a temporary chat began (True) or ended
    message_added = Signal(object)  # the user message just saved (a History row)
    messages_reset = Signal(object)  # the rows to show instead of what is shown
    versions_changed = Signal(int, list)  # a message shown, the ids of all its versions
    reply_started = Signal(object)  # the ReplyStream: attach a view before returning
    reply_ended = Signal(str, str)  # status, error
    skills_changed = Signal(list)  # the loaded skills, in load order
    store_changed = Signal(object)  # the SkillStore now (None: skills off), or its names changed
    # The skills the last message only mentioned by a one-word name: offered, not loaded.
    skills_suggested = Signal(list)
    # object, not dict: PySide converts a dict signal through QVariantMap, which may drop it.
    stats = Signal(object)
    notice = Signal(str, int)  # text, how long to show it in ms (0 keeps it)
    too_big = Signal(object)  # a context_watch.Overflow: the message was not sent
    editing = Signal(object)  # the id of the message being edited (None: no longer editing)
    returned = Signal(object)  # a question held for compacting, not sent: content, attachments

    def __init__(
        self,
        app: AppState,
        *,
        mode: str = CHAT,
        model: str = "",
        preset: Callable[[], str] | None = None,
        prompt: Callable[[], tuple[str, str]] | None = None,
        images: Callable[[str], bool] | None = None,
        hears: Callable[[str], bool] | None = None,
        model_status: Callable[[str], str] | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        if mode not in (CHAT, ONESHOT):
            raise ValueError(f"mode must be {CHAT!r} or {ONESHOT!r}, got {mode!r}")
        self.app = app
        self.mode = mode
        self.threads = WorkerThreads(self)
        cfg = app.config
        self.state = ChatState(
            mode, model, search_on=cfg.search_enabled, store=turn.skill_store(cfg)
        )
        self.temporary = TemporaryChat(parent=self)
        # Said to the App, so that a load elsewhere that would unload it says so first.
        self._where = "the chat window" if mode == CHAT else "the quick window"
        app.models_in_use.use(self, model, self._where)
        # The one writer of `state`: the conversation and its helpers change it through it.
        self.write = write = ChatWriter(self.state, parent=self)
        write.editing_changed.connect(self.editing)
        write.temporary_changed.connect(self.temporary_changed)
        self.temporary.changed.connect(write.set_temporary)
        # The helpers read and write the conversation's history, whichever it is.
        helpers_app = ConversationApp(app, lambda: self.history)
        # What the window knows and the conversation asks when it builds a request.
        self.builder = TurnBuilder(
            helpers_app,
            self.state,
            preset=preset or (lambda: ""),
            prompt=prompt or (lambda: (prompts.DEFAULT_NAME, "")),
            images=images or (lambda _model: False),
            hears=hears or (lambda _model: False),
        )
        self.skills = SkillLoader(
            self.state,
            cfg,
            history=lambda: self.history,
            ask_loaded=write.set_loaded,
            ask_store=write.set_store,
            forget_system=self.builder.forget_system,
            changed=self.skills_changed.emit,
            store_changed=self.store_changed.emit,
            suggested=self.skills_suggested.emit,
            notice=self.notice.emit,
            parent=self,
        )
        # Editing a message, switching versions, forking.
        self.versions = Versions(
            self.state,
            history=lambda: self.history,
            stop=self.stop,
            is_streaming=self.is_streaming,
            ask_editing=write.set_editing,
            reset=self.messages_reset.emit,
            notice=self.notice.emit,
        )
        # The next request's size, for the meter and the check before each send.
        self.context = ContextWatch(self.builder, is_streaming=self.is_streaming, parent=self)
        # Keeps the server's prompt cache holding the next request (`warmup`).
        self.warmer = warm = Warmer(
            self.builder,
            self.is_streaming,
            self.context.context_size,
            model_status,
            parent=self,
            slot_files=helpers_app.slot_files,
        )
        # Saves the questions, sends the requests (after a warm-up they share), keeps the replies.
        self.outbox = Outbox(
            self.builder,
            helpers_app,
            self.threads,
            self.context.context_size,
            warm.send_after,
            self,
            session_made=write.set_session,
        )
        # What a message too long for the context makes happen, and compacting the chat.
        self.compaction = compaction = Compaction(
            self.builder,
            app,
            self.context,
            is_streaming=self.is_streaming,
            ask_trimmed=write.set_trimmed,
            parent=self,
        )
        self.memory = ChatMemory(
            self.state,
            self.builder,
            app,
            self.outbox,
            self.notice,
            self,
            ask_on=write.set_memory_on,
        )
        # Sends what the user asks for, each once checked against the context; stops it.
        self.sending = Sender(
            self.builder,
            self.context,
            skills=self.skills,
            outbox=self.outbox,
            compaction=compaction,
            remember=self.memory.command,
            history=lambda: self.history,
            cancel_warmup=warm.cancel,
            ask_editing=write.set_editing,
            added=self.message_added.emit,
            reset=self.messages_reset.emit,
            returned=self.returned.emit,
            notice=self.notice.emit,
            parent=self,
        )
        # Opening and switching chats: new, stored, none; the chat's parameters.
        self.switch = SessionSwitch(
            self.state,
            write,
            history=lambda: self.history,
            stop=self.stop,
            discard_temporary=self.discard_temporary,
            set_loaded=self.skills.set_loaded,
            opened_params=self.memory.opened,
            stored_params=self.memory.stored_params,
            settled_messages=self.outbox.settled_messages,
            reattach=self.outbox.reattach,
            follow_policy=compaction.follow_policy,
            changed=self.session_changed.emit,
        )
        # One question sent to several models side by side (`ask`), answers kept as versions.
        self.comparer = comparer = Comparer(
            self.builder,
            helpers_app,
            self.threads,
            busy=self.busy,
            ready=lambda: self.mode == CHAT and self.save_unsaved(),
            save_question=self.outbox.save_question,
            ask_editing=write.set_editing,
            context_size=self.context.context_size,
            model_status=model_status or (lambda _model: "loaded"),
            ask_tools=self.outbox.asks_tools,
            parent=self,
        )
        outbox = self.outbox
        for theirs, ours in (
            (outbox.session_changed, self.session_changed),
            (outbox.started, self.reply_started),
            (outbox.stats, self.stats),
            (outbox.messages_reset, self.messages_reset),
            (outbox.versions_changed, self.versions_changed),
            (outbox.ended, self.reply_ended),
            (outbox.notice, self.notice),
            (compaction.messages_reset, self.messages_reset),
            (compaction.notice, self.notice),
            (compaction.too_big, self.too_big),
            (compaction.returned, self.returned),
            (comparer.message_added, self.message_added),
            (comparer.messages_reset, self.messages_reset),
            (comparer.notice, self.notice),
        ):
            theirs.connect(ours)
        self.session_changed.connect(lambda _id: compaction.reset())
        outbox.search_started.connect(self._on_search_started)
        outbox.skill_loaded.connect(self.skills.model_loaded)
        outbox.over.connect(self.skills.reply_over)
        app.config_changed.connect(self._on_config_changed)
        # What changes the next request (an MCP server that came up or went: its tools).
        watch = self.context
        watch.follow(
            shown=(self.session_changed, self.messages_reset, app.mcp.changed),
            changed=(self.skills_changed, self.store_changed, self.memory.changed),
        )
        self.reply_started.connect(watch.reply_started)
        self.reply_ended.connect(watch.reply_ended)
        app.router_changed.connect(watch.router_changed)
        # What changes where the next request starts: warmed again (the chat left: saved).
        self.session_changed.connect(warm.chat_shown)
        warm.follow(self.session_changed, self.messages_reset, self.skills_changed, self.editing)
        warm.follow(app.mcp.changed, self.reply_ended, self.memory.changed, comparer.ended)
        # A warm-up sent before the server said "no tools" offered them: Send's differs.
        warm.follow(self.context.tools_changed)

    # ------------------------------------------------------------------ state

    @property
    def history(self) -> History:
        """The chat history: the App's, or a temporary chat's in memory."""
        return self.scratch or self.app.history

    @property
    def scratch(self) -> History | None:
        """A temporary chat's history, in memory (None: the chat is saved in the App's)."""
        return self.temporary.scratch

    @property
    def cfg(self) -> Config:
        """The configuration in effect: the App's."""
        return self.app.config

    @property
    def model(self) -> str:
        """The model that answers the next question."""
        return self.state.model

    @model.setter
    def model(self, model: str) -> None:
        self.app.models_in_use.use(self, model, self._where)
        if self.write.set_model(model):
            self.warmer.trigger()

    @property
    def store(self) -> SkillStore | None:
        """The skills of the configured folders (None: skills off)."""
        return self.state.store

    @property
    def search_on(self) -> bool:
        """Whether the model is offered web search."""
        return self.state.search_on

    @property
    def session_id(self) -> int | None:
        """The open session's id; None until the first message of a new chat is sent."""
        return self.state.session_id

    def is_streaming(self) -> bool:
        """True while a reply streams (or a comparison's replies)."""
        return self.outbox.reply is not None or self.comparer.running()

    def busy(self) -> bool:
        """True while a message is on its way: streaming, compacting first, or counted first."""
        return self.is_streaming() or self.compaction.running() or self.sending.check.counting

    def loaded_skills(self) -> list[str]:
        """The skills in effect, in load order (one-shot: for the next or the current answer)."""
        return list(self.state.loaded)

    def missing_skills(self) -> list[str]:
        """The loaded skills no longer on disk, in load order (the model does not get them)."""
        return self.builder.missing_skills()

    def set_search_on(self, on: bool) -> None:
        """Offer the model web search or not (chat mode; one-shot follows the config)."""
        if self.write.set_search_on(on):
            self.builder.forget_system()

    def system_text_changed(self) -> None:
        """The preset's text changed: the next request builds its system message again."""
        self.builder.forget_system()

    # ------------------------------------------------------------------ sessions

    def new_session(self, project: ProjectRow | None = None) -> None:
        """Start an empty conversation, saved on the first send (`SessionSwitch.new`)."""
        self.switch.new(project)

    def open_session(self, session_id: int) -> tuple[SessionRow, list[MessageRow]] | None:
        """Open a stored session with its skills; its row and messages (`SessionSwitch.open`)."""
        return self.switch.open(session_id)

    def start_temporary(self) -> None:
        """Start a temporary chat, saved in memory only (`temporary.keep` copies it out)."""
        self.new_session()
        self.temporary.start()

    def discard_temporary(self) -> None:
        """End the temporary chat without keeping it (its messages stay on screen)."""
        self.temporary.discard()

    def leave_session(self) -> None:
        """Let go of the session without touching it (one-shot: it went on to the chat)."""
        self.switch.leave()

    # ------------------------------------------------------------------ parameters

    def params(self) -> dict:
        """The request parameters this chat overrides (its own, not the config's defaults)."""
        return dict(self.state.params)

    def default_params(self, model: str | None = None) -> dict:
        """The parameters the config gives `model` (default: the chat's) and the chat's preset."""
        return self.builder.default_params(self.model if model is None else model)

    def set_params(self, values: dict) -> None:
        """Override request parameters for this chat from the next request on (saved with it)."""
        self.switch.set_params(values)

    # ------------------------------------------------------------------ skills

    def load_skill(self, name: str) -> bool:
        """Load a skill into the system message; True when it was not loaded before."""
        return self.skills.load(name)

    def unload_skill(self, name: str) -> bool:
        """Drop a skill from the system message; True when it was loaded."""
        return self.skills.unload(name)

    # ------------------------------------------------------------------ sending

    def submit(self, text: str, attachments: list[dict] | None = None, *, again: str = "") -> str:
        """Send a typed message (loading the skills it names); what was done (`Sender.submit`)."""
        if self.comparer.running():
            return BUSY
        return self.sending.submit(text, attachments, again=again)

    def stop(self) -> bool:
        """Stop the reply (or the comparison), keeping what arrived; True when one was
        streaming (`Sender.stop`)."""
        return self.comparer.stop() or self.sending.stop()

    def retry(self, message_id: object, *, counted: bool = False) -> bool:
        """Ask again for a reply, shown in its place once it has text (`Sender.retry`)."""
        return self.sending.retry(message_id, counted=counted)

    def continue_reply(self, message_id: object, *, counted: bool = False) -> bool:
        """Go on with the last reply, cut at the length limit, in that same reply."""
        return self.sending.continue_reply(message_id, counted=counted)

    def edit(self, message_id: object) -> MessageRow | None:
        """The sent message to put back in the composer (None when there is none)."""
        return self.versions.edit(message_id)

    def show_version(self, message_id: object) -> bool:
        """Show (and send from now on) the path through this version of a message."""
        return self.versions.show(message_id)

    def fork(self, message_id: object) -> int | None:
        """A new chat with this chat's path up to `message_id`, its skills and prompt; its id."""
        return self.versions.fork(message_id)

    def save_unsaved(self) -> bool:
        """Save the replies History could not take yet; True when none is left behind.

        No request is sent while one is left: the model would be given a conversation
        other than the one on screen.
        """
        return self.outbox.save_unsaved()

    def close(self) -> None:
        """Stop the reply and try once more to save the replies History could not take."""
        self.stop()
        self.app.models_in_use.leave(self)
        self.warmer.close()
        self.context.close()
        self.outbox.close()

    # ------------------------------------------------------------------ requests

    def system_message(self) -> str:
        """The system message the next request starts with (chat mode's, cached)."""
        return self.builder.system_message()

    def next_turn(self, model: str | None = None, *, before: int | None = None) -> turn.Turn:
        """The next request to `model` (default: the conversation's), whole (`Sender.next_turn`)."""
        return self.sending.next_turn(model, before=before)

    # ------------------------------------------------------------------ reply events

    @Slot(str)
    def _on_search_started(self, query: str) -> None:
        if self.mode == CHAT:
            self.notice.emit(f"Searching the web for “{query}”…", 8000)

    # ------------------------------------------------------------------ history and config

    @Slot(object)
    def _on_config_changed(self, cfg: Config) -> None:
        self.skills.follow(cfg)
        self.compaction.follow_policy()
        # The system message's date note and max_searches are read from cfg at each send.
        self.builder.forget_system()


# What `submit` did (from `sender`), read from here by the windows.
__all__ = [
    "BUSY",
    "COMPACTING",
    "EMPTY",
    "HELD",
    "NOT_SENT",
    "NO_MODEL",
    "SENT",
    "TOO_BIG",
    "Conversation",
]
