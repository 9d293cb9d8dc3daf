"""Rows of removable chips: the loaded skills above the composer, and the attachments in it.

A chip only asks for its removal (a signal); the owner decides. A skill chip can show
its skill as missing (deleted from disk): it stays until the user removes it. Raises nothing.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from . import plain

log = logging.getLogger(__name__)


class ChipRow(QWidget):
    """A row of flat buttons, one per item; clicking one asks for its removal. Hidden when empty."""

    remove_requested = Signal(str)

    def __init__(
        self,
        *,
        label: str = "",
        accessible_template: str = "Remove {name}",
        tooltip_template: str = "Click to remove {name}",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._accessible_template = accessible_template
        self._tooltip_template = tooltip_template
        self._buttons: dict[str, QPushButton] = {}
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        if label:
            caption = plain.Label(label)
            caption.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
            self._layout.addWidget(caption)
        self._layout.addStretch(1)
        self.setVisible(False)

    def set_items(self, items: list[tuple[str, str]]) -> None:
        """Show one chip per `(key, label)`, in order, replacing the previous chips."""
        for button in self._buttons.values():
            self._layout.removeWidget(button)
            button.deleteLater()
        self._buttons.clear()
        stretch_at = self._layout.count() - 1
        for offset, (key, text) in enumerate(items):
            button = QPushButton(f"{text}  ✕", self)
            button.setFlat(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setAccessibleName(self._accessible_template.format(name=text))
            button.setToolTip(plain.tooltip(self._tooltip_template.format(name=text)))
            button.clicked.connect(lambda _checked=False, k=key: self.remove_requested.emit(k))
            self._layout.insertWidget(stretch_at + offset, button)
            self._buttons[key] = button
        self.setVisible(bool(items))

    def keys(self) -> list[str]:
        """The keys of the chips shown, in order."""
        return list(self._buttons)


class SkillChips(ChipRow):
    """The loaded skills of the session; clicking a chip unloads that skill."""

    unload_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(
            label="Skills:",
            accessible_template="Unload skill {name}",
            tooltip_template="Loaded skill. Click to unload {name}.",
            parent=parent,
        )
        self.setAccessibleName("Loaded skills")
        self._missing: frozenset[str] = frozenset()
        self.remove_requested.connect(self.unload_requested)

    def set_skills(self, names: list[str], missing: frozenset[str] = frozenset()) -> None:
        """Show a chip per loaded skill, in load order; `missing` ones struck through."""
        self.set_items([(name, f"{name} (missing)" if name in missing else name) for name in names])
        for name in missing & set(names):
            button = self._buttons[name]
            font = button.font()
            font.setStrikeOut(True)
            button.setFont(font)
            button.setAccessibleName(f"Remove missing skill {name}")
            button.setToolTip(
                plain.tooltip(
                    f"The skill {name} is no longer in the skills folders, so the model "
                    "does not get it. Click to remove it from this chat."
                )
            )
        self._missing = missing & set(names)

    def missing(self) -> list[str]:
        """The skill names shown as missing, in load order."""
        return [name for name in self.keys() if name in self._missing]

    def skills(self) -> list[str]:
        """The skill names shown."""
        return self.keys()
