"""The chat window's top bar: the model and prompt pickers, Web search, Skills, Settings.

`TopBar` lays out the pickers and the Web search button (`search_toggle`) the window
made, and owns the two commands beside them, each an action (also in the window's
menus) and a tool button: Skills, enabled only while skills are on, and Settings.
In a narrow window the bar keeps the model's name whole: the Prompt picker wraps to
a second row, and the three command buttons fold into a "»" menu of the same
actions when their row has no room for them. It only shows and emits; the window
acts. Raises nothing.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.views.presets import PresetPicker

log = logging.getLogger(__name__)

_MARGIN = 10
_SPACING = 8


class TopBar(QFrame):
    """The model, the prompt preset, Web search, and the Skills and Settings commands."""

    skills_requested = Signal()
    settings_requested = Signal()

    def __init__(
        self,
        model_picker: ModelPicker,
        preset_picker: PresetPicker,
        search_button: QToolButton,
        *,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("topBar")
        self.setAccessibleName("Chat settings")
        self._model_picker = model_picker
        self._preset_picker = preset_picker
        self._search_button = search_button
        self._model_label = QLabel("&Model")
        self._model_label.setBuddy(model_picker.combo)
        self._preset_label = QLabel("&Prompt")
        self._preset_label.setBuddy(preset_picker.combo)

        self.skills_action = QAction("Skills…", self)
        self.skills_action.setToolTip(
            "The skills: describe, load, unload, import (or type /skills)"
        )
        self.skills_action.triggered.connect(self.skills_requested)
        self.skills_button = QToolButton()
        self.skills_button.setText("Skills")
        self.skills_button.setAccessibleName("Skills")
        self.skills_button.setToolTip(self.skills_action.toolTip())
        self.skills_button.clicked.connect(self.skills_requested)

        self.settings_action = QAction("Settings…", self)
        self.settings_action.setToolTip("Router, search, skills folders, default model, theme")
        self.settings_action.triggered.connect(self.settings_requested)
        self.settings_button = QToolButton()
        self.settings_button.setText("Settings")
        self.settings_button.setAccessibleName("Settings")
        self.settings_button.setToolTip(self.settings_action.toolTip())
        self.settings_button.clicked.connect(self.settings_requested)

        # The folded commands: the same actions, so checks and enabled states follow.
        self.more_button = QToolButton()
        # Not "⋯": that is the Prompt picker's menu, right beside it.
        self.more_button.setText("»")
        self.more_button.setAccessibleName("More commands")
        self.more_button.setToolTip("Web search, Skills, Settings")
        self.more_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        more = QMenu(self.more_button)
        search_action = search_button.defaultAction()
        if search_action is not None:
            more.addAction(search_action)
        more.addAction(self.skills_action)
        more.addAction(self.settings_action)
        self.more_button.setMenu(more)
        self.more_button.hide()

        # Squeezed buttons elide their text ("Se…gs"): they keep their width, the bar folds.
        for button in (search_button, self.skills_button, self.settings_button, self.more_button):
            button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)

        self.commands = QWidget()
        commands = QHBoxLayout(self.commands)
        commands.setContentsMargins(0, 0, 0, 0)
        commands.setSpacing(_SPACING)
        commands.addWidget(search_button)
        commands.addWidget(self.skills_button)
        commands.addWidget(self.settings_button)

        model_part = QWidget()
        model_row = QHBoxLayout(model_part)
        model_row.setContentsMargins(0, 0, 0, 0)
        model_row.setSpacing(_SPACING)
        model_row.addWidget(self._model_label)
        model_row.addWidget(model_picker, 1)

        rest_part = QWidget()
        rest_row = QHBoxLayout(rest_part)
        rest_row.setContentsMargins(0, 0, 0, 0)
        rest_row.setSpacing(_SPACING)
        rest_row.addWidget(self._preset_label)
        rest_row.addWidget(preset_picker)
        rest_row.addSpacing(6)
        rest_row.addWidget(self.commands)
        rest_row.addWidget(self.more_button)
        # Takes the room left over when the row wraps, so the pickers stay at the left.
        rest_row.addStretch(1)

        self._rows = QBoxLayout(QBoxLayout.Direction.LeftToRight, self)
        self._rows.setContentsMargins(_MARGIN, 6, _MARGIN, 6)
        self._rows.setSpacing(_SPACING)
        self._rows.addWidget(model_part, 1)
        self._rows.addWidget(rest_part)

    def enable_skills(self, enabled: bool) -> None:
        """Offer the skills panel only while skills are on."""
        self.skills_button.setEnabled(enabled)
        self.skills_action.setEnabled(enabled)

    def is_wrapped(self) -> bool:
        """True when the Prompt picker is on a second row."""
        return self._rows.direction() == QBoxLayout.Direction.TopToBottom

    def is_folded(self) -> bool:
        """True when the command buttons are folded into the "»" menu."""
        return self.commands.isHidden()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Wrap and fold to the new width (the height follows, never the width)."""
        super().resizeEvent(event)
        self._fit(event.size().width())

    def _fit(self, width: int) -> None:
        room = width - 2 * _MARGIN
        # The picker at its least, but with the combo wide enough for the whole model name.
        combo = self._model_picker.combo
        model = self._model_label.sizeHint().width() + _SPACING
        model += self._model_picker.minimumSizeHint().width()
        model += max(0, combo.sizeHint().width() - combo.minimumSizeHint().width())
        prompt = self._preset_label.sizeHint().width() + _SPACING
        prompt += self._preset_picker.sizeHint().width() + 6 + _SPACING
        shown = [self.skills_button, self.settings_button]
        action = self._search_button.defaultAction()
        if action is None or action.isVisible():
            shown.insert(0, self._search_button)
        commands = sum(b.sizeHint().width() + _SPACING for b in shown) - _SPACING
        folded = self.more_button.sizeHint().width()
        one_row = model + _SPACING + prompt + folded <= room
        row = room - (model + _SPACING if one_row else 0)
        fold = prompt + commands > row
        self._rows.setDirection(
            QBoxLayout.Direction.LeftToRight if one_row else QBoxLayout.Direction.TopToBottom
        )
        self._rows.setSpacing(_SPACING if one_row else 4)
        self.commands.setVisible(not fold)
        self.more_button.setVisible(fold)
