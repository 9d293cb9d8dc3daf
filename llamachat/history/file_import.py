"""Importing a file into the history over a connection of its own, for a worker thread or
a child process (`import_child`) while the window's History stays on the GUI thread.

`import_file` imports a JSON export (`export` reads and checks it), `import_chats` a file of
any format `importers` reads (one chat or thousands); both write every chat as a user's
import, in batches, and keep nothing when their progress callback raises ImportCancelled.
A chat imported before (the same content, still in the history) is not added again.

Errors: HistoryError (a bad file, a damaged history) and HistoryUnavailable (SQLite
failed for the environment's sake), as `store` describes them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from llamachat.history import database, export, importers
from llamachat.history.database import BUSY_TIMEOUT_S, _Corrupt
from llamachat.history.export import MAX_MESSAGE_CHARS, Imported
from llamachat.history.rows import HistoryError, _unavailable

# The share of an import's progress that reading the file takes (writing is the rest):
# 200,000 messages of our export read in about a second and are written in about eight;
# another app's export is read, converted and checked in about the time it takes to write.
_READ_SHARE = 0.1
_CONVERT_SHARE = 0.5


def import_file(
    db_path: Path,
    source: Path,
    *,
    max_message_chars: int = MAX_MESSAGE_CHARS,
    on_progress: Callable[[float], None] | None = None,
) -> int:
    """Import the JSON export at `source` into the history at `db_path` as a user's import
    (titled "(imported)", at the top of the list); the new session's id.

    It opens a connection of its own, so it can run on a worker thread while the window's
    History stays on the GUI thread. `on_progress(share done)` is called as it goes; if it
    raises (ImportCancelled), nothing of the import is kept and the exception passes on.
    """
    report = on_progress or (lambda _share: None)
    imported = export.read_import(
        source,
        max_message_chars=max_message_chars,
        on_progress=lambda share: report(share * _READ_SHARE),
    )
    return _write_imports(db_path, [imported], report, _READ_SHARE)[0]


def import_chats(
    db_path: Path,
    source: Path,
    *,
    max_message_chars: int = MAX_MESSAGE_CHARS,
    on_progress: Callable[[float], None] | None = None,
    own_project: bool = True,
) -> ImportIds:
    """Import every chat in `source`, a file of any format `importers.read_chats` reads,
    as import_file does one; the new sessions' ids, the last one at the top of the list.
    Another app's chats go into a project of their own unless `own_project` is False.

    The whole file is checked before anything is written: a mistake anywhere raises
    HistoryError naming it and adds nothing. A chat imported before (the same content,
    still in the history) is not added again: `skipped` lists those chats' ids.
    """
    report = on_progress or (lambda _share: None)
    chats = importers.read_chats(
        source,
        max_message_chars=max_message_chars,
        on_progress=lambda share: report(share * _CONVERT_SHARE),
        own_project=own_project,
    )
    for chat in chats:
        chat.fingerprint = export.fingerprint(chat)
    return _write_imports(db_path, chats, report, _CONVERT_SHARE)


class ImportIds(list[int]):
    """The ids of the chats an import added, newest last, and in `skipped` the ids of
    those of the file that were imported before (and not added again)."""

    def __init__(self, added: Iterable[int] = (), skipped: Iterable[int] = ()) -> None:
        super().__init__(added)
        self.skipped = list(skipped)


def _write_imports(
    db_path: Path, imports: list[Imported], report: Callable[[float], None], read: float
) -> ImportIds:
    """Write checked imports as a user's, in batches reported after the reading's share;
    those whose fingerprint a chat in the history has are skipped."""
    try:
        conn = database.connect(Path(db_path), BUSY_TIMEOUT_S)
    except _Corrupt as exc:
        raise HistoryError(
            f"cannot import into the history database {db_path}: it is damaged ({exc}); "
            "restart llamachat to set it aside"
        ) from None
    try:
        try:
            there = export.already_imported(conn, [i.fingerprint for i in imports if i.fingerprint])
        except sqlite3.Error as exc:
            raise _unavailable(Path(db_path), exc, "read") from None
        new = [imported for imported in imports if imported.fingerprint not in there]
        total = max(sum(len(imported.messages) for imported in new), 1)
        added = export.add_imports(
            conn,
            Path(db_path),
            new,
            mark=True,
            on_batch=lambda done: report(read + (1 - read) * done / total),
        )
        return ImportIds(added, [there[i.fingerprint] for i in imports if i.fingerprint in there])
    finally:
        conn.close()
