"""The tests of `llamachat.ui.views.project_menus`."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import history_with_sessions, send_and_wait
from llamachat.ui.views.session_list import SessionListModel
from llamachat.ui.views.sidebar import SessionSidebar


class TestProjectMenus:
    """Projects in the sidebar: their headers' menus, a chat moved into one, the dialog."""

    def test_sidebar_groups_chats_by_project_folds_them_and_moves_a_chat_by_menu(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = history_with_sessions(tmp_path)
        ids = []
        for text in ("alpha", "beta", "gamma"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        work = history.projects.create("Work")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        shown = lambda: [sidebar.model.index(r).data() for r in range(sidebar.model.rowCount())]
        assert shown() == ["▾ Work", "gamma", "beta", "alpha"]
        menu = sidebar.session_menu(ids[0])
        moves = next(a.menu() for a in menu.actions() if a.text() == "Move to project")
        next(a for a in moves.actions() if a.text() == "Work").trigger()
        assert shown() == ["▾ Work", "alpha", "gamma", "beta"]
        assert history.get_session(ids[0])["project_id"] == work
        # A click on the header folds the project (remembered), another unfolds it.
        view = sidebar.list_view
        sidebar.resize(300, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        qtbot.mouseClick(
            view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=view.visualRect(sidebar.model.index(0)).center(),
        )
        assert shown() == ["▸ Work", "gamma", "beta"]
        assert history.projects.get(work)["collapsed"] is True
        assert sidebar.session_ids() == [ids[2], ids[1]]
        qtbot.mouseClick(
            view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=view.visualRect(sidebar.model.index(0)).center(),
        )
        assert shown() == ["▾ Work", "alpha", "gamma", "beta"]
        menu = sidebar.session_menu(ids[0])
        moves = next(a.menu() for a in menu.actions() if a.text() == "Move to project")
        assert [a.text() for a in moves.actions() if a.text()] == [
            "New project…",
            "Out of the project",
        ]
        next(a for a in moves.actions() if a.text() == "Out of the project").trigger()
        assert shown() == ["▾ Work", "gamma", "beta", "alpha"]
        # The project's dialog edits its name and defaults.
        dialog = sidebar.edit_project(work)
        dialog.name.setText("Job")
        dialog.skills.setText("pdf, weather")
        dialog.params.editors["temperature"].setValue(0.5)
        dialog.accept()
        saved = history.projects.get(work)
        assert (saved["name"], saved["skills"], saved["params"]) == (
            "Job",
            ["pdf", "weather"],
            {"temperature": 0.5},
        )
        assert shown()[0] == "▾ Job"
        sidebar.delete_project(work, ask=False)
        assert shown() == ["gamma", "beta", "alpha"] and history.count_sessions() == 3
        history.close()

    def test_window_new_chat_in_a_project_takes_its_defaults_and_is_saved_in_it(
        self, chat_window, router, qtbot
    ) -> None:
        """A project's header menu starts a chat with the project's preset, model, skills
        and parameters; its first message saves it into the project, under the header."""

        window, history = chat_window()
        project = history.projects.create("Finances")
        history.projects.update(
            project,
            model="test-model",
            prompt_name="Terse",
            skills=["finance-cli"],
            params={"temperature": 0.1},
        )
        window.model_choice.apply("")
        window.sidebar.refresh()
        header = window.sidebar.model.index(0)
        assert header.data() == "▾ Finances" and window.sidebar.session_ids() == []
        menu = window.sidebar.project_menu(project)
        next(a for a in menu.actions() if a.text() == "New chat in this project").trigger()
        assert window.chat.loaded_skills() == ["finance-cli"]
        assert window.chat.params() == {"temperature": 0.1}
        assert window.current_model() == "test-model"
        assert window.preset_picker.current_name() == "Terse"
        router.script(Reply(content="Budget it."))
        send_and_wait(qtbot, window, "How do I budget?")
        assert history.get_session(window.session_id)["project_id"] == project
        sent = router.chat_requests()[-1].json
        assert sent["model"] == "test-model" and sent["temperature"] == 0.1
        assert "finance-cli" in sent["messages"][0]["content"]
        assert window.sidebar.model.session_id(1) == window.session_id
        assert window.sidebar.model.index(1).data(SessionListModel.DepthRole) == 1
        # A plain new chat afterwards is in no project and has none of its defaults.
        window.new_session()
        assert window.chat.loaded_skills() == [] and window.chat.params() == {}
        router.script(Reply(content="Hi."))
        send_and_wait(qtbot, window, "Hello")
        assert history.get_session(window.session_id)["project_id"] is None

    def test_project_dialog_adds_and_removes_a_folder_and_deleting_the_project_forgets_it(
        self, chat_window, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """The project dialog's Files row adds a folder (indexed) and removes it; a
        project deleted takes its libraries' index with it (once its Undo is gone), not
        their files."""
        from PySide6.QtWidgets import QFileDialog

        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_library_folder

        root = make_library_folder(tmp_path / "docs")
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(root))
        window, history = chat_window()
        host = window.app.libraries
        project = history.projects.create("Work")
        window.sidebar.refresh()
        dialog = window.sidebar.edit_project(project)
        assert dialog is not None and dialog.folders.count() == 0
        assert not dialog.remove_folder_button.isEnabled()
        dialog.add_folder_button.click()
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        assert dialog.folders.count() == 1 and dialog.remove_folder_button.isEnabled()
        dialog.remove_folder_button.click()
        assert dialog.folders.count() == 0 and host.libraries(project_id=project) == []
        dialog.reject()

        host.attach_to_project(project, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        assert host.config_for(None, project) is not None
        window.sidebar.delete_project(project, ask=False)
        assert history.projects.get(project) is None
        # Forgotten once Undo is no longer offered.
        assert host.libraries() != []
        window.sidebar.deletions.hide()
        assert host.libraries() == [] and host.config_for(None, project) is None
        store = LibraryStore(host.path)
        try:
            assert store._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0] == 0
        finally:
            store.close()
        assert (root / "report.pdf").exists()
