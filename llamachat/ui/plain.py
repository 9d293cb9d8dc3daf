"""Outside text on screen, shown as text: the one way llamachat puts it into Qt.

Qt guesses rich text (`Qt.mightBeRichText`) for labels, tooltips and message boxes
unless told otherwise, and rich text loads images: a router error reading
`<img src="/dev/zero">` made Qt read /dev/zero until the process aborted. Text that
llamachat does not control (server and provider errors, a reply's saved error,
skill names and descriptions, chat titles, file names, model ids, paths) reaches a
widget only through these helpers:

- `Label` is a QLabel that shows plain text; every label that may show outside
  text is one (the few QLabels left hold fixed text of ours, or escaped markup).
- `set_text(label, text)` makes any QLabel plain before setting outside text.
- `tooltip(text)` is text for the places that always guess (widget and item
  tooltips): text Qt would take for rich text is escaped and wrapped in markup of
  ours, so every character shows literally; other text is left as it is.
- `markup(text)` escapes text that sits inside markup of ours.
- `message_box(...)` is a QMessageBox with plain text.

Window titles, buttons, menus, combo box and item view texts are drawn as plain
text by Qt already; the status bar draws plain text too.

Errors: none of its own.
"""

from __future__ import annotations

import html
import logging

from PySide6.QtGui import Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

log = logging.getLogger(__name__)


class Label(QLabel):
    """A QLabel that shows its text as plain text, whatever it contains."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)


def set_text(label: QLabel, text: str) -> None:
    """Show outside `text` in `label` as plain text (any QLabel, ours or not)."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)


def markup(text: str) -> str:
    """`text` escaped to sit inside HTML of ours (quotes too, for attributes)."""
    return html.escape(text, quote=True)


def tooltip(text: str) -> str:
    """A tooltip showing outside `text` literally: Qt guesses rich text for every tooltip.

    The guess is Qt's own `mightBeRichText`: text it takes for plain is left alone
    (plain tooltips keep their look); the rest is escaped inside a paragraph of ours,
    keeping its line breaks and runs of spaces.
    """
    if not Qt.mightBeRichText(text):
        return text
    return f'<p style="white-space:pre-wrap">{html.escape(text, quote=False)}</p>'


def message_box(
    parent: QWidget | None,
    icon: QMessageBox.Icon,
    title: str,
    text: str,
    buttons: QMessageBox.StandardButton = QMessageBox.StandardButton.Ok,
) -> QMessageBox:
    """A message box showing outside `text` as plain text; the caller shows or execs it."""
    box = QMessageBox(icon, title, "", buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(text)
    return box
