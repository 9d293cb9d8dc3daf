"""The "⋯" button in a message's footer and its menu ("New chat from here", "Remember this").

Built when first offered (most messages never show it). Each entry only asks: the
message view's entries emit its `fork_requested(id)` or `remember_requested(id, text)`,
and the window decides. Raises nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtWidgets import QHBoxLayout, QMenu, QToolButton

from llamachat.ui.views.popup import menu_below

FORK = "New chat from here"
REMEMBER = "Remember this"


class MoreActions:
    """The "⋯" button and its menu, for one message view."""

    def __init__(
        self,
        footer: QHBoxLayout,
        button: Callable[[str, str, Callable[[], None]], QToolButton],
        entries: Sequence[tuple[str, Callable[[], None]]],
    ) -> None:
        self._entries = entries
        self._footer = footer
        self._make_button = button
        self._button: QToolButton | None = None
        self._menu: QMenu | None = None

    def set_allowed(self, allowed: bool) -> None:
        """Offer the menu, or hide it."""
        if allowed and self._button is None:
            self._button = self._make_button("⋯", "More actions", self._show)
            self._menu = QMenu(self._button)
            for text, run in self._entries:
                # A lambda: `triggered` passes `checked`, which the entries do not take.
                self._menu.addAction(text).triggered.connect(lambda _=False, run=run: run())
            self._footer.addWidget(self._button)
        if self._button is not None:
            self._button.setVisible(allowed)

    def texts(self) -> list[str]:
        """The menu's entries ([] when it is not offered)."""
        if self._button is None or self._menu is None or self._button.isHidden():
            return []
        return [action.text() for action in self._menu.actions()]

    def trigger(self, text: str) -> None:
        """Run the entry reading `text`."""
        for action in self._menu.actions() if self._menu is not None else ():
            if action.text() == text:
                action.trigger()

    def _show(self) -> None:
        # A menu of the button's own would draw an arrow beside the "⋯".
        if self._button is not None and self._menu is not None:
            menu_below(self._menu, self._button)
