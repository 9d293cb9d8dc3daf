"""Quitting with replies History could not save: try once more, then ask.

`confirm_quit(parent, chats)` stops the replies still streaming, tries once more to
save every reply History could not take (a full disk), and when one is still not
saved says so and offers Save as… (the chats with those replies, as Markdown or as
a JSON export that File > Import reads back), Quit anyway, or Cancel.

Errors: none raised; a file that cannot be written is said in the dialog, which asks again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from llamachat.history.export import export_markdown, export_path_json, write_file
from llamachat.history.store import HistoryError, MessageRow, SessionRow
from llamachat.ui import plain
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat.reply import ReplyStream

MARKDOWN = "Markdown (*.md)"
JSON = "llamachat JSON (*.json)"


def confirm_quit(parent: QWidget | None, chats: Sequence[Conversation]) -> bool:
    """Save what can be saved before quitting; True when nothing is lost or the user chose so."""
    unsaved: list[tuple[Conversation, ReplyStream]] = []
    for chat in chats:
        chat.stop()
        unsaved += [(chat, reply) for reply in chat.outbox.unsaved()]
    problem = ""
    while unsaved:
        count = "A reply" if len(unsaved) == 1 else f"{len(unsaved)} replies"
        box = plain.message_box(
            parent,
            QMessageBox.Icon.Warning,
            "Quit llamachat",
            f"{count} could not be saved to the history (is the disk full?), even now. "
            "Quitting loses it unless you save it as a file.\n\n" + problem,
            QMessageBox.StandardButton.Cancel,
        )
        save = box.addButton("Save as…", QMessageBox.ButtonRole.AcceptRole)
        quit_anyway = box.addButton("Quit anyway", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(save)
        box.exec()
        if box.clickedButton() is quit_anyway:
            return True
        if box.clickedButton() is not save:
            return False
        try:
            if _save_as(parent, unsaved):
                return True
            problem = ""
        except (OSError, HistoryError) as exc:
            problem = f"Not saved: {exc}"
    return True


def _save_as(parent: QWidget | None, unsaved: list[tuple[Conversation, ReplyStream]]) -> bool:
    """Ask where, and write the chats of the unsaved replies there; False when cancelled."""
    dialog = QFileDialog(parent, "Save the unsaved reply", str(Path.home() / "unsaved-chat.md"))
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog)
    dialog.setNameFilters([MARKDOWN, JSON])
    dialog.setAccessibleName("Save the unsaved reply")
    if not dialog.exec() or not dialog.selectedFiles():
        return False
    path = Path(dialog.selectedFiles()[0])
    as_json = dialog.selectedNameFilter() == JSON or path.suffix.lower() == ".json"
    chats = [_with_reply(chat, reply) for chat, reply in unsaved]
    if as_json:
        exports = [export_path_json(session, messages) for session, messages in chats]
        text = json.dumps(
            exports[0] if len(exports) == 1 else exports, ensure_ascii=False, indent=2
        )
    else:
        text = "\n".join(export_markdown(session, messages) for session, messages in chats)
    write_file(path, text)
    return True


def _with_reply(chat: Conversation, reply: ReplyStream) -> tuple[SessionRow, list[MessageRow]]:
    """The reply's session and path as History has them, the reply's row as it is on screen."""
    history = chat.history
    session = history.get_session(reply.session_id)
    if session is None:
        raise HistoryError(f"chat {reply.session_id} is no longer in the history")
    row = reply.row()
    path = history.messages(reply.session_id)
    # The reply's row holds less than the reply (or it has none yet): its text replaces it.
    at = next((n for n, m in enumerate(path) if m["id"] == row["id"]), len(path))
    base: dict = dict(path[at]) if at < len(path) else {}
    merged = {"attachments": [], "usage": {}, "timings": {}, "created_at": time.time()}
    merged.update({**base, **row})
    return session, [*path[:at], cast(MessageRow, merged)]
