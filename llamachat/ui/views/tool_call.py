"""One MCP tool call shown in a reply: a collapsed line that expands to its arguments and result.

`ToolCallView(call)` takes a call as History stores it (`reply.stored_call`): the
line says the tool and how it ended ("Ran time_get_current_time", "Denied …",
"Timed out …"); expanded, it shows the arguments, the result the model read and
any image the tool returned. All of it is outside text, shown as plain text.
"""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette, QPixmap
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget

from llamachat.tools import mcp
from llamachat.ui import plain

# Shown of a result in the view; the model read at most mcp_tools.RESULT_CAP of it.
SHOWN_CHARS = 4000
IMAGE_SIDE = 320

_VERBS = {"ok": "Ran", "error": "Failed:", "denied": "Denied:", "timeout": "Timed out:"}


class ToolCallView(QWidget):
    """A tool call, collapsed to one line until clicked."""

    def __init__(self, call: dict, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        function = call.get("function") or {}
        self.name = str(function.get("name", ""))
        self.status = str(call.get("status", ""))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.button = QToolButton(self)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setArrowType(Qt.ArrowType.RightArrow)
        self.button.setAutoRaise(True)
        self.button.setCheckable(True)
        self.button.setText(f"{_VERBS.get(self.status, 'Ran')} {self.name}")
        self.button.setAccessibleName("Tool call")
        self.button.toggled.connect(self.set_expanded)
        layout.addWidget(self.button)
        self.body = plain.Label(_details(call), self)
        self.body.setAccessibleName("Tool call details")
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.body.hide()
        layout.addWidget(self.body)
        self.images: list[QLabel] = []
        for image in call.get("images") or []:
            pixmap = QPixmap()
            if pixmap.loadFromData(mcp.decode_image(image)):
                label = QLabel(self)
                label.setAccessibleName("Tool image")
                label.setPixmap(
                    pixmap.scaled(
                        min(IMAGE_SIDE, max(1, pixmap.width())),
                        min(IMAGE_SIDE, max(1, pixmap.height())),
                        Qt.AspectRatioMode.KeepAspectRatio,
                    )
                )
                label.hide()
                layout.addWidget(label)
                self.images.append(label)

    def set_expanded(self, expanded: bool) -> None:
        """Show or hide the arguments and result."""
        self.button.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.body.setVisible(expanded)
        for label in self.images:
            label.setVisible(expanded)

    def details(self) -> str:
        """The text shown when expanded."""
        return self.body.text()


def _details(call: dict) -> str:
    arguments = str((call.get("function") or {}).get("arguments", ""))
    try:
        arguments = json.dumps(json.loads(arguments or "{}"), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    result = str(call.get("result", ""))
    if len(result) > SHOWN_CHARS:
        result = result[:SHOWN_CHARS] + f"\n… ({len(result):,} characters in all)"
    server = call.get("server") or ""
    head = f"MCP server: {server}\n" if server else ""
    return f"{head}Arguments:\n{arguments}\n\nResult:\n{result}"
