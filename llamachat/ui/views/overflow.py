"""What the chat shows when a message would overflow the model's context, with the ways out.

`OverflowPanel` (accessible name "Message too long") says how many tokens the message
needs, how many the context holds and how many are kept for the reply, and offers one
button per way out: compact the chat and send (the earlier messages summarized into a
new branch of it, `compaction.Compaction`), unload a skill (with what it costs), remove an attachment, start a
new chat with this message, and, for the server llamachat manages, raise the model's
context (up to the size it was trained for). It only emits what the user chose;
`OverflowGuide` does it for the chat window, and measures the draft as it is typed.
The message itself stays in the composer.

Errors: none; names from outside (skills, files, models) are shown as plain text.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from llamachat.context import Overflow
from llamachat.router import model_files
from llamachat.router.models import Models
from llamachat.ui import plain, tasks
from llamachat.ui.views.notice import STATUS_MS

if TYPE_CHECKING:
    from llamachat.ui.app import App
    from llamachat.ui.chat.conversation import Conversation
    from llamachat.ui.views.composer import Composer

# Context sizes offered when raising one: llama.cpp runs any, these are the usual steps.
_STEPS = (4096, 8192, 16384, 32768, 65536, 131072)


def raised_context(overflow: Overflow) -> int | None:
    """The context size that fits the message: the next usual step, at most the trained size."""
    needed = overflow.breakdown.total + overflow.reserve
    size = next((step for step in _STEPS if step >= needed), None)
    if overflow.trained:
        size = min(size or overflow.trained, overflow.trained)
    return size if size is not None and size > overflow.n_ctx and size >= needed else None


def fixed_context(server_args: Sequence[str]) -> int | None:
    """The context size `server_args` gives every model (`--ctx-size`/`-c`), which a
    preset's ctx-size does not override; None when it gives none."""
    for flag, value in itertools.pairwise(server_args):
        if flag in ("--ctx-size", "-c") and value.isdigit():
            return int(value)
    return None


class OverflowPanel(QFrame):
    """The refusal of a message too long for the context, and its one-click ways out."""

    compact = Signal()
    unload_skill = Signal(str)
    remove_attachment = Signal(str)
    new_chat = Signal()
    raise_context = Signal(str, int)  # model, new context size

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Message too long")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("OverflowPanel { border: 1px solid #c0392b; border-radius: 6px; }")
        self.text = plain.Label("", self)
        self.text.setWordWrap(True)
        self.buttons = QHBoxLayout()
        self.buttons.setContentsMargins(0, 0, 0, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.text)
        layout.addLayout(self.buttons)
        self.hide()

    def show_overflow(
        self,
        overflow: Overflow,
        *,
        managed: bool,
        compactable: int = 0,
        keep: int = 0,
        fixed_context: int | None = None,
    ) -> None:
        """Say why the message was not sent and offer the ways out that can help.

        `managed`: the server is llamachat's (its context can be raised), unless
        `fixed_context` (its `--ctx-size` in server_args) overrides the preset's;
        `compactable`: the earlier messages compacting would summarize (of all but the
        last `keep` exchanges). When nothing offered can help, it says why.
        """
        while self.buttons.count():
            item = self.buttons.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.setParent(None)  # gone from the panel now, deleted once idle
                widget.deleteLater()
        lines = [overflow.message() + " Your message is still in the box."]
        if overflow.trained:
            lines.append(f"{overflow.model} was trained for up to {overflow.trained:,} tokens.")
        history = overflow.breakdown.get("history")
        if compactable:
            self._button("Compact and send", self.compact.emit)
        for name, tokens in overflow.breakdown.parts:
            kind, _, rest = name.partition(":")
            if kind == "skill" and rest in overflow.loads:
                lines.append(
                    f"Your message loads skill {rest} ({tokens:,} tokens); it is not loaded "
                    f"now: take /{rest} out of the message to send it without."
                )
            elif kind == "skill" and rest:
                self._button(f"Unload {rest} (−{tokens:,})", partial(self.unload_skill.emit, rest))
            elif kind == "attachment" and rest:
                self._button(
                    f"Remove {rest} (−{tokens:,})", partial(self.remove_attachment.emit, rest)
                )
        if history:
            self._button("New chat with this message", self.new_chat.emit)
        size = raised_context(overflow) if managed else None
        if size is not None and fixed_context is not None:
            lines.append(
                f"A larger context would fit it, but server_args sets --ctx-size "
                f"{fixed_context:,}, which overrides the model's preset: change it in the "
                "config's server_args."
            )
        elif size is not None:
            self._button(
                f"Raise the context to {size:,}",
                lambda: self.raise_context.emit(overflow.model, size),
            )
        if history and not compactable:
            lines.append(
                f"Compacting cannot help: the chat has no more than its last {keep} "
                "exchanges, which it keeps. Shorten the message, or send it in a new chat."
                if keep
                else "Compacting cannot help: nothing is left to summarize."
            )
        elif not history and self.buttons.count() == 0 and not overflow.loads:
            lines.append("The message alone is too long for this model: shorten it.")
        self.text.setText("\n".join(lines))
        self._button("Dismiss", self.hide)
        self.buttons.addStretch(1)
        self.show()

    def _button(self, text: str, slot: Callable[[], object]) -> QPushButton:
        button = QPushButton(text, self)
        button.setAccessibleName(text)

        def clicked() -> None:
            slot()
            self.hide()  # the way out was taken (or the notice dismissed)

        button.clicked.connect(clicked)
        self.buttons.addWidget(button)
        return button


class OverflowGuide(QObject):
    """The chat window's side of a message too long: the draft measured as it is typed, the
    panel shown when the conversation refuses one, and the way out the user took done.

    "New chat with this message" is the panel's `new_chat`, for the window to connect;
    once "Compact and send" compacted the chat, `send_requested` asks it to send the
    message (still in the composer) again.
    """

    # A status-bar line (timeout in ms).
    status = Signal(str, int)
    # A problem the user must act on, shown whole until dismissed.
    problem = Signal(str)
    send_requested = Signal()

    def __init__(
        self,
        app: App,
        chat: Conversation,
        *,
        composer: Composer,
        panel: OverflowPanel,
        parent: QObject,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._chat = chat
        self._composer = composer
        self.panel = panel
        composer.editor.textChanged.connect(self._on_draft_changed)
        composer.attachments_changed.connect(self._on_draft_changed)
        panel.unload_skill.connect(chat.unload_skill)
        panel.remove_attachment.connect(composer.remove_attachment)
        panel.raise_context.connect(self._raise_context)
        panel.compact.connect(self._compact)
        chat.too_big.connect(self._on_too_big)
        chat.compaction.ended.connect(self._on_compacted)
        self._send_after = False
        self._compacted = False

    @Slot()
    def _on_draft_changed(self) -> None:
        attachments = [item.to_dict() for item in self._composer.attachments()]
        self._chat.context.set_draft(self._composer.text(), attachments)

    @Slot()
    def _compact(self) -> None:
        self._send_after = self._chat.compaction.compact()

    @Slot(str, str)
    def _on_compacted(self, status: str, _error: str) -> None:
        send, self._send_after = self._send_after, False
        if send and status == "complete":
            self._compacted = True  # a refusal now says the chat was compacted already
            try:
                self.send_requested.emit()
            finally:
                self._compacted = False

    @Slot(object)
    def _on_too_big(self, overflow: Overflow) -> None:
        # The server llamachat runs always reads a preset (the config's, else its own).
        managed = self._app.managed_server() is not None
        cfg = self._app.config
        if self._compacted:
            overflow = dataclasses.replace(overflow, compacted=True)
        self.panel.show_overflow(
            overflow,
            managed=managed,
            compactable=self._chat.compaction.compactable(self._chat.state.editing),
            keep=cfg.compact_keep,
            fixed_context=fixed_context(cfg.server_args) if managed else None,
        )

    @Slot(str, int)
    def _raise_context(self, model: str, size: int) -> None:
        """Write the model's new context size into the preset and reload it with it."""
        managed = self._app.managed_server()
        if managed is None:
            return
        preset = managed.preset_path
        try:
            model_files.set_preset_context(preset, model, size)
        except model_files.ManagedServerError as exc:
            self.problem.emit(str(exc))
            return
        url, registry = self._app.config.router_url, self._app.registry

        def reload() -> None:
            model_files.reload_models(url)
            Models(registry.router()).unload(model)

        tasks.run_in_background(reload, lambda future: self._on_context_raised(model, future))

    def _on_context_raised(self, model: str, future: Future) -> None:
        try:
            future.result()
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self.problem.emit(f"The preset was written, but {model} was not reloaded: {exc}")
            return
        self.status.emit(f"{model} loads with the larger context at the next message.", STATUS_MS)
        self._chat.context.refresh_size()
