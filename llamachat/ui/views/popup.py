"""Where the chat's popups open: above the widget they belong to, kept in its window.

The `/` skill list, the ⚙ parameters and the Attach menu belong to the composer and the
status bar at the bottom of the window: opened downward they spilled past the window's
edge, and one opened from a button near the right edge stuck out past it.
`above(anchor, size, screen, window=)` is the position of a popup opened upward from its
anchor (below it only when there is more room there), kept left of the window's right
edge and within the screen's available geometry; `place_above` moves a shown popup there,
`UpwardMenu` is a QMenu that opens that way from the widget it belongs to, and
`menu_below` opens a menu under its button, kept inside the window. Raises nothing.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QMenu, QWidget


def above(anchor: QRect, size: QSize, screen: QRect, *, window: QRect | None = None) -> QPoint:
    """The top-left of a popup of `size` opened upward from `anchor`, inside `screen` and,
    across, inside `window` (the anchor's window) when it is wide enough.

    All in global coordinates; a popup bigger than the screen starts at its top left.
    """
    y = anchor.top() - size.height()
    room_above = anchor.top() - screen.top()
    room_below = screen.bottom() - anchor.bottom()
    if y < screen.top() and room_below > room_above:
        y = anchor.bottom() + 1
    y = min(y, screen.bottom() + 1 - size.height())
    return QPoint(_across(anchor.left(), size, screen, window), max(y, screen.top()))


def _across(x: int, size: QSize, screen: QRect, window: QRect | None) -> int:
    """`x` moved left as far as a popup of `size` needs to end inside `window` and `screen`."""
    right = screen.right()
    if window is not None:
        right = min(right, window.right())
    return max(min(x, right + 1 - size.width()), screen.left())


def global_rect(widget: QWidget) -> QRect:
    """The widget's rectangle on the screen."""
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def place_above(popup: QWidget, anchor: QWidget) -> None:
    """Move `popup` above `anchor`, on the anchor's screen, inside its window."""
    popup.move(
        above(
            global_rect(anchor),
            popup.size(),
            anchor.screen().availableGeometry(),
            window=global_rect(anchor.window()),
        )
    )


def menu_below(menu: QMenu, anchor: QWidget) -> None:
    """Open `menu` under `anchor` (its button), moved left to end inside the window."""
    at = anchor.mapToGlobal(anchor.rect().bottomLeft())
    screen = anchor.screen().availableGeometry()
    x = _across(at.x(), menu.sizeHint(), screen, global_rect(anchor.window()))
    menu.popup(QPoint(x, at.y()))


class UpwardMenu(QMenu):
    """A menu that opens above `anchor` (its button), within the screen."""

    def __init__(self, anchor: QWidget) -> None:
        super().__init__(anchor)
        self._anchor = anchor

    def showEvent(self, event: QShowEvent) -> None:
        """Move up from where the button put the menu (below itself), before it is seen."""
        super().showEvent(event)
        place_above(self, self._anchor)
