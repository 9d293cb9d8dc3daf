"""The tests of `llamachat.ui.views.deletions`."""

from __future__ import annotations


class TestDeletions:
    """The sidebar's notice bar and its Undo of deleted chats and projects."""

    def test_deleting_a_project_asks_first_and_undo_brings_it_back_with_its_chats(
        self, qtbot, tmp_path
    ) -> None:
        """Delete project… asks (Cancel keeps it); deleting moves its chats out and offers
        Undo, which makes the project again, same id and instructions, its chats in it."""
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication, QMessageBox

        from llamachat.tests.support import history_with_sessions
        from llamachat.ui.views.sidebar import SessionSidebar

        history = history_with_sessions(tmp_path)
        work = history.projects.create("Work")
        history.projects.update(work, instructions="Be brief.")
        chat = history.create_session("chat", title="in work", project_id=work)
        history.add_message(chat, "user", "hi")
        fact = history.memories.add("The API is FastAPI", project_id=work, session_id=chat)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)

        def answer(button_text: str) -> None:
            box = QApplication.activeModalWidget()
            if not isinstance(box, QMessageBox):
                QTimer.singleShot(20, lambda: answer(button_text))
                return
            assert "Its chat stays, in no project." in box.text()
            next(b for b in box.buttons() if b.text() == button_text).click()

        menu = sidebar.project_menu(work)
        delete = next(a for a in menu.actions() if a.text() == "Delete project…")
        QTimer.singleShot(0, lambda: answer("Cancel"))
        delete.trigger()
        assert history.projects.get(work) is not None
        QTimer.singleShot(0, lambda: answer("Delete project"))
        delete.trigger()
        assert history.projects.get(work) is None
        assert history.get_session(chat)["project_id"] is None
        assert history.memories.listed(every=True) == []
        assert sidebar.notice_text() == "Deleted the project “Work”; its chat is in no project now."
        assert sidebar.undo_button.isVisibleTo(sidebar)
        sidebar.undo_button.click()
        restored = history.projects.get(work)
        assert restored is not None and restored["instructions"] == "Be brief."
        assert history.get_session(chat)["project_id"] == work
        [memory] = history.memories.listed(project_id=work)
        assert (memory["id"], memory["project_id"], memory["session_id"]) == (fact, work, chat)
        shown = [sidebar.model.index(r).data() for r in range(sidebar.model.rowCount())]
        assert shown == ["▾ Work", "in work"]
        history.close()

    def test_a_deleted_chat_loses_its_slot_file_once_undo_is_gone(self, qtbot, tmp_path) -> None:
        """What the server read of a chat (its slot file) goes when the chat goes for good,
        not while Undo may still bring it back; other chats' files stay."""
        from llamachat.router.slot_cache import SlotFiles, file_name
        from llamachat.tests.support import history_with_sessions
        from llamachat.ui.views.sidebar import SessionSidebar

        history = history_with_sessions(tmp_path)
        gone = history.create_session("chat", title="gone")
        kept = history.create_session("chat", title="kept")
        folder = tmp_path / "slots"
        folder.mkdir()
        for chat in (gone, kept):
            (folder / file_name(chat, "0" * 16)).write_bytes(b"kv")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.deletions.slot_files = lambda: SlotFiles(folder, 1 << 20)
        sidebar.deletions.delete_chat(gone, "gone")
        assert (folder / file_name(gone, "0" * 16)).exists()  # Undo is still offered
        sidebar.deletions.hide()
        assert sorted(p.name for p in folder.iterdir()) == [file_name(kept, "0" * 16)]
        history.close()
