"""The tests of `llamachat.history.database`."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from llamachat.history.store import MIGRATIONS, History, HistoryError, HistoryUnavailable
from llamachat.tests.support import (
    damage_history_file,
    run_gui_headless,
    send_and_wait,
    write_config_bytes,
    write_history_with_chat,
    write_seed_schema_db,
)


class TestDatabase:
    """The history's SQLite file: opened, migrated, damage moved aside, faults named."""

    def test_history_is_versioned_in_wal_mode_and_reopens_without_loss(
        self, tmp_path: Path
    ) -> None:

        path = tmp_path / "h.db"
        with History(path) as history:
            sid = history.create_session("chat")
            history.add_message(sid, "user", "kept across opens")
            assert history.recovered_from is None
        with History(path) as history:
            assert history.messages(sid)[0]["content"] == "kept across opens"
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()

    def test_history_opens_a_seed_schema_database_and_keeps_its_data(self, tmp_path: Path) -> None:

        path = tmp_path / "old.db"
        write_seed_schema_db(path)
        with History(path) as history:
            assert history.recovered_from is None
            old = history.get_session(7)
            assert old["title"] == "Old llama talk" and old["model"] == "old-model"
            assert old["prompt_name"] == "Default" and old["skills"] == []
            assert old["updated_at"] == 1700000100.0
            assert history.get_session(8)["title"] == ""
            assert history.messages(7)[0]["content"] == "tell me about alpacas"
            assert history.messages(7)[0]["reasoning"] == ""
            history.set_skills(7, ["finance-cli"])
            assert history.get_session(7)["skills"] == ["finance-cli"]
            # The old message became searchable, and new ones are indexed as usual.
            assert [s["id"] for s in history.search("alpacas")] == [7]
            history.add_message(8, "user", "vicuñas too")
            assert [s["id"] for s in history.search("vicunas")] == [8]
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        conn.close()

    def test_history_from_a_newer_llamachat_is_refused_and_left_alone(self, tmp_path: Path) -> None:

        path = tmp_path / "h.db"
        History(path).close()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 99")
        conn.close()
        before = path.read_bytes()
        with pytest.raises(HistoryError, match="newer llamachat"):
            History(path)
        assert path.read_bytes() == before
        assert not list(tmp_path.glob("*.corrupt-*"))

    def test_history_corrupt_file_is_moved_aside_and_a_fresh_one_used(self, tmp_path: Path) -> None:

        path = tmp_path / "history.db"
        junk = os.urandom(8192)
        path.write_bytes(junk)
        history = History(path)
        moved = history.recovered_from
        assert moved is not None and moved.read_bytes() == junk
        assert re.fullmatch(r"history\.db\.corrupt-\d{8}-\d{6}", moved.name)
        assert history.count_sessions() == 0
        history.add_message(history.create_session("chat"), "user", "fresh start")
        history.close()
        assert History(path).recovered_from is None

    def test_history_truncated_file_is_moved_aside_with_nothing_deleted(
        self, tmp_path: Path
    ) -> None:

        path = tmp_path / "history.db"
        with History(path) as history:
            sid = history.create_session("chat")
            for n in range(200):
                history.add_message(sid, "user", f"message {n} " + "words " * 200)
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
        history = History(path)
        assert history.recovered_from is not None
        assert history.recovered_from.read_bytes() == whole[: len(whole) // 2]
        assert history.count_sessions() == 0

    def test_history_unwritable_folder_raises_naming_the_path(
        self, tmp_path: Path, make_unwritable
    ) -> None:

        existing = tmp_path / "existing"
        existing.mkdir()
        History(existing / "h.db").close()
        empty = tmp_path / "empty"
        empty.mkdir()
        make_unwritable(empty)
        with pytest.raises(HistoryError) as caught:
            History(empty / "h.db")
        assert str(empty / "h.db") in str(caught.value) and "writable" in str(caught.value)
        make_unwritable(existing)
        with pytest.raises(HistoryError) as caught:
            History(existing / "h.db")
        assert str(existing / "h.db") in str(caught.value)
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        with pytest.raises(HistoryError, match=re.escape(str(blocker / "h.db"))):
            History(blocker / "h.db")

    def test_a_database_of_schema_three_gains_pins_and_keeps_its_chats(
        self, tmp_path: Path
    ) -> None:
        """Today's released schema (3) opens with every chat unpinned; a pinned chat then
        stays above newer ones, and unpinning puts it back in its place."""

        path = tmp_path / "old.db"
        conn = sqlite3.connect(path)
        for script in MIGRATIONS[:3]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 3")
        for sid, updated in ((1, 100.0), (2, 200.0), (3, 300.0)):
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?, ?, 0, ?)",
                (sid, f"chat {sid}", updated),
            )
        conn.execute(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES (1, 'user', 'hi', 0)"
        )
        conn.commit()
        conn.close()

        with History(path) as history:
            assert [s["id"] for s in history.list_sessions()] == [3, 2, 1]
            assert [s["pinned"] for s in history.list_sessions()] == [0, 0, 0]
            assert history.messages(1)[0]["content"] == "hi"
            history.set_pinned(1, True)
            assert [s["id"] for s in history.list_sessions()] == [1, 3, 2]
            assert history.get_session(1)["pinned"] == 1
            assert "pinned" not in history.export_json(1)["session"]
            assert history.get_session(1)["project_id"] is None and history.projects.listed() == []
            history.set_pinned(1, False)
            assert [s["id"] for s in history.list_sessions()] == [3, 2, 1]
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        conn.close()

    @pytest.mark.parametrize("kind", ["garbage", "truncated", "scribbled"])
    def test_fault_damaged_history_is_moved_aside_and_the_window_says_so(
        self, chat_window, router, qtbot, tmp_path: Path, kind: str
    ) -> None:
        """A damaged history.db: the window says where it went, keeps it byte for byte, starts fresh."""

        path = tmp_path / "history.db"
        damage_history_file(path, kind)
        damaged = path.read_bytes()

        history = History(path)
        assert history.recovered_from is not None
        assert history.recovered_from.read_bytes() == damaged
        window, _ = chat_window(history=history)
        status = window.problem_bar.text()
        assert "damaged" in status and str(history.recovered_from) in status
        send_and_wait(qtbot, window, "fresh start")
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "fresh start",
            "echo: fresh start",
        ]
        assert window.problem_bar.text() == status
        # What could still be read was salvaged into the fresh file, beside the new chat.
        assert history.count_sessions() == (2 if history.salvaged else 1)
        assert (history.salvaged > 0) == (kind == "scribbled")

    def test_fault_one_damaged_page_costs_only_its_rows_the_rest_is_salvaged(
        self, tmp_path: Path
    ) -> None:
        """A page of messages scribbled over: the file is set aside untouched, and every session
        and message still readable is copied into the fresh history, searchable again."""

        path = tmp_path / "history.db"
        with History(path) as history:
            for n in range(200):
                session = history.create_session("chat", title=f"chat {n:03d}")
                history.add_message(session, "user", f"marker{n:03d}q " + "filler words " * 60)
                history.add_message(session, "assistant", f"marker{n:03d}a " + "answer words " * 60)
        data = bytearray(path.read_bytes())
        page = 4096
        hit = data.find(b"marker100q")
        assert hit > 0
        start = hit // page * page
        data[start : start + page] = b"\xa5" * page
        path.write_bytes(bytes(data))

        history = History(path)
        try:
            assert history.recovered_from is not None
            assert history.recovered_from.read_bytes() == bytes(data)
            assert 380 <= history.salvaged < 400
            assert history.count_sessions() == 200
            assert [s["title"] for s in history.search("marker150a")] == ["chat 150"]
            assert history.search("marker100q") == []
            history.add_message(history.create_session("chat"), "user", "still writable")
        finally:
            history.close()

    def test_fault_salvage_keeps_projects_chats_in_them_and_memories(self, tmp_path: Path) -> None:
        """A damaged history keeps its projects, each chat in its project, and the memories:
        a memory whose message was on the damaged page stays, unlinked from it."""

        path = tmp_path / "history.db"
        with History(path) as history:
            project = history.projects.create("Garden")
            in_project = history.create_session("chat", title="tomatoes", project_id=project)
            lost_message = 0
            for n in range(200):
                session = history.create_session("chat", title=f"chat {n:03d}")
                message = history.add_message(session, "user", f"marker{n:03d}q " + "filler " * 60)
                if n == 100:
                    lost_message = message
            history.add_message(in_project, "user", "when do I plant tomatoes?")
            everywhere = history.memories.add("I live in Lyon.")
            gardening = history.memories.add("Raised beds, clay soil.", project_id=project)
            linked = history.memories.add(
                "Likes short answers.", session_id=in_project, message_id=lost_message
            )
        data = bytearray(path.read_bytes())
        hit = data.find(b"marker100q")
        start = hit // 4096 * 4096
        data[start : start + 4096] = b"\xa5" * 4096
        path.write_bytes(bytes(data))

        history = History(path)
        try:
            assert history.recovered_from is not None and history.salvaged > 0
            assert [p["name"] for p in history.projects.listed()] == ["Garden"]
            assert history.get_session(in_project)["project_id"] == project
            assert [m["content"] for m in history.messages(in_project)] == [
                "when do I plant tomatoes?"
            ]
            every = {m["id"]: m for m in history.memories.listed(every=True)}
            assert set(every) == {everywhere, gardening, linked}
            assert every[gardening]["project_id"] == project
            assert every[linked]["message_id"] is None
            assert every[linked]["session_id"] == in_project
            history.memories.add("still writable")
        finally:
            history.close()

    def test_fault_an_unrelated_sqlite_file_is_refused_not_taken_over(self, tmp_path: Path) -> None:
        """history_path pointing at another program's SQLite file: a HistoryError that says so;
        the file is left byte for byte, nothing is moved aside or migrated."""

        path = tmp_path / "places.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
            conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
        conn.close()
        before = path.read_bytes()
        with pytest.raises(HistoryError) as caught:
            History(path)
        assert "not a llamachat history" in str(caught.value) and "moz_places" in str(caught.value)
        assert str(path) in str(caught.value)
        assert path.read_bytes() == before
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("places")] == [
            "places.sqlite"
        ]

    def test_fault_sqlite_errors_split_into_the_environment_and_bugs(
        self, tmp_path: Path, monkeypatch
    ) -> None:
        """A database another program locks is the environment's fault: HistoryUnavailable with
        SQLite's code and what to do. Using a closed history is a bug: the sqlite3 error itself."""

        from llamachat.history import store as db

        monkeypatch.setattr(db, "BUSY_TIMEOUT_S", 0.05)
        path = tmp_path / "history.db"
        history = History(path)
        session = history.create_session("chat")
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(HistoryUnavailable) as caught:
                history.add_message(session, "user", "blocked")
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert caught.value.code == "SQLITE_BUSY"
        assert str(path) in str(caught.value) and "close that program" in str(caught.value)
        history.add_message(session, "user", "goes through now")
        history.close()
        with pytest.raises(sqlite3.ProgrammingError) as bug:
            history.messages(session)
        assert not isinstance(bug.value, HistoryError)

    def test_fault_read_only_data_folder_is_a_clear_message_and_nothing_is_moved(
        self, tmp_path: Path, make_unwritable
    ) -> None:
        """An existing history in a folder that refuses writes: exit 1 naming the file, data kept."""
        data = tmp_path / "data"
        data.mkdir()
        write_history_with_chat(data / "history.db", 4)
        before = sorted(p.name for p in data.iterdir())
        original = (data / "history.db").read_bytes()
        make_unwritable(data)
        config = write_config_bytes(
            tmp_path / "config.toml",
            f'history_path = "{data / "history.db"}"\nrouter_url = "http://127.0.0.1:9"\n'
            "manage_server = false\n",
        )
        done = run_gui_headless(config, tmp_path)
        assert done.returncode == 1, done.stderr
        assert str(data / "history.db") in done.stderr and "writable" in done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(p.name for p in data.iterdir()) == before
        assert (data / "history.db").read_bytes() == original

    def test_a_database_of_the_last_release_migrates_to_one_path_per_session(
        self, tmp_path: Path
    ) -> None:
        """A schema-1 file (as 0.1.0 wrote it) opens with every chat a single path, its
        newest message the active leaf, nothing lost."""

        path = tmp_path / "old.db"
        conn = sqlite3.connect(path)
        conn.executescript(MIGRATIONS[0])
        conn.execute("PRAGMA user_version = 1")
        for sid in (1, 2):
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?, ?, 0, 0)",
                (sid, f"chat {sid}"),
            )
        rows = [(1, "user", "a"), (2, "user", "x"), (1, "assistant", "b"), (1, "user", "c")]
        for session_id, role, content in rows:
            conn.execute(
                "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, 0)",
                (session_id, role, content),
            )
        conn.commit()
        conn.close()

        history = History(path)
        assert [(m["content"], m["parent_id"]) for m in history.messages(1)] == [
            ("a", None),
            ("b", 1),
            ("c", 3),
        ]
        assert [m["content"] for m in history.messages(2)] == ["x"]
        history.add_message(1, "assistant", "d")
        assert [m["content"] for m in history.messages(1)][-2:] == ["c", "d"]
        assert [hit["id"] for hit in history.search("b")] == [1]
