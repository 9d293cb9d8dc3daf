"""Light and dark colours on Qt's Fusion style, following the desktop unless told otherwise.

`apply_theme(app, theme)` takes the config's `theme`: "light" and "dark" are
fixed; "system" reads the desktop's colour scheme (`QStyleHints.colorScheme`,
Qt 6.5+) and follows it when it changes while llamachat runs. Fusion draws the
same on every platform, so both palettes look as designed everywhere.

A switch applies at once to every widget: Qt hands the new palette to plain
widgets itself, but a widget with a style sheet of its own keeps the palette it
was polished with until its sheet is applied again, which `use_palette` does; the
conversation re-renders its messages' HTML on the palette change it receives.

Errors: `ValueError` for a theme name that is not one of `config.THEMES`
(config.load already refuses those, so only code can pass one).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

from llamachat.config import THEMES

log = logging.getLogger(__name__)

STYLE = "Fusion"
# How far a progress bar's groove goes from Base towards the text colour.
GROOVE_SHADE = 0.18

_DARK = {
    QPalette.ColorRole.Window: "#2b2b2e",
    QPalette.ColorRole.WindowText: "#e6e6e6",
    QPalette.ColorRole.Base: "#1f1f22",
    QPalette.ColorRole.AlternateBase: "#2b2b2e",
    QPalette.ColorRole.ToolTipBase: "#3a3a3e",
    QPalette.ColorRole.ToolTipText: "#f0f0f0",
    QPalette.ColorRole.PlaceholderText: "#8c8c90",
    QPalette.ColorRole.Text: "#e6e6e6",
    QPalette.ColorRole.Button: "#35353a",
    QPalette.ColorRole.ButtonText: "#e6e6e6",
    QPalette.ColorRole.BrightText: "#ff6b6b",
    QPalette.ColorRole.Light: "#48484e",
    QPalette.ColorRole.Midlight: "#3d3d42",
    QPalette.ColorRole.Mid: "#2f2f33",
    QPalette.ColorRole.Dark: "#1a1a1c",
    QPalette.ColorRole.Shadow: "#0d0d0e",
    QPalette.ColorRole.Highlight: "#3d7bd9",
    QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.Link: "#6fa8ff",
    QPalette.ColorRole.LinkVisited: "#b48cff",
}
_DARK_DISABLED = {
    QPalette.ColorRole.WindowText: "#7a7a7e",
    QPalette.ColorRole.Text: "#7a7a7e",
    QPalette.ColorRole.ButtonText: "#7a7a7e",
    QPalette.ColorRole.Highlight: "#4a4a50",
    QPalette.ColorRole.HighlightedText: "#9a9a9e",
}


def palette_for(scheme: str) -> QPalette:
    """The Fusion palette for "light" or "dark"."""
    if scheme == "light":
        style = QStyleFactory.create(STYLE)
        return style.standardPalette()
    palette = QPalette()
    for role, color in _DARK.items():
        palette.setColor(role, QColor(color))
    for role, color in _DARK_DISABLED.items():
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(color))
    return palette


def progress_groove(palette: QPalette) -> QColor:
    """The colour of a progress bar's empty part: visible on Base, in both themes.

    Fusion fills the groove with Base and outlines it a shade darker than Window,
    which on the dark palette is Base again: an empty bar did not show at all.
    """
    base = palette.color(QPalette.ColorRole.Base)
    text = palette.color(QPalette.ColorRole.Text)
    return QColor(
        round(base.red() + (text.red() - base.red()) * GROOVE_SHADE),
        round(base.green() + (text.green() - base.green()) * GROOVE_SHADE),
        round(base.blue() + (text.blue() - base.blue()) * GROOVE_SHADE),
    )


def system_scheme(app: QGuiApplication) -> str:
    """The desktop's colour scheme, "light" or "dark" (light when it does not say)."""
    return "dark" if app.styleHints().colorScheme() == Qt.ColorScheme.Dark else "light"


class _SystemFollower(QObject):
    """Re-applies the palette when the desktop switches between light and dark."""

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self._app = app
        self.active = False
        app.styleHints().colorSchemeChanged.connect(self._on_scheme_changed)

    @Slot(Qt.ColorScheme)
    def _on_scheme_changed(self, scheme: Qt.ColorScheme) -> None:
        if self.active:
            use_palette(self._app, palette_for(system_scheme(self._app)))


def use_palette(app: QApplication, palette: QPalette) -> None:
    """Make `palette` the app's, on every widget, styled ones included."""
    app.setPalette(palette)
    for widget in app.allWidgets():
        sheet = widget.styleSheet()
        if sheet:
            # Polished with a sheet, a widget resolved the old palette for good.
            widget.setStyleSheet(sheet)


def apply_theme(app: QApplication, theme: str) -> str:
    """Use Fusion with the light or dark palette `theme` asks for; returns the one applied."""
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, got {theme!r}")
    follower = app.findChild(_SystemFollower)
    if follower is None:
        follower = _SystemFollower(app)
    app.setStyle(STYLE)
    hints = app.styleHints()
    if theme == "system":
        hints.unsetColorScheme()
        scheme = system_scheme(app)
    else:
        # Asking Qt for the scheme too lets native parts (title bars, dialogs) match.
        hints.setColorScheme(Qt.ColorScheme.Dark if theme == "dark" else Qt.ColorScheme.Light)
        scheme = theme
    follower.active = theme == "system"
    use_palette(app, palette_for(scheme))
    log.debug("theme %s: %s palette", theme, scheme)
    return scheme
