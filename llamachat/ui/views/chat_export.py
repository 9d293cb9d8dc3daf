"""A chat written to a file, as Markdown or JSON: `export_chat`, and `ask_and_export` (the
chat menu's Export…, which asks where first).

Errors: `export_chat` raises `store.HistoryError` for a file that cannot be written (it
names the file) and ValueError for a format it does not know; `ask_and_export` returns
the HistoryError's message for the sidebar to show.
"""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from llamachat.history.export import write_file
from llamachat.history.store import History, HistoryError

FORMATS = {"markdown": ".md", "json": ".json"}


def export_chat(history: History, session_id: int, path: Path, fmt: str) -> None:
    """Write a session to `path` as "markdown" or "json"."""
    if fmt == "markdown":
        text = history.export_markdown(session_id)
    elif fmt == "json":
        text = json.dumps(history.export_json(session_id), ensure_ascii=False, indent=2)
    else:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    write_file(Path(path), text)


def ask_and_export(parent: QWidget, history: History, session_id: int, fmt: str) -> str:
    """Ask where to write a chat, named after its title, and write it; what to tell the user
    ('' when the dialog was cancelled)."""
    session = history.get_session(session_id)
    title = session["title"] if session else ""
    stem = "".join(c if c.isalnum() or c in " -_" else "_" for c in title)
    suggested = str(Path.home() / ((stem.strip() or "chat") + FORMATS[fmt]))
    kind = "Markdown (*.md)" if fmt == "markdown" else "JSON (*.json)"
    path, _ = QFileDialog.getSaveFileName(parent, "Export chat", suggested, kind)
    if not path:
        return ""
    try:
        export_chat(history, session_id, Path(path), fmt)
    except HistoryError as exc:
        return str(exc)
    return f"Exported to {path}."
