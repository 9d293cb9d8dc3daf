"""The quick window: one question, one streamed answer, in a small window near the pointer.

`QuickWindow(app)` is built from the `App` alone, whose configuration, history,
registry and router state it reads and follows (settings saved in the chat window
apply here too). It is
frameless and stays on top; Enter asks, Esc stops the answer and hides the window,
Ctrl+Enter (or "Continue in chat") turns the exchange into a normal chat session and
hands it to the chat window through `continue_requested`.

Each question is a new session of mode "oneshot", saved as it streams like a chat
(the reply row is rewritten at most once a second); asking, Stop, Retry and the
skills are the conversation's (`conversation.Conversation` in one-shot mode; the
accessors shared with the chat window are `seams.ConversationSeams`'). Skills
named in the question (`/name`, a whole-word mention) and skills the model loads
apply to that one reply: they show as chips while it streams and are dropped when it
ends; the session's `skills` stay empty. While memory is on, the question carries the
memories kept everywhere (it has no project), as a chat's does; `remember` is never
offered (one question: nothing to undo).

The model is `oneshot_model`, else `default_model`, else one the router lists
(a loaded one first). A question asked before the list arrives waits for it. The
router is followed by `models.quick_router.QuickRouter`: while it is looked for or
started nothing is listed, and its news goes on the notice line.

Errors: none of its own. A missing router or model, and a failed reply, are shown
in the window (the notice line, and the reply's own error mark).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, Signal, Slot
from PySide6.QtGui import (
    QCloseEvent,
    QCursor,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QPalette,
    QShortcut,
)
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from llamachat import turn
from llamachat.config import Config
from llamachat.context import Overflow
from llamachat.history.store import HistoryError
from llamachat.router import providers
from llamachat.router.client import BackendError
from llamachat.router.models import ModelInfo
from llamachat.ui import plain, tasks
from llamachat.ui.app import App
from llamachat.ui.chat import conversation
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.chat.seams import ConversationSeams
from llamachat.ui.chat.worker import collect_garbage_on_gui_thread
from llamachat.ui.models.feed import list_models
from llamachat.ui.models.in_use import UnloadGuard
from llamachat.ui.models.quick_router import QuickRouter
from llamachat.ui.views.chips import SkillChips
from llamachat.ui.views.composer import Composer
from llamachat.ui.views.messages import MessagesView
from llamachat.ui.voice.dictation_input import DictationInput
from llamachat.ui.voice.voice_mode import voice_mode_for

log = logging.getLogger(__name__)

WIDTH = 640
ANSWER_HEIGHT = 360
# Room kept between the window and the screen's edge when placed near the pointer.
EDGE = 8


class QuickWindow(ConversationSeams, QWidget):
    """A compact always-on-top window that asks one question and streams the answer."""

    continue_requested = Signal(object, str)

    def __init__(self, app: App, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.app = app
        cfg = app.config
        # The conversation: the one-shot session, its skills, the answer and its request.
        self.chat = Conversation(
            app,
            mode=conversation.ONESHOT,
            model=turn.configured_model(cfg),
            images=lambda model: model in self._models and self._models[model].accepts_images,
            hears=lambda model: model in self._models and self._models[model].hears_audio,
            parent=self,
        )
        collect_garbage_on_gui_thread()
        # The model the settings name, to see when a config_changed names another.
        self._configured = self.chat.model
        self._models: dict[str, ModelInfo] = {}
        # A question whose model's load may unload one another window uses says so first.
        self.unload_guard = guard = UnloadGuard(
            app.models_in_use,
            self.chat,
            lambda: [*self._models.values()],
            lambda: app.registry,
            self,
        )
        app.router_changed.connect(guard.router_changed)
        self._listing: Future | None = None
        self._waiting = False
        self._build()
        # While the router is looked for or started, a listing could only say that the
        # configured URL is unreachable, over the notice saying why: it waits.
        self.router = QuickRouter(app, self, self)
        self._follow_conversation()
        self._refresh_skill_names()
        self._show_model()
        app.config_changed.connect(self._on_config_changed)
        if not self.chat.model:
            self.refresh_models()

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        self.setWindowTitle("Quick question — llamachat")
        self.setAccessibleName("Quick question")
        self.setWindowFlags(
            Qt.WindowType.Tool
            | Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
        )
        self.setMinimumWidth(420)
        self.resize(WIDTH, 10)

        self.model_label = plain.Label("", self)
        self.model_label.setAccessibleName("Model")
        self.model_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.continue_button = QPushButton("Continue in chat", self)
        self.continue_button.setAccessibleName("Continue in chat")
        self.continue_button.setToolTip(
            "Carry on with this exchange in the chat window (Ctrl+Enter)"
        )
        self.continue_button.clicked.connect(self.continue_in_chat)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.model_label, 1)
        top.addWidget(self.continue_button)

        self.notice = plain.Label("", self)
        self.notice.setAccessibleName("Notice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()

        self.skill_chips = SkillChips(self)
        self.skill_chips.unload_requested.connect(self.unload_skill)

        self.composer = Composer(self)
        self.composer.submitted.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.notice.connect(self.show_notice)
        self.chat.too_big.connect(self._on_too_big)
        # A question held while the server counted it, not sent after all, is put back.
        self.chat.returned.connect(self._put_back_unsent)
        self.composer.editor.setPlaceholderText(
            "Ask a quick question  (Enter asks, Ctrl+Enter continues in chat, Esc hides)"
        )
        self.composer.editor.installEventFilter(self)
        self.voice = DictationInput(
            self.app, self.composer, models=lambda: list(self._models.values()), window=self
        )

        self.messages = MessagesView(self)
        self.messages.setAccessibleName("Answer")
        self.messages.set_font_size(self.cfg.font_size)
        self.messages.setMinimumHeight(ANSWER_HEIGHT)
        self.messages.retry_requested.connect(self.retry)
        self.messages.regenerate_requested.connect(self.retry)
        self.messages.edit_requested.connect(self.edit_message)
        self.messages.version_requested.connect(self.chat.show_version)
        # Replies read aloud from the ⋯ menu, and voice mode (its button beside Attach).
        self.voice_mode = voice_mode_for(self, status=self.show_notice)
        self.messages.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.addLayout(top)
        layout.addWidget(self.notice)
        layout.addWidget(self.skill_chips)
        layout.addWidget(self.composer)
        layout.addWidget(self.messages, 1)

        hide = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        hide.activated.connect(self.dismiss)

    # ------------------------------------------------------------------ public seams
    # (the session, model, streaming state and skills: `ConversationSeams`, from `chat`)

    def running_workers(self) -> int:
        """Worker threads not yet ended, a model listing under way included."""
        listing = self._listing is not None and not self._listing.done()
        return super().running_workers() + int(listing)

    def show_notice(self, text: str) -> None:
        """Say something in the window (an error, what to do next); '' clears it."""
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def present(self, pointer: QPoint | None = None) -> None:
        """Show the window near the pointer (on its screen), raised, the input focused."""
        self.place_near(pointer if pointer is not None else QCursor.pos())
        self.show()
        self.raise_()
        self.activateWindow()
        self.composer.editor.setFocus()

    def place_near(self, point: QPoint) -> None:
        """Move the window's top centre to just below `point`, kept inside its screen."""
        size = self.size().expandedTo(self.sizeHint())
        self._move_inside(QRect(QPoint(point.x() - size.width() // 2, point.y() + EDGE), size))

    def _move_inside(self, target: QRect) -> None:
        screen = QGuiApplication.screenAt(target.center()) or QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry().adjusted(EDGE, EDGE, -EDGE, -EDGE)
            width, height = target.width(), target.height()
            target.moveLeft(max(area.left(), min(target.left(), area.right() - width + 1)))
            target.moveTop(max(area.top(), min(target.top(), area.bottom() - height + 1)))
        self.move(target.topLeft())

    def set_model(self, model_id: str) -> None:
        """Answer with `model_id` from now on (`llamachat ask --model`)."""
        self.chat.model = model_id
        self._show_model()

    @Slot(object)
    def _on_config_changed(self, cfg: Config) -> None:
        """Follow settings saved in any window: font, skills folders, the configured model."""
        self.messages.set_font_size(cfg.font_size)
        configured = turn.configured_model(cfg)
        if configured != self._configured:
            # Only a new model in the settings replaces the one in use (`ask --model` too).
            self._configured = configured
            if configured:
                self.set_model(configured)

    def refresh_models(self) -> None:
        """List the models in the background to pick one (not while the router is awaited)."""
        if self.router.awaiting:
            return
        cfg = self.cfg
        listing = tasks.run_in_background(
            lambda: _list_models(cfg),
            lambda future: self._on_models_listed(listing, future),
            receiver=self,
        )
        self._listing = listing

    def forget_listing(self) -> None:
        """The router is being replaced: a listing under way is no news when it ends."""
        self._listing = None

    @Slot(str)
    def unload_skill(self, name: str) -> None:
        """Drop a skill waiting for the next question (or used by this answer)."""
        self.chat.unload_skill(name)

    # ------------------------------------------------------------------ asking

    @Slot()
    def send(self) -> None:
        """Ask the composer's question as a new one-shot session and stream the answer."""
        if self.chat.is_streaming():
            self.show_notice("An answer is still coming: Stop it before asking again.")
            return
        if self.composer.is_empty() or self.composer.refused():
            return
        notice = self.unload_guard.check(self.chat.model)
        if notice:
            self.show_notice(f"{notice} Ask again to ask anyway.")
            return
        if self._submit_draft() == conversation.NO_MODEL:
            if self.router.awaiting or self._listing is not None:
                self._waiting = True
                # While the router is awaited, the notice already says what for.
                if not self.router.awaiting:
                    self.show_notice("Looking for a model to answer…")
            else:
                self.show_notice(turn.no_model_message(self.cfg))

    @Slot(object)
    def _on_too_big(self, overflow: Overflow) -> None:
        self.show_notice(
            f"{overflow.message()} Shorten the question or take off an attachment or a skill."
        )

    @Slot()
    def stop(self) -> None:
        """Stop the answer now, keeping what arrived (saved as "stopped")."""
        self.chat.stop()

    @Slot(object)
    def retry(self, message_id: object) -> None:
        """Ask for the answer again; the earlier one stays until the new one has text."""
        if not self.chat.is_streaming():
            self.chat.retry(message_id)

    @Slot(object)
    def edit_message(self, message_id: object) -> None:
        """Put the question back in the box: sending it asks again as a new question."""
        self._put_back(self.chat.edit(message_id))

    @Slot()
    def dismiss(self) -> None:
        """Esc: stop any answer and hide the window."""
        self.stop()
        self.hide()

    @Slot()
    def continue_in_chat(self) -> None:
        """Make this exchange a chat session and hand it (and any draft) to the chat window."""
        self.stop()
        draft = self.composer.text()
        session_id = self.session_id
        if session_id is not None:
            try:
                self.history.set_mode(session_id, "chat")
            except HistoryError as exc:
                self.show_notice(f"Could not turn this into a chat: {exc}")
                return
        self.composer.clear()
        self.chat.leave_session()
        self.messages.clear()
        self.messages.hide()
        self.hide()
        self.continue_requested.emit(session_id, draft)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Ctrl+Enter in the input continues in chat (the editor would send on it)."""
        if (
            watched is self.composer.editor
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and event.modifiers() & Qt.KeyboardModifier.ControlModifier
        ):
            self.continue_in_chat()
            return True
        return super().eventFilter(watched, event)

    # ------------------------------------------------------------------ conversation events

    def _follow_conversation(self) -> None:
        chat = self.chat
        chat.message_added.connect(self._on_message_added)
        chat.messages_reset.connect(self.messages.load_messages)
        chat.versions_changed.connect(self.messages.set_versions)
        chat.reply_started.connect(self._on_reply_started)
        chat.reply_ended.connect(self._on_reply_ended)
        chat.skills_changed.connect(self.skill_chips.set_skills)
        chat.store_changed.connect(self._refresh_skill_names)
        chat.notice.connect(lambda text, _timeout: self.show_notice(text))

    @Slot(object)
    def _on_message_added(self, message: dict) -> None:
        # A one-shot session holds one question: the answer area shows only it.
        self.show_notice("")
        self.messages.clear()
        self.messages.show()
        self.messages.append_message(message)
        # Grow to fit the answer, never narrower: adjustSize() would fall to the minimum width.
        self.resize(self.width(), max(self.height(), self.sizeHint().height()))
        self._move_inside(self.frameGeometry())

    @Slot(object)
    def _on_reply_started(self, reply: ReplyStream) -> None:
        reply.attach(self.messages.append_message(reply.row()))
        self.composer.set_streaming(True)

    @Slot(str, str)
    def _on_reply_ended(self, status: str, error: str) -> None:
        self.composer.set_streaming(False)

    # ------------------------------------------------------------------ models

    def _refresh_skill_names(self) -> None:
        if self.chat.store is not None:
            self.composer.offer_skills(self.chat.store)

    def _show_model(self) -> None:
        model = self.chat.model
        self.model_label.setText(model or "no model yet")
        # Its context size is asked for now, so the check before a send knows it.
        self.chat.context.set_model(model)
        info = self._models.get(model)
        self.composer.set_model(
            model,
            images=info is not None and info.accepts_images,
            audio=info is not None and info.hears_audio,
            hearers=[i.id for i in self._models.values() if i.hears_audio],
        )

    def _on_models_listed(self, listing: Future, future: Future) -> None:
        if listing is not self._listing:
            return  # asked before the router changed: no news
        self._listing = None
        try:
            infos, errors = future.result()
        except BackendError as exc:
            self._waiting = False
            self.show_notice(f"Could not list the models: {exc.message or exc}")
            return
        self._models = {info.id: info for info in infos}
        if not self.chat.model:
            self.chat.model = turn.pick_model(self.cfg, infos)
        self._show_model()
        waiting, self._waiting = self._waiting, False
        if not self.chat.model:
            reason = errors.get(providers.ROUTER, "") if errors else ""
            self.show_notice(reason or turn.no_model_message(self.cfg))
            return
        if waiting:
            self.send()

    # ------------------------------------------------------------------ closing

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save a streaming answer as stopped and let the worker threads end."""
        self.chat.close()
        if not self.chat.threads.wait_all(10_000):
            log.warning("a worker thread did not end within 10 s of closing the quick window")
        super().closeEvent(event)


def _list_models(cfg: Config) -> tuple[list[ModelInfo], dict[str, str]]:
    """Every model the router and providers offer, and what failed per source (blocking)."""
    registry = providers.Registry(cfg)
    try:
        return list_models(registry)
    finally:
        registry.close()
