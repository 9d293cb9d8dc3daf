"""The chat window: a conversation, a composer, loaded-skill chips and a model choice.

`ChatWindow(cfg, history)` is built from a `Config` and a `History` alone. The GUI
thread owns every widget and the History's SQLite connection; replies stream in a
`StreamWorker` on its own thread, which only emits signals.

A reply is saved as it streams: the user message first, then an assistant row
with status "streaming" that a one-second timer rewrites, so a crash loses at most
a second of text; the final save marks it "complete", "stopped" or "error".

The system message (preset prompt, date note when search is on, loaded skills in
load order) is computed once and cached: it stays byte-identical from turn to turn,
which lets the router reuse its prompt cache, until the set of loaded skills changes.

Errors: none of its own. Backend failures are shown inline on the reply with a
Retry; environment problems (a model list that cannot be fetched, an attachment
that cannot be read) go to the status bar.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QMainWindow,
    QVBoxLayout,
    QWidget,
)

from .. import backend, prompts, providers, search, skills
from ..config import Config
from ..db import History, HistoryError
from ..models import ModelInfo
from .chips import SkillChips
from .composer import Attachment, Composer, user_content
from .conversation import ConversationView, MessageView
from .worker import CallWorker, StreamWorker, WorkerThreads

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000
STATUS_MS = 8000


@dataclass
class _Reply:
    """The reply being streamed: its worker, its view, its row, and what arrived so far."""

    worker: StreamWorker
    view: MessageView
    message_id: int
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    error: str = ""
    dirty: bool = False


def _list_models(cfg: Config) -> tuple[list[ModelInfo], dict[str, str]]:
    """Every model the router and providers offer, and what failed per source (blocking)."""
    registry = providers.Registry(cfg)
    try:
        found = registry.models()
        return found, {source: exc.message for source, exc in registry.errors.items()}
    finally:
        registry.close()


class ChatWindow(QMainWindow):
    """The main chat window, built from a Config and a History."""

    session_changed = Signal(object)
    model_changed = Signal(str)
    models_listed = Signal(list)
    streaming_changed = Signal(bool)

    def __init__(self, cfg: Config, history: History, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cfg = cfg
        self.history = history
        self._registry = providers.Registry(cfg)
        self._old_registries: list[providers.Registry] = []
        self._prompts = prompts.Prompts(cfg.prompts_dir)
        try:
            self._prompts.ensure_default()
        except prompts.PromptError as exc:
            log.warning("cannot create the default prompt in %s: %s", cfg.prompts_dir, exc)
        self._skills = skills.SkillStore(list(cfg.skill_roots())) if cfg.skills_enabled else None
        self._threads = WorkerThreads(self)
        self._session_id: int | None = None
        self._loaded: list[str] = []
        self._system_cache: str | None = None
        self._models: dict[str, ModelInfo] = {}
        self._model = cfg.default_model
        self._reply: _Reply | None = None
        self._edit_from: int | None = None
        self._filling_models = False
        self._listing: CallWorker | None = None

        self._build()
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self._save_partial)

        self.new_session()
        self._apply_model(self._model)
        self._refresh_skill_names()
        if history.recovered_from is not None:
            self.show_status(
                f"The history file was damaged; it was moved to {history.recovered_from} "
                "and a new one started.",
                timeout=0,
            )
        self.refresh_models()

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        self.setWindowTitle("llamachat")
        self.resize(900, 760)
        # A fixed floor instead of one that follows the content: chips and attachments
        # coming and going would otherwise resize the window's limits on every change.
        self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.setMinimumSize(480, 360)

        self.model_combo = QComboBox()
        self.model_combo.setAccessibleName("Model")
        self.model_combo.setToolTip("The model that answers")
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.model_combo.currentIndexChanged.connect(self._on_model_chosen)
        model_label = QLabel("&Model:")
        model_label.setBuddy(self.model_combo)
        top = QHBoxLayout()
        top.addWidget(model_label)
        top.addWidget(self.model_combo, 1)
        top.addStretch(1)

        self.conversation = ConversationView()
        self.conversation.setAccessibleName("Conversation")
        self.conversation.retry_requested.connect(self.retry)
        self.conversation.regenerate_requested.connect(self.retry)
        self.conversation.edit_requested.connect(self.edit_message)

        self.skill_chips = SkillChips()
        self.skill_chips.unload_requested.connect(self.unload_skill)

        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.notice.connect(self.show_status)

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(8, 8, 8, 4)
        layout.addLayout(top)
        layout.addWidget(self.conversation, 1)
        layout.addWidget(self.skill_chips)
        layout.addWidget(self.composer)
        self.setCentralWidget(central)

        stop = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop.activated.connect(self.stop)
        new = QShortcut(QKeySequence.StandardKey.New, self)
        new.activated.connect(self.new_session)
        focus = QShortcut(QKeySequence("Ctrl+L"), self)
        focus.activated.connect(self.composer.editor.setFocus)
        self.composer.editor.setFocus()

    # ------------------------------------------------------------------ public seams

    @property
    def session_id(self) -> int | None:
        """The open session's id; None until the first message of a new chat is sent."""
        return self._session_id

    def is_streaming(self) -> bool:
        """True while a reply streams."""
        return self._reply is not None

    def running_workers(self) -> int:
        """Worker threads not yet ended (a stopped stream may still be closing its socket)."""
        return self._threads.running()

    def show_status(self, text: str, timeout: int = STATUS_MS) -> None:
        """Say something in the status bar (timeout in ms; 0 keeps it)."""
        self.statusBar().showMessage(text, timeout)

    def new_session(self) -> None:
        """Start an empty chat: no messages, no loaded skills; created on the first send."""
        self.stop()
        self._session_id = None
        self._edit_from = None
        self._loaded = []
        self._skills_changed(persist=False)
        self.conversation.clear()
        self._update_title()
        self.session_changed.emit(None)

    def open_session(self, session_id: int) -> bool:
        """Show a stored chat with its model and loaded skills; False when it does not exist."""
        session = self.history.get_session(session_id)
        if session is None:
            self.show_status(f"Chat {session_id} no longer exists.")
            return False
        self.stop()
        self._session_id = session_id
        self._edit_from = None
        self._loaded = [
            name
            for name in session.get("skills") or []
            if self._skills is not None and self._skills.load(name) is not None
        ]
        self._skills_changed(persist=False)
        self.conversation.load_messages(self._settled_messages(session_id))
        if session.get("model"):
            self._apply_model(session["model"])
        self._update_title()
        self.session_changed.emit(session_id)
        return True

    def current_model(self) -> str:
        """The id of the model new replies come from ('' when none is known yet)."""
        return self._model

    def set_model(self, model_id: str) -> None:
        """Answer with `model_id` from now on (remembered on the open chat)."""
        self._apply_model(model_id)
        if self._session_id is not None and model_id:
            self.history.set_model(self._session_id, model_id)

    def use_router(self, url: str) -> None:
        """Talk to the router at `url` from now on (a managed server came up) and list its models."""
        self.stop()
        self.cfg = dataclasses.replace(self.cfg, router_url=url)
        # A stopped stream may still be unwinding on the old clients: close them at exit.
        self._old_registries.append(self._registry)
        self._registry = providers.Registry(self.cfg)
        self.show_status(f"Using the llama.cpp router at {url}.")
        self.refresh_models()

    def models(self) -> list[ModelInfo]:
        """The models last listed by the router and providers."""
        return list(self._models.values())

    def refresh_models(self) -> None:
        """List the available models in the background; the combo fills when they arrive."""
        cfg = self.cfg
        worker = CallWorker(lambda: _list_models(cfg))
        worker.done.connect(self._on_models_listed)
        worker.failed.connect(self._on_models_failed)
        # Only the latest listing counts: an older one may answer late, for an old URL.
        self._listing = worker
        self._threads.start(worker)

    def loaded_skills(self) -> list[str]:
        """The skills loaded for this chat, in load order."""
        return list(self._loaded)

    def load_skill(self, name: str) -> bool:
        """Load a skill into the chat's system message; True when it was not loaded before."""
        if self._skills is None or name in self._loaded:
            return False
        if self._skills.load(name) is None:
            return False
        self._loaded.append(name)
        self._skills_changed()
        return True

    @Slot(str)
    def unload_skill(self, name: str) -> None:
        """Drop a skill from the chat's system message."""
        if name not in self._loaded:
            return
        self._loaded.remove(name)
        self._skills_changed()
        self.show_status(f"Unloaded skill {name}.")

    def system_message(self) -> str:
        """The system message every request starts with; cached until the loaded skills change."""
        if self._system_cache is None:
            parts = [self._preset_text()]
            if self.cfg.search_enabled:
                parts.append(search.date_note())
            if self._skills is not None:
                for name in self._loaded:
                    skill = self._skills.load(name)
                    if skill is not None:
                        parts.append(skills.system_part(skill))
            self._system_cache = "\n\n".join(part for part in parts if part)
        return self._system_cache

    def request_messages(self) -> list[dict]:
        """The messages of the next request: the system message, then the chat so far."""
        system = self.system_message()
        out: list[dict] = [{"role": "system", "content": system}] if system else []
        if self._session_id is None:
            return out
        images = self._reads_images(self._model)
        for message in self.history.messages(self._session_id):
            if message["role"] == "user":
                content = user_content(
                    message["content"], message.get("attachments") or [], images=images
                )
                out.append({"role": "user", "content": content})
            elif message["role"] == "assistant" and message["content"]:
                # Replies replay their answer only: reasoning and tool rounds stay out of the
                # context, as llama.cpp's own web page does.
                out.append({"role": "assistant", "content": message["content"]})
        return out

    # ------------------------------------------------------------------ sending

    @Slot()
    def send(self) -> None:
        """Send the composer's message (loading any skills it names) and stream the reply."""
        if self._reply is not None:
            self.show_status("A reply is still coming: stop it (Esc) before sending.")
            return
        if self.composer.is_empty():
            return
        typed = self.composer.text()
        attachments = self.composer.attachments()
        text, commands = self._load_skills_from_text(typed)
        if not text.strip() and not attachments:
            self.composer.clear()
            if commands:
                self.show_status(f"Skill {', '.join(commands)} loaded; nothing was sent.")
            return
        model = self._model
        if not model:
            self.show_status("No model to answer: pick one in the Model list.")
            return
        stored = [item.to_dict() for item in attachments]
        try:
            session_id = self._ensure_session(model)
            if self._edit_from is not None:
                self.history.delete_messages_from(session_id, self._edit_from)
                self._edit_from = None
                self.conversation.load_messages(self.history.messages(session_id))
            message_id = self.history.add_message(
                session_id, "user", text, attachments=stored, model=model
            )
        except HistoryError as exc:
            self.show_status(f"Not sent: the message could not be saved. {exc}", timeout=0)
            return
        self.conversation.append_message(
            {
                "id": message_id,
                "session_id": session_id,
                "role": "user",
                "content": text,
                "reasoning": "",
                "attachments": stored,
                "model": model,
                "status": "complete",
                "error": "",
            }
        )
        self.composer.clear()
        self._update_title()
        self._start_reply(model)

    @Slot()
    def stop(self) -> None:
        """Stop the reply now, keeping what arrived (saved as "stopped"); else leave editing."""
        reply = self._reply
        if reply is None:
            if self._edit_from is not None:
                self._edit_from = None
                self.show_status("No longer editing: sending adds a new message.")
            return
        # The worker may be blocked in a socket read; it is cancelled and left to unwind on
        # its own thread while the window moves on, so Stop never waits on the network.
        reply.worker.cancel()
        self._finish_reply("stopped")
        self.show_status("Stopped.")

    @Slot(object)
    def retry(self, message_id: object) -> None:
        """Delete a reply (and everything after it) and ask for it again."""
        if self._session_id is None or not isinstance(message_id, int):
            return
        self.stop()
        self.history.delete_messages_from(self._session_id, message_id)
        self.conversation.load_messages(self.history.messages(self._session_id))
        if not self._model:
            self.show_status("No model to answer: pick one in the Model list.")
            return
        self._start_reply(self._model)

    @Slot(object)
    def edit_message(self, message_id: object) -> None:
        """Put a sent message back in the composer; sending replaces it and what followed."""
        if self._session_id is None:
            return
        message = next(
            (m for m in self.history.messages(self._session_id) if m["id"] == message_id), None
        )
        if message is None or message["role"] != "user":
            return
        self.stop()
        self.composer.set_text(message["content"])
        self.composer.set_attachments(
            [Attachment.from_dict(item) for item in message.get("attachments") or []]
        )
        self._edit_from = message["id"]
        self.composer.editor.setFocus()
        self.show_status("Editing: sending replaces this message and everything after it.")

    def _load_skills_from_text(self, text: str) -> tuple[str, list[str]]:
        """Load the skills a draft names; return the text to send and the `/name`s in it."""
        if self._skills is None:
            return text, []
        self._refresh_skill_names()
        remaining, commands = skills.parse_commands(text, self._skills.user_names())
        loaded = [name for name in commands if self.load_skill(name)]
        loaded += [name for name in self._skills.match_mentions(remaining) if self.load_skill(name)]
        if loaded:
            self.show_status(f"Loaded skill {', '.join(loaded)}.")
        elif commands:
            self.show_status(f"Already loaded: {', '.join(commands)}.")
        return remaining, commands

    def _ensure_session(self, model: str) -> int:
        if self._session_id is None:
            self._session_id = self.history.create_session(
                "chat", model, prompt_name=prompts.DEFAULT_NAME
            )
            if self._loaded:
                self.history.set_skills(self._session_id, self._loaded)
            self.session_changed.emit(self._session_id)
        return self._session_id

    def _start_reply(self, model: str) -> None:
        assert self._session_id is not None
        messages = self.request_messages()
        client, wire_model = self._registry.client_for(model)
        try:
            message_id = self.history.add_message(
                self._session_id, "assistant", "", model=model, status="streaming"
            )
        except HistoryError as exc:
            self.show_status(f"Not sent: the reply could not be saved. {exc}", timeout=0)
            return
        view = self.conversation.append_message(
            {
                "id": message_id,
                "session_id": self._session_id,
                "role": "assistant",
                "content": "",
                "reasoning": "",
                "model": model,
                "status": "streaming",
                "error": "",
            }
        )
        worker = StreamWorker(
            client,
            wire_model,
            messages,
            search_cfg=self._search_config(),
            skills_cfg=self._skills_config(),
        )
        worker.content.connect(self._on_content)
        worker.reasoning.connect(self._on_reasoning)
        worker.search_started.connect(self._on_search_started)
        worker.search_finished.connect(self._on_search_finished)
        worker.skill_loaded.connect(self._on_skill_loaded)
        worker.stats.connect(self._on_stats)
        worker.failed.connect(self._on_failed)
        worker.finished.connect(self._on_finished)
        self._reply = _Reply(worker=worker, view=view, message_id=message_id)
        self._threads.start(worker)
        self._save_timer.start()
        self.composer.set_streaming(True)
        self.streaming_changed.emit(True)
        self.conversation.scroll_to_bottom()

    def _search_config(self) -> backend.SearchConfig | None:
        if not self.cfg.search_enabled:
            return None
        return backend.SearchConfig(
            enabled=True, url=self.cfg.search_url, max_searches=self.cfg.max_searches
        )

    def _skills_config(self) -> backend.SkillsConfig | None:
        if self._skills is None or self._skills.tool_schema() is None:
            return None
        return backend.SkillsConfig(
            enabled=True, store=self._skills, max_searches=self.cfg.max_searches
        )

    # ------------------------------------------------------------------ stream events

    def _current(self) -> _Reply | None:
        """The active reply if the signal being handled comes from its worker."""
        reply = self._reply
        if reply is None or self.sender() is not reply.worker:
            return None
        return reply

    @Slot(str)
    def _on_content(self, text: str) -> None:
        reply = self._current()
        if reply is None:
            return
        reply.content.append(text)
        reply.dirty = True
        reply.view.append_content(text)

    @Slot(str)
    def _on_reasoning(self, text: str) -> None:
        reply = self._current()
        if reply is None:
            return
        reply.reasoning.append(text)
        reply.dirty = True
        reply.view.append_reasoning(text)

    @Slot(str)
    def _on_search_started(self, query: str) -> None:
        if self._current() is not None:
            self.show_status(f"Searching the web for “{query}”…")

    @Slot(object)
    def _on_search_finished(self, result: object) -> None:
        reply = self._current()
        if reply is None or not isinstance(result, dict):
            return
        reply.view.add_search(
            str(result.get("query", "")),
            list(result.get("results") or []),
            str(result.get("error") or ""),
        )

    @Slot(str)
    def _on_skill_loaded(self, name: str) -> None:
        if self._current() is None:
            return
        if self.load_skill(name):
            self.show_status(f"The model loaded skill {name}.")

    @Slot(object)
    def _on_stats(self, stats: object) -> None:
        reply = self._current()
        if reply is None or not isinstance(stats, dict):
            return
        reply.usage = dict(stats.get("usage") or {})
        reply.timings = dict(stats.get("timings") or {})
        reply.view.set_stats(reply.usage, reply.timings)

    @Slot(str, object)
    def _on_failed(self, message: str, error: object) -> None:
        reply = self._current()
        if reply is not None:
            reply.error = message or "The reply failed."

    @Slot()
    def _on_finished(self) -> None:
        reply = self._current()
        if reply is None:
            return
        self._finish_reply("error" if reply.error else "complete")
        if reply.error:
            self.show_status(f"The reply failed: {reply.error}")

    @Slot()
    def _save_partial(self) -> None:
        reply = self._reply
        if reply is None or not reply.dirty:
            return
        reply.dirty = False
        try:
            self.history.update_message(
                reply.message_id,
                content="".join(reply.content),
                reasoning="".join(reply.reasoning),
            )
        except HistoryError as exc:
            self.show_status(f"The reply could not be saved: {exc}", timeout=0)

    def _finish_reply(self, status: str) -> None:
        reply = self._reply
        assert reply is not None
        self._reply = None
        self._save_timer.stop()
        try:
            self.history.update_message(
                reply.message_id,
                content="".join(reply.content),
                reasoning="".join(reply.reasoning),
                status=status,
                error=reply.error,
                usage=reply.usage,
                timings=reply.timings,
            )
        except HistoryError as exc:
            self.show_status(f"The reply could not be saved: {exc}", timeout=0)
        reply.view.finish()
        reply.view.set_status(status, reply.error)
        self.composer.set_streaming(False)
        self.streaming_changed.emit(False)

    # ------------------------------------------------------------------ skills and models

    def _skills_changed(self, *, persist: bool = True) -> None:
        self._system_cache = None
        if persist and self._session_id is not None:
            self.history.set_skills(self._session_id, self._loaded)
        self.skill_chips.set_skills(self._loaded)

    def _refresh_skill_names(self) -> None:
        if self._skills is None:
            return
        self._skills.refresh()
        by_name = {skill.name: skill for skill in self._skills.skills()}
        self.composer.set_skills(
            [
                (name, by_name[name].description if name in by_name else "")
                for name in self._skills.user_names()
            ]
        )

    def _settled_messages(self, session_id: int) -> list[dict]:
        """The chat's messages, with replies left "streaming" by a crash marked "stopped"."""
        messages = self.history.messages(session_id)
        for message in messages:
            if message["status"] == "streaming":
                # Only this window streams into a chat it shows, and it is not streaming now:
                # the row is what a previous run saved before it died.
                self.history.update_message(message["id"], status="stopped")
                message["status"] = "stopped"
        return messages

    def _update_title(self) -> None:
        session = self.history.get_session(self._session_id) if self._session_id else None
        title = (session or {}).get("title") or "New chat"
        self.setWindowTitle(f"{title} — llamachat")

    def _preset_text(self) -> str:
        session = self.history.get_session(self._session_id) if self._session_id else None
        if session and session.get("prompt_custom"):
            return str(session["prompt_custom"])
        name = (session or {}).get("prompt_name") or prompts.DEFAULT_NAME
        try:
            return self._prompts.get(name)
        except prompts.PromptError as exc:
            log.warning("cannot read prompt preset %r: %s", name, exc)
            return ""

    def _reads_images(self, model: str) -> bool:
        info = self._models.get(model)
        return info is not None and info.accepts_images

    def _apply_model(self, model_id: str) -> None:
        changed = model_id != self._model
        self._model = model_id
        self._filling_models = True
        try:
            if model_id and self.model_combo.findData(model_id) < 0:
                self.model_combo.addItem(model_id, model_id)
            self.model_combo.setCurrentIndex(self.model_combo.findData(model_id))
        finally:
            self._filling_models = False
        self.composer.set_model(model_id, images=self._reads_images(model_id))
        if changed:
            self.model_changed.emit(model_id)

    @Slot(int)
    def _on_model_chosen(self, index: int) -> None:
        if self._filling_models or index < 0:
            return
        self.set_model(str(self.model_combo.itemData(index)))

    @Slot(object)
    def _on_models_listed(self, result: object) -> None:
        if self.sender() is not self._listing:
            return
        infos, errors = result  # type: ignore[misc]
        self._models = {info.id: info for info in infos}
        self._filling_models = True
        try:
            self.model_combo.clear()
            for info in infos:
                label = info.id
                if info.status not in ("loaded", "unknown"):
                    label = f"{info.id}  ({info.status})"
                self.model_combo.addItem(label, info.id)
        finally:
            self._filling_models = False
        model = self._model
        if not model and infos:
            # Prefer a model already in memory: the first reply then starts at once.
            loaded = [info.id for info in infos if info.status == "loaded"]
            model = (loaded or [infos[0].id])[0]
        self._apply_model(model)
        if not infos and not errors:
            self.show_status(
                f"The router at {self.cfg.router_url} offers no models: add GGUF files "
                "to its models folder.",
                timeout=0,
            )
        if errors:
            self.show_status(
                "Could not list the models of "
                + "; ".join(f"{source}: {message}" for source, message in errors.items()),
                timeout=0,
            )
        self.models_listed.emit(infos)

    @Slot(str, object)
    def _on_models_failed(self, message: str, error: object) -> None:
        if self.sender() is not self._listing:
            return
        self.show_status(f"Could not list the models: {message}", timeout=0)

    # ------------------------------------------------------------------ closing

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save a streaming reply as stopped and let the worker threads end."""
        self.stop()
        if not self._threads.wait_all(10_000):
            log.warning("a worker thread did not end within 10 s of closing the window")
        for registry in (*self._old_registries, self._registry):
            registry.close()
        super().closeEvent(event)
