"""Where the chat's popups open: above the widget they belong to, kept on the screen.

The `/` skill list and the ⚙ parameters belong to the composer and the status bar at
the bottom of the window: opened downward they spilled past the window's edge.
`above(anchor, size, screen)` is the position of a popup opened upward from its anchor
(below it only when there is more room there), clamped to the screen's available
geometry; `place_above` moves a shown popup there, and `UpwardMenu` is a QMenu that
opens that way from the widget it belongs to. Raises nothing.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QMenu, QWidget


def above(anchor: QRect, size: QSize, screen: QRect) -> QPoint:
    """The top-left of a popup of `size` opened upward from `anchor`, inside `screen`.

    All three in global coordinates; a popup bigger than the screen starts at its top left.
    """
    y = anchor.top() - size.height()
    room_above = anchor.top() - screen.top()
    room_below = screen.bottom() - anchor.bottom()
    if y < screen.top() and room_below > room_above:
        y = anchor.bottom() + 1
    x = min(anchor.left(), screen.right() + 1 - size.width())
    y = min(y, screen.bottom() + 1 - size.height())
    return QPoint(max(x, screen.left()), max(y, screen.top()))


def global_rect(widget: QWidget) -> QRect:
    """The widget's rectangle on the screen."""
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def place_above(popup: QWidget, anchor: QWidget) -> None:
    """Move `popup` above `anchor`, on the anchor's screen."""
    popup.move(above(global_rect(anchor), popup.size(), anchor.screen().availableGeometry()))


class UpwardMenu(QMenu):
    """A menu that opens above `anchor` (its button), within the screen."""

    def __init__(self, anchor: QWidget) -> None:
        super().__init__(anchor)
        self._anchor = anchor

    def showEvent(self, event: QShowEvent) -> None:
        """Move up from where the button put the menu (below itself), before it is seen."""
        super().showEvent(event)
        place_above(self, self._anchor)
