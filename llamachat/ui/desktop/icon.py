"""llamachat's icon: one SVG in the package, drawn by Qt at every size asked for.

`app_icon()` is the window's, the tray's and About's icon; `png(size)` is a rendered
PNG file's bytes (the desktop entry installs a few sizes beside the SVG, for menus
that do not draw SVG).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QIcon, QImage, QImageWriter, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

SVG = Path(__file__).resolve().parents[2] / "icons" / "llamachat.svg"
"""The icon's source, shipped as package data."""

PNG_SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
"""The sizes installed as PNG files (the hicolor theme's usual ones)."""


def image(size: int) -> QImage:
    """The icon drawn at `size` x `size` pixels, on a transparent ground."""
    picture = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    picture.fill(Qt.GlobalColor.transparent)
    painter = QPainter(picture)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    QSvgRenderer(str(SVG)).render(painter)
    painter.end()
    return picture


def png(size: int) -> bytes:
    """The icon at `size` pixels as a PNG file's bytes."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    QImageWriter(buffer, b"png").write(image(size))
    buffer.close()
    return bytes(data.data())


def app_icon() -> QIcon:
    """llamachat's icon at the sizes a window, a tray and a dialog use (needs a QGuiApplication)."""
    icon = QIcon()
    for size in (16, 22, 32, 48, 64, 128, 256):
        icon.addPixmap(QPixmap.fromImage(image(size)))
    return icon
