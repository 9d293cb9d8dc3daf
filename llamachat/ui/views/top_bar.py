"""The chat window's top bar: the model and prompt pickers, Web search, Skills, Settings.

`TopBar` lays out the pickers and the Web search button (`search_toggle`) the window
made, and owns the two commands beside them, each an action (also in the window's
menus) and a tool button: Skills, enabled only while skills are on, and Settings.
It only shows and emits; the window acts. Raises nothing.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.views.presets import PresetPicker

log = logging.getLogger(__name__)


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
        model_label = QLabel("&Model")
        model_label.setBuddy(model_picker.combo)
        preset_label = QLabel("&Prompt")
        preset_label.setBuddy(preset_picker.combo)

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

        top = QHBoxLayout(self)
        top.setContentsMargins(10, 6, 10, 6)
        top.setSpacing(8)
        top.addWidget(model_label)
        top.addWidget(model_picker, 1)
        top.addWidget(preset_label)
        top.addWidget(preset_picker)
        top.addSpacing(6)
        top.addWidget(search_button)
        top.addWidget(self.skills_button)
        top.addWidget(self.settings_button)

    def enable_skills(self, enabled: bool) -> None:
        """Offer the skills panel only while skills are on."""
        self.skills_button.setEnabled(enabled)
        self.skills_action.setEnabled(enabled)
