"""The chat window's model: the picker's choice applied to the chat, and the star saved.

`ModelChoice(app, chat, picker=..., composer=..., meter=...)` applies the model the
picker (or an opened chat) chooses to the conversation, the picker, the composer
(which attaches images only for a model that reads them) and the context meter,
and remembers it on the open chat. It passes each listing on (`listed`) once the
composer knows the listed models' modalities, saves the starred default model to
the settings and shows the default of settings saved in any window.

Errors: none raised; a default that cannot be saved is a `problem`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from llamachat import turn
from llamachat.config import Config, ConfigError
from llamachat.router.models import ModelEvent, ModelInfo
from llamachat.ui.views.notice import STATUS_MS

if TYPE_CHECKING:
    from llamachat.ui.app import App
    from llamachat.ui.chat.conversation import Conversation
    from llamachat.ui.chat.reply import ReplyStream
    from llamachat.ui.models.picker import ModelPicker
    from llamachat.ui.views.composer import Composer
    from llamachat.ui.views.meter import ContextMeter


class ModelChoice(QObject):
    """Keeps the chat's model, the picker, the composer and the meter in step."""

    changed = Signal(str)  # the model new replies come from, when it changed
    listed = Signal(list)  # the models just listed (ModelInfo)
    # A status-bar line (timeout in ms).
    status = Signal(str, int)
    # A problem the user must act on, shown whole until dismissed.
    problem = Signal(str)

    def __init__(
        self,
        app: App,
        chat: Conversation,
        *,
        picker: ModelPicker,
        composer: Composer,
        meter: ContextMeter,
        parent: QObject,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._chat = chat
        self._picker = picker
        self._composer = composer
        self._meter = meter
        self._models: dict[str, ModelInfo] = {}
        # An opened chat's model applied before any listing, and the model before it.
        self._unchecked: tuple[str, str] | None = None
        picker.model_changed.connect(self.set_model)
        picker.models_listed.connect(self._on_models_listed)
        picker.default_changed.connect(self._on_default_changed)
        # A model just loaded tells the meter its size at once, not at the first send.
        picker.model_event.connect(chat.context.model_event)
        # A reply is activity: the idle unload (routers that cannot sleep) waits again.
        chat.reply_started.connect(lambda _reply: picker.idle.note_activity())
        # A reply whose model the router loads first says so, with the load's progress.
        chat.reply_started.connect(self._on_reply_started)
        picker.model_event.connect(self._on_model_event)
        chat.reply_ended.connect(lambda _status, _error: picker.idle.note_activity())
        app.config_changed.connect(self._on_config_changed)

    def models(self) -> list[ModelInfo]:
        """The models last listed by the router and providers."""
        return list(self._models.values())

    def reads_images(self, model: str) -> bool:
        """Whether `model` reads images (as far as its listing says)."""
        return "image" in self._picker.modalities(model)

    def hears_audio(self, model: str) -> bool:
        """Whether `model` takes sounds (as far as its listing says)."""
        return "audio" in self._picker.modalities(model)

    def _tell_composer(self, model: str) -> None:
        self._composer.set_model(
            model,
            images=self.reads_images(model),
            audio=self.hears_audio(model),
            hearers=[m.id for m in self._picker.models() if "audio" in m.modalities],
        )

    def apply_opened(self, model_id: str) -> str:
        """Apply an opened chat's model; '' or, when the models listed lack it (a chat
        imported from another app, a model since deleted), a note that the chat goes on
        with the model in use: a reply from a model that is not there could only fail."""
        current = self._chat.model
        if not self._models or model_id in self._models or not current:
            # Before the first listing (the chat the window reopens at its start), the
            # listing checks it when it comes.
            self._unchecked = (model_id, current) if not self._models else None
            self.apply(model_id)
            return ""
        return _not_offered(model_id, current)

    @Slot(str)
    def set_model(self, model_id: str) -> None:
        """Answer with `model_id` from now on (remembered on the open chat)."""
        self.apply(model_id)
        session_id = self._chat.session_id
        if session_id is not None and model_id:
            self._chat.history.set_model(session_id, model_id)

    def apply(self, model_id: str) -> None:
        """Answer with `model_id` from now on, without touching the open chat's record."""
        changed = model_id != self._chat.model
        self._chat.model = model_id
        if self._picker.current_model() != model_id:
            self._picker.set_current(model_id)
        self._tell_composer(model_id)
        self._meter.set_model(model_id)
        if changed:
            self.changed.emit(model_id)

    @Slot(list)
    @Slot(object)
    def _on_reply_started(self, reply: ReplyStream) -> None:
        if self._picker.status(reply.model) in ("unloaded", "sleeping", "loading"):
            reply.model_loading(self._picker.progress(reply.model))

    @Slot(object)
    def _on_model_event(self, event: ModelEvent) -> None:
        reply = self._chat.outbox.reply
        if reply is not None and event.model == reply.model and event.status == "loading":
            reply.model_loading(event.progress)

    def _on_models_listed(self, infos: list) -> None:
        self._models = {info.id: info for info in infos}
        unchecked, self._unchecked = self._unchecked, None
        if unchecked is not None and infos and unchecked[0] == self._chat.model:
            opened, before = unchecked
            if opened not in self._models:
                instead = (
                    before if before in self._models else turn.pick_model(self._app.config, infos)
                )
                self.apply(instead)
                self.status.emit(_not_offered(opened, instead), STATUS_MS)
        self._chat.context.models_listed(infos)
        # The modalities may have arrived only now (a chat's model listed after it opened).
        model = self._chat.model
        self._tell_composer(model)
        self.listed.emit(infos)

    @Slot(str)
    def _on_default_changed(self, model_id: str) -> None:
        try:
            self._app.save_settings({"default_model": model_id})
        except ConfigError as exc:
            self.problem.emit(f"The default model was not saved: {exc}")
            return
        self.status.emit(
            f"{model_id} is the default model for new chats."
            if model_id
            else "No default model: llamachat picks one.",
            STATUS_MS,
        )

    @Slot(object)
    def _on_config_changed(self, cfg: Config) -> None:
        """Show the default model of settings saved in any window."""
        self._picker.set_default(cfg.default_model)


def _not_offered(model_id: str, instead: str) -> str:
    """What to say when an opened chat's model is not offered."""
    return f"This chat was with {model_id}, which the server does not offer: it goes on with {instead}."
