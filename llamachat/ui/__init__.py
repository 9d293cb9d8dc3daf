"""The PySide6 layer of llamachat: the chat window and its parts.

`ChatWindow` is imported on first use, so importing a leaf module such as
`llamachat.ui.views.markdown` does not pull in the whole window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llamachat.ui.window import ChatWindow

__all__ = ["ChatWindow"]


def __getattr__(name: str) -> Any:
    """Load `ChatWindow` lazily from `llamachat.ui.window`."""
    if name == "ChatWindow":
        from llamachat.ui.window import ChatWindow

        return ChatWindow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
