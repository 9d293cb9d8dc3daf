"""Rows of chips: the loaded skills above the composer, the attachments in it, and the
skills a message only mentioned (`SkillSuggestions`, "Load pdf? ~2,512 tokens").

A chip only asks for its removal (a signal); the owner decides. A skill chip can show
its skill as missing (deleted from disk): it stays until the user removes it. What a
skill costs in context is `skill_tokens`: the server's count when the context meter has
one, else an estimate. Raises nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from llamachat import skills
from llamachat.tokens import estimate_tokens
from llamachat.ui import plain

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
        self._items: list[tuple[str, str]] = []
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
        if items == self._items:
            # Kept, not rebuilt: a chip under the pointer must not vanish when only its
            # tooltip changes (a count that came in).
            for key, text in items:
                self._buttons[key].setAccessibleName(self._accessible_template.format(name=text))
                self._buttons[key].setToolTip(
                    plain.tooltip(self._tooltip_template.format(name=text))
                )
            return
        self._items = list(items)
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

    def set_skills(
        self,
        names: list[str],
        missing: frozenset[str] = frozenset(),
        costs: dict[str, int] | None = None,
    ) -> None:
        """Show a chip per loaded skill, in load order; `missing` ones struck through.

        `costs` are the tokens each takes (`skill_tokens`), said in its tooltip.
        """
        self.set_items([(name, f"{name} (missing)" if name in missing else name) for name in names])
        for name, tokens in (costs or {}).items():
            if name in self._buttons and name not in missing:
                self._buttons[name].setToolTip(
                    plain.tooltip(f"Loaded skill: ~{tokens:,} tokens of context. Click to unload.")
                )
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


def skill_tokens(skill: skills.Skill, count: Callable[[str], int] = estimate_tokens) -> int:
    """The context a skill takes: `count` of its text in the system message.

    The chat passes its context meter's `quick_tokens` (the server's count once it has
    counted that text, else an estimate calibrated on what it counted); the default is a
    plain estimate.
    """
    return count(skills.system_part(skill))


class SkillSuggestions(QWidget):
    """The skills the last message mentioned by a word, as one-click "Load pdf?" chips.

    Clicking a chip asks for the skill (`load_requested`); "Not now" hides the row.
    Hidden when empty.
    """

    load_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Suggested skills")
        self._buttons: dict[str, QPushButton] = {}
        self._skills: list[skills.Skill] = []
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        caption = plain.Label("Mentioned:")
        caption.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        self._layout.addWidget(caption)
        self._dismiss = QPushButton("Not now", self)
        self._dismiss.setFlat(True)
        self._dismiss.setAccessibleName("Dismiss skill suggestions")
        self._dismiss.clicked.connect(lambda: self.set_skills([]))
        self._layout.addWidget(self._dismiss)
        self._layout.addStretch(1)
        self.setVisible(False)

    def set_skills(
        self, found: list[skills.Skill], count: Callable[[str], int] = estimate_tokens
    ) -> None:
        """Offer these skills, each with its cost (`skill_tokens` by `count`); [] hides the row."""
        for button in self._buttons.values():
            self._layout.removeWidget(button)
            button.deleteLater()
        self._buttons.clear()
        self._skills = list(found)
        for offset, skill in enumerate(found):
            text = f"Load {skill.name}? ~{skill_tokens(skill, count):,} tokens"
            button = QPushButton(text, self)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setAutoDefault(False)
            button.setAccessibleName(f"Load skill {skill.name}")
            button.setToolTip(
                plain.tooltip(
                    f"Your message mentions {skill.name}, so it was sent without it. Click to "
                    f"load it into this chat ({skill.description})."
                )
            )
            button.clicked.connect(lambda _checked=False, n=skill.name: self._on_clicked(n))
            self._layout.insertWidget(1 + offset, button)
            self._buttons[skill.name] = button
        self.setVisible(bool(found))

    def names(self) -> list[str]:
        """The skills offered, in order."""
        return list(self._buttons)

    def button(self, name: str) -> QPushButton:
        """The chip offering `name` (KeyError when it is not offered)."""
        return self._buttons[name]

    def _on_clicked(self, name: str) -> None:
        self.set_skills([skill for skill in self._skills if skill.name != name])
        self.load_requested.emit(name)
