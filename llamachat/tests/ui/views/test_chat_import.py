"""The tests of `llamachat.ui.views.chat_import`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from PySide6.QtWidgets import QPushButton

from llamachat.history.store import History
from llamachat.tests.support import (
    HOSTILE,
    chatgpt_export,
    good_export,
    history_with_sessions,
    outside_text_places,
    write_export,
)
from llamachat.ui.views.sidebar import SessionSidebar


class TestChatImport:
    """Importing chats from a file in the background, for the sidebar (`sidebar.SessionSidebar`)."""

    def test_sidebar_import_runs_in_the_background_with_progress_and_cancel(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The menu's import reads and writes off the GUI thread: the new chat, titled
        "(imported)", opens at the top of the list; Cancel in its progress dialog adds nothing."""

        history = history_with_sessions(tmp_path)
        sid = history.create_session("chat")
        history.add_message(sid, "user", "Name three rivers")
        history.add_message(history.create_session("chat"), "user", "A newer chat")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.export_session(sid, tmp_path / "rivers.json", "json")
        with qtbot.waitSignal(sidebar.session_activated) as opened:
            sidebar.start_import(tmp_path / "rivers.json")
            assert sidebar.import_progress is not None
            assert not sidebar.import_action.isEnabled()
        new_id = opened.args[0]
        assert sidebar.session_ids()[0] == new_id and sidebar.current() == new_id
        assert sidebar.model.data(sidebar.model.index(0)) == "Name three rivers (imported)"
        assert sidebar.notice_text() == "Imported rivers.json."
        assert sidebar.import_action.isEnabled() and sidebar.import_progress is None

        big = good_export()
        big["messages"] = [
            {"role": "user", "content": f"message {n}", "created_at": 1.0} for n in range(5000)
        ]
        (tmp_path / "big.json").write_text(json.dumps(big), encoding="utf-8")
        sidebar.start_import(tmp_path / "big.json")
        sidebar.import_progress.findChild(QPushButton).click()  # its Cancel
        qtbot.waitUntil(lambda: "cancelled" in sidebar.notice_text())
        assert sidebar.notice_text() == "Import of big.json cancelled; nothing was added."
        assert history.count_sessions() == 3 and len(sidebar.session_ids()) == 3
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 3
        raw.close()
        history.close()

    def test_outside_text_in_the_import_progress_shows_as_text(self, qtbot, tmp_path: Path) -> None:
        """An imported file's name reaches the import progress dialog's label as text."""
        from llamachat.ui.views.chat_import import ChatImporter

        history = history_with_sessions(tmp_path)
        sid = history.create_session("chat")
        history.add_message(sid, "user", "hello")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        hostile = tmp_path / f"{HOSTILE}.json"
        sidebar.export_session(sid, hostile, "json")
        assert isinstance(sidebar.importer, ChatImporter)
        with qtbot.waitSignal(sidebar.session_activated):
            sidebar.start_import(hostile)
            sidebar.import_progress.show()
            assert "Import progress" in " ".join(outside_text_places())
        history.close()

    def test_import_many_chats_through_the_sidebar_with_progress_and_cancel(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The sidebar's Import chats… writes every chat of a ChatGPT export in the
        background with rising progress, into a folded project of their own (the person's
        chats stay at the top), opens the newest and says how many and where; Cancel
        while writing a larger one keeps nothing of it."""
        from llamachat.dev.chat_exports import chatgpt_export

        history = history_with_sessions(tmp_path)
        history.add_message(history.create_session("chat"), "user", "Mine")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.import_action.text() == "Import chats…"
        source = write_export(tmp_path, "conversations.json", chatgpt_export(30))
        seen: list[int] = []
        sidebar.importer._progress.connect(seen.append)
        with qtbot.waitSignal(sidebar.session_activated, timeout=20000) as opened:
            sidebar.start_import(source)
            assert sidebar.import_progress is not None
        assert seen == sorted(seen) and seen[-1] >= 50
        assert sidebar.notice_text() == (
            "Imported 30 chats from conversations.json into the project “Imported from ChatGPT”."
        )
        assert history.get_session(opened.args[0])["title"] == "Chat 29 (imported)"
        assert sidebar.current() == opened.args[0]
        shown = [sidebar.model.index(r).data() for r in range(sidebar.model.rowCount())]
        assert shown == ["▸ Imported from ChatGPT", "Mine"]
        assert history.count_sessions() == 31

        big = write_export(tmp_path, "big.json", chatgpt_export(400))
        dialog: list = []

        def cancel_while_writing(percent: int) -> None:
            if percent > 60 and not dialog:
                dialog.append(sidebar.import_progress)
                dialog[0].findChild(QPushButton).click()  # its Cancel

        sidebar.importer._progress.connect(cancel_while_writing)
        sidebar.start_import(big)
        qtbot.waitUntil(lambda: "cancelled" in sidebar.notice_text(), timeout=20000)
        assert (
            dialog and sidebar.notice_text() == "Import of big.json cancelled; nothing was added."
        )
        assert history.count_sessions() == 31
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 31
        raw.close()
        history.close()

    def test_import_hostile_titles_and_file_name_stay_plain_text(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Imported titles and the file's name reach the list, the notice and the progress
        dialog as text."""
        from llamachat.dev.chat_exports import chatgpt_export

        exported = chatgpt_export(2)
        exported[0]["title"] = HOSTILE
        history = history_with_sessions(tmp_path)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        source = write_export(tmp_path, f"{HOSTILE}.json", exported)
        with qtbot.waitSignal(sidebar.session_activated, timeout=20000):
            sidebar.start_import(source)
            sidebar.import_progress.show()
            assert "Import progress" in " ".join(outside_text_places())
        assert history.get_session(sidebar.current())["title"] == f"{HOSTILE} (imported)"
        sidebar.model.toggle(history.projects.listed()[0]["id"])  # unfolded: titles listed
        places = " ".join(outside_text_places())
        assert "Sessions notice" in places and "Sessions" in places.replace("Sessions notice", "")
        history.close()

    def test_import_refused_says_why_whole_for_the_window_to_show(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A bad export imports nothing; the sidebar hands the reason, naming the
        conversation and field, to the window (`problem`, shown whole above the chat)
        rather than squeezing it under the list."""
        from llamachat.dev.chat_exports import chatgpt_export

        exported = chatgpt_export(3)
        node = list(exported[1]["mapping"].values())[2]
        node["message"]["create_time"] = "yesterday"
        history = history_with_sessions(tmp_path)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        with qtbot.waitSignal(sidebar.problem, timeout=20000) as said:
            sidebar.start_import(write_export(tmp_path, "bad.json", exported))
        text = said.args[0]
        assert "conversation 2" in text and "create_time" in text and "yesterday" in text
        assert sidebar.notice_text() == ""
        assert history.count_sessions() == 0
        history.close()


class TestChatImportFaults:
    """Imports on a disk that fills, and a file imported again."""

    def test_an_import_that_fills_the_disk_is_refused_with_the_reason_and_leaves_nothing(
        self, qtbot, tmp_path, file_size_limit
    ) -> None:
        """The disk fills during an import (files stop growing, for real): the progress
        dialog ends with the reason (no TypeError from the child's error), and the rows
        written so far do not stay in the file (issue 37, item 4)."""

        history = history_with_sessions(tmp_path)
        history.add_message(history.create_session("chat"), "user", "Mine")
        source = tmp_path / "conversations.json"
        source.write_text(json.dumps(chatgpt_export(3, 4000)), encoding="utf-8")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        file_size_limit(3_000_000)
        with qtbot.waitSignal(sidebar.importer.refused, timeout=60000) as refused:
            sidebar.start_import(source)
        file_size_limit(-1)  # RLIM_INFINITY: space again
        assert refused.args[0].startswith("cannot save to the history database")
        assert sidebar.import_progress is None and sidebar.import_action.isEnabled()
        history.close()
        # What the next start finds: the import's rows are gone.
        with History(tmp_path / "history.db") as after:
            assert after.count_sessions() == 1
        raw = sqlite3.connect(tmp_path / "history.db")
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
        raw.close()

    def test_importing_the_same_file_again_skips_the_chats_already_there_and_says_so(
        self, qtbot, tmp_path
    ) -> None:
        """The same export imported twice: the second time adds nothing and says so (it
        made duplicates without a word); a file with one chat more adds that one only; a
        chat the user deleted is imported again (issue 37, item 4)."""

        history = history_with_sessions(tmp_path)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        source = tmp_path / "conversations.json"
        source.write_text(json.dumps(chatgpt_export(3, 4, words=2)), encoding="utf-8")

        def run(expected: str) -> int:
            with qtbot.waitSignal(sidebar.importer.imported, timeout=30000) as done:
                sidebar.start_import(source)
            assert done.args[1] == expected
            return done.args[0]

        into = "into the project “Imported from ChatGPT”."
        run(f"Imported 3 chats from conversations.json {into}")
        listed = lambda: {row["id"] for row in history.list_sessions()}
        first = listed()
        opened = run(
            "The 3 chats of conversations.json were imported before; none was added again."
        )
        assert listed() == first and opened in first
        source.write_text(json.dumps(chatgpt_export(4, 4, words=2)), encoding="utf-8")
        newest = run(
            f"Imported 1 chat from conversations.json {into} "
            "3 chats were imported before and skipped."
        )
        assert newest not in first and history.count_sessions() == 4
        history.delete_session(newest)
        again = run(
            f"Imported 1 chat from conversations.json {into} "
            "3 chats were imported before and skipped."
        )
        assert again != newest and history.count_sessions() == 4
        history.close()
