"""The tests of `llamachat.history.memories`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llamachat.history import memories
from llamachat.history.store import MIGRATIONS, History, HistoryError
from llamachat.tokens import estimate_tokens


class TestMemories:
    """Short facts across chats, kept in the history's SQLite with their scope and source."""

    def test_a_memory_keeps_its_scope_source_and_stays_in_its_project(self, tmp_path: Path) -> None:
        """Everywhere's memories reach every chat, a project's only that project's chats;
        the source chat and message are kept; the same fact twice is one memory."""

        history = History(tmp_path / "h.db")
        work = history.projects.create("Work")
        chat = history.create_session("chat")
        message = history.add_message(chat, "user", "I like metric units")
        metric = history.memories.add(
            "  Prefers answers in\nmetric units ", session_id=chat, message_id=message
        )
        api = history.memories.add("The project's API is FastAPI", project_id=work, author="model")
        assert history.memories.add("Prefers answers in metric units") == metric
        row = history.memories.get(metric)
        assert row is not None
        assert (row["text"], row["project_id"], row["session_id"], row["message_id"]) == (
            "Prefers answers in metric units",
            None,
            chat,
            message,
        )
        assert history.memories.get(api)["author"] == "model"  # type: ignore[index]
        assert [m["id"] for m in history.memories.listed()] == [metric]
        assert [m["id"] for m in history.memories.listed(project_id=work)] == [metric, api]
        assert [m["id"] for m in history.memories.listed(every=True)] == [metric, api]
        history.projects.delete(work)
        assert [m["id"] for m in history.memories.listed(every=True)] == [metric]

    def test_memories_are_edited_pinned_and_removed_and_refuse_what_is_no_fact(
        self, tmp_path: Path
    ) -> None:
        history = History(tmp_path / "h.db")
        first = history.memories.add("Uses Fedora")
        second = history.memories.add("Writes Python")
        history.memories.update(second, pinned=True, text="Writes Python 3.11")
        assert [(m["text"], m["pinned"]) for m in history.memories.listed()] == [
            ("Writes Python 3.11", True),
            ("Uses Fedora", False),
        ]
        with pytest.raises(HistoryError, match="needs some text"):
            history.memories.add("   ")
        with pytest.raises(HistoryError, match="short fact"):
            history.memories.update(first, text="x" * (memories.MAX_CHARS + 1))
        history.memories.delete(first)
        assert [m["id"] for m in history.memories.listed()] == [second]

    def test_a_deleted_chat_leaves_its_memories_without_a_source(self, tmp_path: Path) -> None:
        history = History(tmp_path / "h.db")
        chat = history.create_session("chat")
        message = history.add_message(chat, "user", "hi")
        kept = history.memories.add("Likes tea", session_id=chat, message_id=message)
        history.delete_session(chat)
        history.purge_deleted(older_than=0)
        row = history.memories.get(kept)
        assert row is not None and (row["session_id"], row["message_id"]) == (None, None)

    def test_the_budget_keeps_pinned_then_recently_used_and_the_choice_is_stable(
        self, tmp_path: Path
    ) -> None:
        """Over budget: pinned first, then the most recently used; marking the kept ones
        used (as each request does) keeps the same choice turn after turn."""

        history = History(tmp_path / "h.db")
        ids = [history.memories.add(f"Fact number {n} " + "word " * 10) for n in range(6)]
        history.memories.update(ids[5], pinned=True)
        history.memories.mark_used([ids[1]])
        one = estimate_tokens(history.memories.listed()[0]["text"]) + 2  # each costs the same
        choice = memories.chosen(history.memories.listed(), one * 3)
        assert [m["id"] for m in choice.kept] == [ids[5], ids[1], ids[4]]
        assert sorted(m["id"] for m in choice.left_out) == [ids[0], ids[2], ids[3]]
        for _turn in range(3):
            history.memories.mark_used(m["id"] for m in choice.kept)
            again = memories.chosen(history.memories.listed(), one * 3)
            assert {m["id"] for m in again.kept} == {m["id"] for m in choice.kept}

    def test_a_new_history_has_the_memories_table(self, tmp_path: Path) -> None:
        History(tmp_path / "h.db").close()
        conn = sqlite3.connect(tmp_path / "h.db")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) >= 11
        columns = [row[1] for row in conn.execute("PRAGMA table_info(memories)")]
        assert columns[:3] == ["id", "text", "project_id"] and "used_at" in columns
