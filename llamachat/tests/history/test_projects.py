"""The tests of `llamachat.history.projects`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llamachat.history.store import History, HistoryError


class TestHistoryProjects:
    """Projects: chats grouped with their defaults, carried by name in exports."""

    def test_projects_group_chats_keep_defaults_and_travel_by_name_in_exports(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        work = history.projects.create("  Work   notes ")
        assert [p["name"] for p in history.projects.listed()] == ["Work notes"]
        with pytest.raises(HistoryError, match="already a project"):
            history.projects.create("work NOTES")
        history.projects.update(
            work,
            prompt_name="Terse",
            model="qwen",
            skills=["pdf"],
            params={"temperature": 0.2},
            collapsed=True,
        )
        with pytest.raises(HistoryError, match="temperature"):
            history.projects.update(work, params={"temperature": "hot"})
        project = history.projects.get(work)
        assert project is not None
        assert (project["prompt_name"], project["model"], project["skills"]) == (
            "Terse",
            "qwen",
            ["pdf"],
        )
        assert project["params"] == {"temperature": 0.2} and project["collapsed"] is True
        loose = history.create_session("chat")
        inside = history.create_session("chat", "qwen", project_id=work)
        history.add_message(inside, "user", "quarterly figures")
        assert [s["id"] for s in history.list_sessions(project=work)] == [inside]
        assert [s["id"] for s in history.list_sessions(project=None)] == [loose]
        assert history.count_sessions(project=work) == 1 and history.count_sessions() == 2
        forked = history.fork(inside, history.messages(inside)[0]["id"])
        assert history.get_session(forked)["project_id"] == work

        exported = history.export_json(inside)
        assert exported["session"]["project"] == "Work notes"
        assert "project_id" not in exported["session"]
        other = History(tmp_path / "other.db")
        copy = other.import_json(exported)
        (made,) = other.projects.listed()
        assert made["name"] == "Work notes" and other.get_session(copy)["project_id"] == made["id"]
        assert other.export_json(copy) == exported
        # A second import joins the project of that name instead of making another.
        assert other.get_session(other.import_json(exported))["project_id"] == made["id"]
        bad = {**exported, "session": {**exported["session"], "project": 5}}
        with pytest.raises(HistoryError, match="session.project"):
            other.import_json(bad)
        assert len(other.projects.listed()) == 1 and other.count_sessions() == 2

        history.projects.delete(work)
        assert history.projects.listed() == [] and history.get_session(inside)["project_id"] is None
        assert history.count_sessions(project=None) == 3
        history.close()
        other.close()

    def test_move_into_a_project_another_window_deleted_is_refused_with_a_message(
        self, tmp_path
    ) -> None:
        """A project deleted by another instance: moving a chat into it is a HistoryError
        the window shows, not sqlite3's IntegrityError (issue 37, item 8)."""

        mine, theirs = History(tmp_path / "h.db"), History(tmp_path / "h.db")
        chat = mine.create_session("chat", "m")
        project = mine.projects.create("Taxes")
        theirs.projects.delete(project)
        with pytest.raises(HistoryError, match="no longer exists"):
            mine.projects.move(chat, project)
        assert mine.get_session(chat)["project_id"] is None
        mine.close()
        theirs.close()

    def test_a_project_made_after_one_was_deleted_never_takes_its_id(self, tmp_path) -> None:
        """AUTOINCREMENT: the newest project deleted, the next one made gets a new id, also
        in a history whose projects table predates it (the chats keep their project)."""

        path = tmp_path / "h.db"
        history = History(path)
        chat = history.create_session("chat", "m")
        kept = history.projects.create("Kept")
        history.projects.move(chat, kept)
        history.projects.delete(history.projects.create("Gone"))
        assert history.projects.create("New") == kept + 2
        history.close()

        # The table as schema 7 made it (no AUTOINCREMENT), with its rows and chats, and
        # no column of a later migration.
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("PRAGMA foreign_keys = OFF")
        rows = raw.execute("SELECT * FROM projects").fetchall()
        raw.executescript(
            "DROP TABLE projects;"
            "CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " prompt_name TEXT NOT NULL DEFAULT '', prompt_custom TEXT NOT NULL DEFAULT '',"
            " model TEXT NOT NULL DEFAULT '', skills TEXT NOT NULL DEFAULT '[]',"
            " params TEXT NOT NULL DEFAULT '{}', collapsed INTEGER NOT NULL DEFAULT 0,"
            " created_at REAL NOT NULL);"
            "CREATE UNIQUE INDEX projects_by_name ON projects (name COLLATE NOCASE);"
            "DELETE FROM sqlite_sequence WHERE name = 'projects';"
            "ALTER TABLE sessions DROP COLUMN opened_at;"
            "PRAGMA user_version = 7;"
        )
        raw.executemany("INSERT INTO projects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        raw.close()

        history = History(path)
        assert history.get_session(chat)["project_id"] == kept
        assert [p["name"] for p in history.projects.listed()] == ["Kept", "New"]
        newest = max(p["id"] for p in history.projects.listed())
        history.projects.delete(newest)
        assert history.projects.create("Newer") == newest + 1
        history.close()
