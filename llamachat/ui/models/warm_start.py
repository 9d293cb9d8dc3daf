"""At start-up, the shown chat's model is loaded on llamachat's own server, so it is warmed.

The warm-up (`warmup.Warmer`) never loads a model: a chat opened on a model that is not
in memory stays cold until that model loads. At start-up that wait is the first reply's:
the window reopens on the chat shown last, and the person who reopened it is about to
use its model. `WarmStart` asks the router, once, at the first listing of the router in
use, to load that chat's model when all of these hold: `warm_cache` is on, the chat is a
stored one (a new chat has little to read ahead), the router is the llama-server llamachat started (a router someone else runs keeps its memory to
itself), the model is the router's own (not a provider's) and it is listed as not
loaded. It says so in the status bar. The Warmer's own trigger (`statuses_changed`, a
model that finished loading) then sends the warm-up, so the chat is read ahead before
the first message is typed.

Threads: the GUI thread only; the load is the picker's (`ModelPicker.load`, in the
background). Errors: a failed load shows in the picker as any other.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot

from llamachat.ui.app import READY, App
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.models.picker import ModelPicker

STATUS_MS = 8000


class WarmStart(QObject):
    """Loads the shown chat's model once at start on llamachat's own server, to warm it."""

    status = Signal(str, int)  # what to say in the status bar, for how long (ms)

    def __init__(
        self,
        app: App,
        chat: Conversation,
        picker: ModelPicker,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._chat = chat
        self._picker = picker
        self.asked = ""
        """The model this start-up asked to load ('' when none)."""
        self.decided = False
        """Whether the first listing of the router in use came (and the choice was made)."""
        picker.models_listed.connect(self._on_listed)

    @Slot(object)
    def _on_listed(self, _infos: object = None) -> None:
        """The first listing of the router in use decides; later ones change nothing."""
        if self.decided:
            return
        if self._app.router.status != READY:
            return  # a stand-in's listing, or the configured URL's before the router is had
        model = self._chat.model
        status = self._picker.status(model) if model else "unknown"
        if status == "unknown":
            return  # the chat's model not listed yet: the next listing says
        self.decided = True
        if (
            not self._app.config.warm_cache
            or self._chat.session_id is None  # a new chat: little to read, no load for it
            or self._app.managed_server() is None
            or status != "unloaded"
        ):
            return
        self.asked = model
        self._picker.load(model)
        self.status.emit(
            f"Loading {model} to read this chat ahead of your next message…", STATUS_MS
        )
