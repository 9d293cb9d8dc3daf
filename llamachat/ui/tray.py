"""The tray icon: Quick ask, Open, Quit, where the desktop has a system tray.

The menu and its actions exist whatever the desktop; the icon itself only where
`QSystemTrayIcon.isSystemTrayAvailable()`, so the rest of the app never depends on
a tray being there. Raises nothing.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal, SignalInstance, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from llamachat.ui.desktop.icon import app_icon

log = logging.getLogger(__name__)


class Tray(QObject):
    """The tray icon and its menu; the owner connects the three request signals."""

    quick_requested = Signal()
    open_requested = Signal()
    quit_requested = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.menu = QMenu()
        self.menu.setAccessibleName("llamachat")
        self.quick_action = self._action("Quick ask", self.quick_requested)
        self.open_action = self._action("Open", self.open_requested)
        self.menu.addSeparator()
        self.quit_action = self._action("Quit", self.quit_requested)
        self.icon: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.icon = QSystemTrayIcon(app_icon(), self)
            self.icon.setToolTip("llamachat")
            self.icon.setContextMenu(self.menu)
            self.icon.activated.connect(self._on_activated)
            self.icon.show()
        else:
            log.info("no system tray: running without a tray icon")

    def _action(self, text: str, signal: SignalInstance) -> QAction:
        action = QAction(text, self.menu)
        action.triggered.connect(lambda _checked=False: signal.emit())
        self.menu.addAction(action)
        return action

    def available(self) -> bool:
        """Whether the icon is in a system tray."""
        return self.icon is not None

    def actions(self) -> list[QAction]:
        """The menu's actions, in order (separators left out)."""
        return [action for action in self.menu.actions() if not action.isSeparator()]

    def hide(self) -> None:
        """Take the icon out of the tray (on quit)."""
        if self.icon is not None:
            self.icon.hide()

    @Slot(QSystemTrayIcon.ActivationReason)
    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        # A plain click opens the chat; the menu (right click) offers the rest.
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.open_requested.emit()
