"""The quick ask shortcut, desktop-wide: the portal where there is one, else X11, else a note.

`QuickAskShortcut.apply(keys)` asks the desktop's GlobalShortcuts portal for `keys`
(`quick_ask_shortcut`), falls back to a key grab on X11, and otherwise says how to bind
`llamachat ask` in the desktop's own keyboard settings. `activated` fires on each press;
`changed(str)` says, for Settings, how it stands: bound (to which trigger), in conflict
(with a key of the chat window, or one another program holds or the desktop gave away),
or not possible here. `release()` lets the key go.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QGuiApplication, QKeySequence

from llamachat.ui.desktop.portal import NO_PORTAL, PortalShortcut
from llamachat.ui.desktop.x11 import GrabError, X11Grab
from llamachat.ui.shortcuts import SHORTCUTS

log = logging.getLogger(__name__)

NOTE = (
    "Or bind the command `llamachat ask` to a key in your desktop's keyboard settings "
    "(GNOME: Settings > Keyboard > Custom Shortcuts; KDE: System Settings > Shortcuts)."
)


def clash(keys: str) -> str:
    """The chat window's action that `keys` would take away ('' for none)."""
    wanted = QKeySequence(keys)
    for shortcut in SHORTCUTS:
        if any(sequence == wanted for sequence in shortcut.sequences()):
            return shortcut.description
    return ""


class QuickAskShortcut(QObject):
    """The desktop-wide quick ask key; see the module's docstring."""

    activated = Signal()
    changed = Signal(str)

    def __init__(self, *, bus: str = "SESSION", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._bus = bus
        self._keys: str | None = None
        self._portal: PortalShortcut | None = None
        self._grab: X11Grab | None = None
        self.status = ""

    def apply(self, keys: str) -> None:
        """Bind `keys` ('' for none), letting go of the previous key; nothing if unchanged."""
        if keys == self._keys:
            return
        self.release()
        self._keys = keys
        if not keys:
            self._say("No quick ask shortcut (quick_ask_shortcut is empty). " + NOTE)
            return
        taken = clash(keys)
        if taken:
            self._say(f"{keys} is the chat window's key for “{taken}”: choose another.")
            return
        self._say(f"Asking the desktop for {keys}…")
        self._portal = PortalShortcut(keys, bus=self._bus)
        # Not this object's child (its thread may outlive it): stopped when this one goes.
        self.destroyed.connect(self._portal.stop)
        self._portal.bound.connect(self._on_bound)
        self._portal.failed.connect(self._on_failed)
        self._portal.activated.connect(self.activated)
        self._portal.start()

    def release(self) -> None:
        """Let go of the key (the portal's listener, or the X11 grab)."""
        self._keys = None
        if self._portal is not None:
            self._portal.stop()  # which deletes it once its thread has ended
            self._portal = None
        if self._grab is not None:
            self._grab.close()
            self._grab.deleteLater()
            self._grab = None

    def _say(self, text: str) -> None:
        self.status = text
        log.info("quick ask shortcut: %s", text)
        self.changed.emit(text)

    @Slot(str)
    def _on_bound(self, trigger: str) -> None:
        if self.sender() is not self._portal:
            return  # a portal let go of since
        if trigger:
            self._say(f"Quick ask: {trigger} (the desktop's global shortcuts; change it there).")
        else:
            self._say(
                f"The desktop did not bind {self._keys} (another shortcut has it, or it was "
                "declined): give “Quick ask (llamachat)” a key in the desktop's shortcut settings."
            )

    @Slot(str)
    def _on_failed(self, why: str) -> None:
        if self.sender() is not self._portal or self._keys is None:
            return
        keys = self._keys
        if why != NO_PORTAL:
            self._say(f"The desktop's shortcut portal: {why}. " + NOTE)
        elif QGuiApplication.platformName() != "xcb":
            self._say("This desktop offers no global shortcuts to programs. " + NOTE)
        else:
            try:
                self._grab = X11Grab(keys, parent=self)
            except GrabError as exc:
                self._say(f"{exc}. " + NOTE)
                return
            self._grab.activated.connect(self.activated)
            self._say(f"Quick ask: {keys} (an X11 key grab).")
