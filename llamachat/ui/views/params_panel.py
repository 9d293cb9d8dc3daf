"""The per-chat request parameters: a ⚙ button in the status bar and its compact panel.

`ChatParams(chat)` gives `button` (⚙ in the status bar, with the number of values the
chat sets; its menu, opening upward, holds `panel`): one row per
`params.PARAMS` entry, each at "default" until the user sets it, then what a message too
long for the context makes happen in this chat (`compact.CHAT_KEY`, never sent).
"default" means the config's value for the model and preset (shown in the row's tooltip)
or, when the config has none, the server's. A change is the chat's override from the next request
on, saved with the chat (`Conversation.set_params`); Reset clears them. Nothing here
reloads a model: llama-server takes these per request.

Errors: none; a spin box cannot hold a value outside its parameter's range.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
    QWidgetAction,
)

from llamachat import compact
from llamachat.params import PARAMS, Param
from llamachat.ui import plain
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.views.popup import UpwardMenu

log = logging.getLogger(__name__)

DEFAULT_TEXT = "default"


class ParamsPanel(QFrame):
    """One editor per request parameter; `values()` are the ones set (not at "default")."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Parameters")
        self.editors: dict[str, QSpinBox | QDoubleSpinBox | QComboBox] = {}
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        for param in PARAMS:
            editor = _editor(param)
            editor.setAccessibleName(param.label)
            self.editors[param.name] = editor
            form.addRow(param.label, editor)
        # Not a request parameter: the chat's own context_overflow policy.
        overflow = QComboBox()
        overflow.addItems([DEFAULT_TEXT, *compact.POLICIES])
        overflow.setAccessibleName("When the context fills")
        overflow.setToolTip(
            "A message too long for the context: ask, compact the earlier messages, "
            "trim the oldest out of the request, or refuse"
        )
        self.editors[compact.CHAT_KEY] = overflow
        form.addRow("When the context fills", overflow)
        self.reset_button = QPushButton("Reset to defaults")
        self.reset_button.setAutoDefault(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.addLayout(form)
        layout.addWidget(self.reset_button)

    def values(self) -> dict[str, Any]:
        """The parameters set in the panel (those at "default" left out)."""
        out: dict[str, Any] = {}
        overflow = self.editors[compact.CHAT_KEY]
        if isinstance(overflow, QComboBox) and overflow.currentIndex() > 0:
            out[compact.CHAT_KEY] = overflow.currentText()
        for param in PARAMS:
            editor = self.editors[param.name]
            if isinstance(editor, QComboBox):
                if editor.currentIndex() > 0:
                    out[param.name] = editor.currentText()
            elif editor.value() != editor.minimum():
                value = editor.value()
                out[param.name] = round(value, 2) if param.kind == "float" else int(value)
        return out

    def show_values(self, values: dict[str, Any], defaults: dict[str, Any]) -> None:
        """Show the chat's `values`, the rest at "default" with `defaults` in their tooltips."""
        overflow = self.editors[compact.CHAT_KEY]
        if isinstance(overflow, QComboBox):
            overflow.blockSignals(True)
            overflow.setCurrentIndex(max(overflow.findText(str(values.get(compact.CHAT_KEY))), 0))
            overflow.blockSignals(False)
        for param in PARAMS:
            editor = self.editors[param.name]
            editor.blockSignals(True)
            value = values.get(param.name)
            if isinstance(editor, QComboBox):
                index = editor.findText(str(value)) if value is not None else 0
                editor.setCurrentIndex(max(index, 0))
            elif isinstance(editor, QSpinBox):
                editor.setValue(int(value) if value is not None else editor.minimum())
            else:
                editor.setValue(float(value) if value is not None else editor.minimum())
            editor.blockSignals(False)
            fallback = defaults.get(param.name)
            where = (
                f"Default: {fallback} (config)" if fallback is not None else "Default: the server's"
            )
            editor.setToolTip(plain.tooltip(f"{param.tip}\n{where}"))


def _editor(param: Param) -> QSpinBox | QDoubleSpinBox | QComboBox:
    if param.kind == "choice":
        combo = QComboBox()
        combo.addItems([DEFAULT_TEXT, *param.choices])
        return combo
    # One step below the range stands for "not set": the spin box shows "default" there.
    spin: QDoubleSpinBox | QSpinBox
    if param.kind == "float":
        spin = QDoubleSpinBox()
        spin.setDecimals(2)
        spin.setSingleStep(param.step)
        spin.setRange(param.low - param.step, param.high)
        spin.setValue(spin.minimum())
    else:
        spin = QSpinBox()
        spin.setRange(int(param.low) - 1, int(param.high))
        spin.setValue(spin.minimum())
    spin.setSpecialValueText(DEFAULT_TEXT)
    spin.setKeyboardTracking(False)
    return spin


class ChatParams(QObject):
    """The Parameters button and panel of one chat window, bound to its Conversation."""

    def __init__(self, chat: Conversation, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._chat = chat
        self.panel = ParamsPanel()
        self.button = QToolButton()
        self.button.setAccessibleName("Parameters")
        self.button.setToolTip(
            "Temperature, top P/K, min P, repeat penalty, max tokens, seed, reasoning: "
            "for this chat, from the next message on (the model is not reloaded)"
        )
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        # Upward: the button sits at the bottom of the window, the panel is tall.
        menu = UpwardMenu(self.button)
        holder = QWidgetAction(menu)
        holder.setDefaultWidget(self.panel)
        menu.addAction(holder)
        self.button.setMenu(menu)
        for editor in self.panel.editors.values():
            if isinstance(editor, QComboBox):
                editor.currentIndexChanged.connect(self._on_edited)
            else:
                editor.valueChanged.connect(self._on_edited)
        self.panel.reset_button.clicked.connect(self._on_reset)
        chat.session_changed.connect(self.refresh)
        # Bound slots, not lambdas: they go when this object goes, the App's signal stays.
        chat.app.config_changed.connect(self.refresh)
        self.refresh()

    @Slot()
    def refresh(self, *_news: object) -> None:
        """Show the chat's overrides and the defaults for its model now."""
        self.panel.show_values(self._chat.params(), self._chat.default_params())
        self._show_count()

    def _show_count(self) -> None:
        count = len(self._chat.params())
        # A glyph, not a word: it sits in the status bar beside the meter.
        self.button.setText(f"⚙ {count}" if count else "⚙")

    @Slot()
    def _on_edited(self) -> None:
        self._chat.set_params(self.panel.values())
        self._show_count()

    @Slot()
    def _on_reset(self) -> None:
        self._chat.set_params({})
        self.refresh()
