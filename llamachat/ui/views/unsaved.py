"""Quitting with replies streaming, or that History could not save.

A reply still streaming from the router is stopped, or left for the server to
finish (it is in the chat at the next start), as `quit_while_streaming` says or, on
"ask", as the user answers ("Stop it", "Let it finish", Cancel; "Remember my answer"
saves it). A server llamachat runs itself is left running to finish it (its keeper
stops it after `server_grace` s unless the next start takes it over); with
`server_grace = 0` it stops with llamachat, so its replies just stop.
`confirm_quit(parent, chats, app)` then stops the replies still streaming, tries once more to
save every reply History could not take (a full disk), and when one is still not
saved says so and offers Save as… (the chats with those replies, as Markdown or as
a JSON export that File > Import reads back), Quit anyway, or Cancel.

Errors: none raised; a file that cannot be written is said in the dialog, which asks again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtWidgets import QCheckBox, QFileDialog, QMessageBox, QWidget

from llamachat.config import ConfigError
from llamachat.history.export import export_markdown, export_path_json, write_file
from llamachat.history.store import HistoryError, MessageRow, SessionRow
from llamachat.ui import plain
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat.reply import ReplyStream

if TYPE_CHECKING:
    from llamachat.ui.app import App

log = logging.getLogger(__name__)

MARKDOWN = "Markdown (*.md)"
JSON = "llamachat JSON (*.json)"


def confirm_quit(
    parent: QWidget | None, chats: Sequence[Conversation], app: App | None = None
) -> bool:
    """Save what can be saved before quitting; True when nothing is lost or the user chose so."""
    streaming = [c.outbox.reply for c in chats if c.outbox.reply and c.outbox.reply.can_leave()]
    server = app.managed_server() if app is not None else None
    # A server llamachat runs can finish a reply only if it outlives llamachat (server_grace).
    if streaming and app is not None and (server is None or server.cfg.server_grace > 0):
        choice = app.config.quit_while_streaming
        if choice == "ask":
            choice = _ask_streaming(parent, app, len(streaming))
        if not choice:
            return False
        if choice == "finish":
            for reply in streaming:
                reply.leave()
            if server is not None:
                server.leave()
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


def _ask_streaming(parent: QWidget | None, app: App, count: int) -> str:
    """Stop the streaming replies, or let the server finish them: "stop", "finish", or ''."""
    what = "A reply is" if count == 1 else f"{count} replies are"
    box = plain.message_box(
        parent,
        QMessageBox.Icon.Question,
        "Quit llamachat",
        f"{what} still being written. Stop, or let the server finish and find "
        "it in the chat next time?",
        QMessageBox.StandardButton.Cancel,
    )
    finish = box.addButton("Let it finish", QMessageBox.ButtonRole.AcceptRole)
    stop = box.addButton("Stop it", QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(finish)
    remember = QCheckBox("Remember my answer")
    box.setCheckBox(remember)
    box.exec()
    choice = {id(finish): "finish", id(stop): "stop"}.get(id(box.clickedButton()), "")
    if choice and remember.isChecked():
        try:
            app.save_settings({"quit_while_streaming": choice})
        except ConfigError as exc:
            log.warning("the answer was not remembered: %s", exc)
    return choice


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
