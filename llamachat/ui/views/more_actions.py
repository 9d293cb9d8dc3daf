"""The "⋯" button in a message's footer and its menu ("New chat from here", "Read aloud"...).

Built when first offered (most messages never show it). Each entry only asks: the
message view's entries emit its `fork_requested(id)`, `remember_requested(id, text)`,
`read_aloud_requested(id, text)`... and the window decides. An entry's text and
whether it shows are read again each time the menu opens ("Read aloud" turns into
"Stop reading" while the reply is read); a `Choices` entry is a submenu of checkable
choices, one of them checked. Raises nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QMenu, QToolButton

from llamachat.config.definitions import READ_SPEEDS
from llamachat.ui.views.popup import menu_below

FORK = "New chat from here"
REMEMBER = "Remember this"
READ_ALOUD = "Read aloud"
STOP_READING = "Stop reading"
READING_SPEED = "Reading speed"


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Entry:
    """One entry: its text now, what it does, and whether it shows now."""

    text: Callable[[], str]
    run: Callable[[], None]
    shown: Callable[[], bool] = _always


@dataclass(frozen=True)
class Choices:
    """A submenu of choices: (text, checked) now, and what choosing a text does."""

    title: str
    choices: Callable[[], Sequence[tuple[str, bool]]]
    choose: Callable[[str], None]
    shown: Callable[[], bool] = _always


class MoreActions:
    """The "⋯" button and its menu, for one message view."""

    def __init__(
        self,
        footer: QHBoxLayout,
        button: Callable[[str, str, Callable[[], None]], QToolButton],
        entries: Sequence[Entry | Choices],
    ) -> None:
        self._entries = entries
        self._footer = footer
        self._make_button = button
        self._button: QToolButton | None = None
        self._menu: QMenu | None = None
        self._actions: list[tuple[Entry | Choices, QAction]] = []

    def set_allowed(self, allowed: bool) -> None:
        """Offer the menu, or hide it."""
        if allowed and self._button is None:
            self._button = self._make_button("⋯", "More actions", self._show)
            self._menu = QMenu(self._button)
            for entry in self._entries:
                if isinstance(entry, Choices):
                    submenu = QMenu(entry.title, self._menu)
                    submenu.triggered.connect(
                        lambda action, entry=entry: entry.choose(action.text())
                    )
                    action = self._menu.addMenu(submenu)
                else:
                    action = self._menu.addAction("")
                    # A lambda: `triggered` passes `checked`, which the entries do not take.
                    action.triggered.connect(lambda _=False, run=entry.run: run())
                self._actions.append((entry, action))
            self._footer.addWidget(self._button)
        if self._button is not None:
            self._button.setVisible(allowed)

    def texts(self) -> list[str]:
        """The menu's entries shown now ([] when it is not offered)."""
        if self._button is None or self._button.isHidden():
            return []
        self._refresh()
        return [action.text() for _entry, action in self._actions if action.isVisible()]

    def choices(self, title: str) -> list[tuple[str, bool]]:
        """The submenu `title`'s choices now, each with whether it is checked."""
        return next(
            (
                list(e.choices())
                for e, _a in self._actions
                if isinstance(e, Choices) and e.title == title
            ),
            [],
        )

    def trigger(self, text: str) -> None:
        """Run the entry reading `text` (or choose `text` in a submenu), as a click would."""
        self._refresh()
        for entry, action in self._actions:
            if not action.isVisible():
                continue
            if isinstance(entry, Choices):
                if any(choice == text for choice, _checked in entry.choices()):
                    entry.choose(text)
                    return
            elif action.text() == text:
                action.trigger()
                return

    def _refresh(self) -> None:
        for entry, action in self._actions:
            action.setVisible(entry.shown())
            if isinstance(entry, Entry):
                action.setText(entry.text())
                continue
            submenu = action.menu()
            if isinstance(submenu, QMenu):
                submenu.clear()
                for choice, checked in entry.choices():
                    item = submenu.addAction(choice)
                    item.setCheckable(True)
                    item.setChecked(checked)

    def _show(self) -> None:
        # A menu of the button's own would draw an arrow beside the "⋯".
        if self._button is not None and self._menu is not None:
            self._refresh()
            menu_below(self._menu, self._button)


class ReadAloudEntries:
    """A reply's "Read aloud" (or "Stop reading" while it is read) and "Reading speed"."""

    def __init__(
        self,
        *,
        read: Callable[[], None],
        stop: Callable[[], None],
        choose_speed: Callable[[float], None],
        shown: Callable[[], bool],
    ) -> None:
        self.reading = False  # this reply is being read now
        self.speed = 1.0
        self._read = read
        self._stop = stop
        self._choose_speed = choose_speed
        self._shown = shown

    def entries(self) -> list[Entry | Choices]:
        """The menu's entries for reading the reply aloud."""
        return [
            Entry(lambda: STOP_READING if self.reading else READ_ALOUD, self._toggle, self._shown),
            Choices(READING_SPEED, self._speeds, self._on_speed_chosen, self._shown),
        ]

    def _toggle(self) -> None:
        if self.reading:
            self._stop()
        else:
            self._read()

    def _speeds(self) -> list[tuple[str, bool]]:
        return [(speed_text(speed), speed == self.speed) for speed in READ_SPEEDS]

    def _on_speed_chosen(self, text: str) -> None:
        for speed in READ_SPEEDS:
            if speed_text(speed) == text:
                self._choose_speed(speed)


def speed_text(speed: float) -> str:
    """A reading speed as the menu shows it ("1×", "1.25×")."""
    return f"{speed:g}×"
