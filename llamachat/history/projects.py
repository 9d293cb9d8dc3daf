"""Projects: named groups of chats, each with instructions added to the system message of
every chat in it, and the defaults a new chat in it starts with (a system prompt preset, a
model, skills, request parameters). The instructions live in the column `prompt_custom`
(made for a project's own prompt, which nothing wrote before them).

`Projects` is a History's (`History.projects`), over its connection; the functions it
calls are plain, for the import's own connection too. A project's name is unique
(ignoring case); deleting a project keeps its chats, in no project. A project's id is
never given again (AUTOINCREMENT): a window still holding a deleted project's id cannot
move a chat into a new project that took it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypedDict, cast

from llamachat import params as params_module
from llamachat.history.rows import HistoryError

_COLUMNS = (
    "id, name, prompt_name, prompt_custom AS instructions, model, skills, params, collapsed,"
    " created_at"
)
# What update_project may change, with the type each takes.
_FIELDS: dict[str, type] = {
    "name": str,
    "prompt_name": str,
    "instructions": str,
    "model": str,
    "skills": list,
    "params": dict,
    "collapsed": bool,
}


class ProjectRow(TypedDict):
    """A project as History returns it."""

    id: int
    name: str
    prompt_name: str
    instructions: str
    model: str
    skills: list[str]
    params: dict[str, Any]
    collapsed: bool
    created_at: float


def _row(row: sqlite3.Row) -> ProjectRow:
    item = dict(row)
    for key, kind in (("skills", list), ("params", dict)):
        try:
            value = json.loads(item[key] or "null")
        except ValueError:
            value = None
        item[key] = value if isinstance(value, kind) else kind()
    item["collapsed"] = bool(item["collapsed"])
    return cast(ProjectRow, item)


def _checked_name(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise HistoryError("a project needs a name")
    return name


def create(conn: sqlite3.Connection, name: str) -> int:
    """A new project named `name` (spaces tidied) with no defaults; its id."""
    name = _checked_name(name)
    if by_name(conn, name) is not None:
        raise HistoryError(f"there is already a project named “{name}”")
    cursor = conn.execute(
        "INSERT INTO projects (name, created_at) VALUES (?, ?)", (name, time.time())
    )
    return int(cursor.lastrowid)  # type: ignore[arg-type]


def by_name(conn: sqlite3.Connection, name: str) -> ProjectRow | None:
    """The project named `name`, ignoring case, or None."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM projects WHERE name = ? COLLATE NOCASE", (name.strip(),)
    ).fetchone()
    return _row(row) if row else None


def get(conn: sqlite3.Connection, project_id: int) -> ProjectRow | None:
    """The project with this id, or None."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM projects WHERE id = ?", (project_id,)).fetchone()
    return _row(row) if row else None


def listed(conn: sqlite3.Connection) -> list[ProjectRow]:
    """Every project, by name."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM projects ORDER BY name COLLATE NOCASE, id")
    return [_row(row) for row in rows.fetchall()]


def update(conn: sqlite3.Connection, project_id: int, changes: dict[str, Any]) -> None:
    """Change the given fields of a project (names in _FIELDS); raises HistoryError."""
    values: dict[str, Any] = {}
    for key, value in changes.items():
        kind = _FIELDS.get(key)
        if kind is None or not isinstance(value, kind):
            raise ValueError(f"a project's {key} cannot be set to {value!r}")
        if isinstance(value, str) and key == "name":
            value = _checked_name(value)
            other = by_name(conn, value)
            if other is not None and other["id"] != project_id:
                raise HistoryError(f"there is already a project named “{value}”")
        elif key == "params":
            wrong = params_module.problem(value, "parameters")
            if wrong:
                raise HistoryError(wrong)
        values[key] = json.dumps(value) if isinstance(value, (list, dict)) else value
    if values:
        columns = {"instructions": "prompt_custom"}
        assignments = ", ".join(f"{columns.get(key, key)} = ?" for key in values)
        conn.execute(
            f"UPDATE projects SET {assignments} WHERE id = ?", (*values.values(), project_id)
        )


def delete(conn: sqlite3.Connection, project_id: int) -> None:
    """Delete a project and its memories; its chats stay, ungrouped."""
    # Explicit as well as the schema's ON DELETE SET NULL: a connection without
    # foreign_keys on (the sqlite3 shell) must not leave chats in a missing project.
    conn.execute("UPDATE sessions SET project_id = NULL WHERE project_id = ?", (project_id,))
    conn.execute("DELETE FROM memories WHERE project_id = ?", (project_id,))
    conn.execute("DELETE FROM projects WHERE id = ?", (project_id,))


def move(conn: sqlite3.Connection, session_id: int, project_id: int | None) -> None:
    """Move a chat into a project (None: out of any); raises HistoryError for a project
    that is gone."""
    # Asked in the move's transaction: the schema's foreign key would refuse a missing
    # project too, but as an IntegrityError, a bug's exception, not a message.
    if project_id is not None and get(conn, project_id) is None:
        raise HistoryError("the project no longer exists (it was deleted in another window)")
    conn.execute("UPDATE sessions SET project_id = ? WHERE id = ?", (project_id, session_id))


def restore(conn: sqlite3.Connection, project: ProjectRow, chats: list[int]) -> None:
    """Make a deleted project again under its id, with `chats` back in it (an Undo)."""
    taken = get(conn, project["id"]) or by_name(conn, project["name"])
    if taken is not None:
        raise HistoryError(
            f"cannot bring back the project “{project['name']}”: “{taken['name']}” took its place"
        )
    conn.execute(
        "INSERT INTO projects (id, name, prompt_name, prompt_custom, model, skills, params,"
        " collapsed, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            project["id"],
            project["name"],
            project["prompt_name"],
            project["instructions"],
            project["model"],
            json.dumps(project["skills"]),
            json.dumps(project["params"]),
            int(project["collapsed"]),
            project["created_at"],
        ),
    )
    for chat in chats:
        conn.execute(
            "UPDATE sessions SET project_id = ? WHERE id = ? AND project_id IS NULL",
            (project["id"], chat),
        )


_Connection = Callable[[], AbstractContextManager[sqlite3.Connection]]


class Projects:
    """A History's projects; `writing` and `reading` lend its connection (the first in
    a transaction), turning SQLite's failures into HistoryUnavailable."""

    def __init__(self, writing: _Connection, reading: _Connection) -> None:
        self._writing = writing
        self._reading = reading

    def create(self, name: str) -> int:
        """A new project with no defaults; its id. Raises HistoryError for a name in use."""
        with self._writing() as conn:
            return create(conn, name)

    def listed(self) -> list[ProjectRow]:
        """Every project, by name."""
        with self._reading() as conn:
            return listed(conn)

    def get(self, project_id: int) -> ProjectRow | None:
        """The project with this id, or None."""
        with self._reading() as conn:
            return get(conn, project_id)

    def update(self, project_id: int, **changes: Any) -> None:
        """Change a project's name, prompt_name, instructions, model, skills, params or
        collapsed; raises HistoryError for a name in use or bad parameters."""
        with self._writing() as conn:
            update(conn, project_id, changes)

    def delete(self, project_id: int) -> None:
        """Delete a project; its chats stay, in no project."""
        with self._writing() as conn:
            delete(conn, project_id)

    def chats(self, project_id: int) -> list[int]:
        """The ids of the chats in a project, deleted ones included."""
        with self._reading() as conn:
            rows = conn.execute("SELECT id FROM sessions WHERE project_id = ?", (project_id,))
            return [int(row[0]) for row in rows.fetchall()]

    def restore(self, project: ProjectRow, chats: list[int]) -> None:
        """Make a deleted project again under its id, with `chats` back in it; raises
        HistoryError when its id or name was taken meanwhile."""
        with self._writing() as conn:
            restore(conn, project, chats)

    def move(self, session_id: int, project_id: int | None) -> None:
        """Move a chat into a project (None: out of any); raises HistoryError when the
        project is gone (another window deleted it)."""
        with self._writing() as conn:
            move(conn, session_id, project_id)
