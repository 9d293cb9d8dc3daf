"""The tests of `llamachat.ui.library.chat_libraries`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QUrl
from PySide6.QtWidgets import QLabel, QWidget

from llamachat.config import Config
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.history.store import History
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.tests.support import (
    SMOL_ID,
    history_with_sessions,
    library_sources,
    make_app,
    make_zebra_folder,
    model_status,
    send_and_wait,
    start_sending,
)
from llamachat.ui.views.sidebar import SessionSidebar


class TestChatLibraries:
    """The chat window's libraries: folders attached or dropped, searched by the model."""

    def test_window_folder_dropped_on_a_new_chat_is_indexed_and_searched_by_the_model(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A folder dropped on the composer of an unsaved chat is attached with its first
        message, indexed off the GUI thread with a progress bar, offered to the model as
        search_documents, its sources shown as file links (names as plain text), and the
        Libraries panel lists its files, the skipped ones with why."""
        from llamachat.tests.support import make_library_folder
        from llamachat.ui.library.libraries_panel import LibrariesPanel

        root = make_library_folder(tmp_path / "docs <b>x</b>")
        window, _history = chat_window()
        progress: list[tuple[int, int]] = []
        window.app.libraries.progress.connect(
            lambda done, total, _name: progress.append((done, total))
        )
        data = QMimeData()
        data.setUrls([QUrl.fromLocalFile(str(root))])
        window.composer.editor.insertFromMimeData(data)
        assert window.composer.attachments() == []
        assert "Library added with your first message" in window.statusBar().currentMessage()

        router.script(Reply(content="Attached."))
        send_and_wait(qtbot, window, "Here are my documents.")
        qtbot.waitUntil(lambda: not window.app.libraries.busy(), timeout=20000)
        assert progress[-1] == (0, 0) and (7, 7) in progress
        [first] = (r.json for r in router.chat_requests())
        assert "search_documents" in [t["function"]["name"] for t in first["tools"]]

        router.script(
            Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra revenue"}')]),
            Reply(content="42 million, says report.pdf page 2."),
        )
        send_and_wait(qtbot, window, "How did the zebra division do?")
        result = router.chat_requests()[-1].json["messages"][-1]
        assert result["role"] == "tool" and "42 million" in result["content"]
        [row] = window.app.libraries.libraries(window.session_id)
        assert (row.root, row.files, row.skipped) == (root.resolve(), 7, 3)
        [results] = [
            label
            for label in window.messages.last_assistant().findChildren(QLabel)
            if label.accessibleName() == "Searched documents"
        ]
        assert ">report.pdf, page 2</a>" in results.text()
        assert (root.resolve() / "report.pdf").as_uri() in results.text()

        window.libraries.open_panel()
        panel = window.libraries.panel
        assert isinstance(panel, LibrariesPanel)
        top = panel.tree.topLevelItem(0)
        assert top.text(0) == str(root.resolve())
        skipped = {top.child(n).text(0): top.child(n).text(3) for n in range(top.childCount())}
        assert skipped["locked.pdf"] == "encrypted (a password is needed)"
        assert skipped["photo.png"] == "not a type llamachat reads (.png)"
        panel.remove_button.click()
        assert window.app.libraries.libraries(window.session_id) == []
        panel.close()

    def test_window_attach_files_as_library_indexes_just_those_files(
        self, chat_window, router, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """Attach > Add files as library…: each chosen file becomes a library of its own
        (searched by the model, not pasted into the message), indexed and listed."""
        from PySide6.QtWidgets import QFileDialog

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.md").write_text("# Zebra\n\nThe zebra division grew.\n")
        (root / "other.txt").write_text("Not chosen.")
        chosen = [str(root / "zebra.md")]
        monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *_a, **_k: (chosen, ""))
        window, _history = chat_window()
        menu = window.composer.attach_button.menu()
        [action] = [a for a in menu.actions() if a.text() == "Add files as library…"]
        action.trigger()
        router.script(Reply(content="Noted."))
        send_and_wait(qtbot, window, "Read my notes.")
        qtbot.waitUntil(lambda: not window.app.libraries.busy(), timeout=20000)
        [row] = window.app.libraries.libraries(window.session_id)
        assert (row.root, row.files, row.passages) == ((root / "zebra.md").resolve(), 1, 1)
        assert not window.composer.attachments()

    def test_a_chat_deleted_for_good_takes_its_libraries_index_with_it(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Deleting a chat keeps its library while Undo is offered; once the notice goes,
        its index leaves library.db (its files stay). A chat purged while llamachat was not
        running loses its libraries' index at the next start; a live chat keeps its own."""
        from llamachat.ui.library.host import LibraryHost

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        history = history_with_sessions(tmp_path)
        ids = []
        for text in ("kept", "deleted", "purged"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        host = LibraryHost(tmp_path / "library.db")
        for sid in ids:
            host.attach(sid, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        sidebar = SessionSidebar(history)
        sidebar.libraries = host
        qtbot.addWidget(sidebar)
        sidebar.delete_session(ids[1])
        assert host.libraries(ids[1])  # Undo is still offered
        [close] = [
            w for w in sidebar.notice.findChildren(QWidget) if w.accessibleName() == "Close notice"
        ]
        close.click()
        assert host.libraries(ids[1]) == [] and host.libraries(ids[0])
        history.delete_session(ids[2])
        history.purge_deleted([ids[2]])
        host.forget_gone_chats(lambda sid: history.get_session(sid) is not None)
        assert host.libraries(ids[2]) == [] and host.libraries(ids[0])
        assert (root / "zebra.txt").exists()
        host.close()
        history.close()

    def test_app_forgets_the_libraries_of_chats_purged_while_it_was_not_running(
        self, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """Shortly after start, the App forgets the libraries of chats no longer in the
        history and keeps a live chat's; an App whose history was closed by then (quit)
        raises nothing."""
        from llamachat.library.index import default_path
        from llamachat.ui import app as app_module
        from llamachat.ui.library.host import LibraryHost

        monkeypatch.setattr(app_module, "FORGET_GONE_CHATS_MS", 0)
        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        history = History(tmp_path / "history.db")
        live, gone = history.create_session("chat"), history.create_session("chat")
        history.delete_session(gone)
        history.purge_deleted([gone])
        host = LibraryHost(default_path(history.path))
        host.attach(live, root)
        host.attach(gone, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        host.close()
        cfg = Config(history_path=history.path, router_url="http://127.0.0.1:9")
        started = make_app(cfg, history)
        qtbot.waitUntil(lambda: started.libraries.libraries(gone) == [], timeout=5000)
        assert started.libraries.libraries(live)
        closed_history = History(tmp_path / "other.db")
        quitting = make_app(Config(history_path=closed_history.path), closed_history)
        closed_history.close()
        quitting.libraries.attach(1, root)
        qtbot.wait(50)  # its timer fires with the history closed: nothing is raised
        for app in (started, quitting):
            app.libraries.close()
        history.close()

    def test_window_temporary_chat_neither_takes_nor_searches_a_library(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A temporary chat's session ids are an in-memory database's: a saved chat with the
        same id keeps its library to itself, and a folder added in the temporary chat is
        refused with a word, not attached to that saved chat."""
        from llamachat.tests.support import make_library_folder

        root = make_library_folder(tmp_path / "docs")
        window, _history = chat_window()
        window.libraries.add_folders([root])
        router.script(Reply(content="Saved."))
        send_and_wait(qtbot, window, "A saved chat with a library.")
        saved = window.session_id
        qtbot.waitUntil(lambda: not window.app.libraries.busy(), timeout=20000)
        assert window.app.libraries.libraries(saved)

        window.chat.start_temporary()
        try:
            router.script(Reply(content="Temporary."), Reply(content="Again."))
            send_and_wait(qtbot, window, "A temporary question.")
            assert window.chat.state.session_id == saved  # a memory database counts from 1 too
            assert "search_documents" not in json.dumps(router.chat_requests()[-1].json)
            window.libraries.add_folders([root])
            assert "temporary chat has no libraries" in window.statusBar().currentMessage()
            send_and_wait(qtbot, window, "And again.")
            assert "search_documents" not in json.dumps(router.chat_requests()[-1].json)
            assert len(window.app.libraries.libraries(saved)) == 1
        finally:
            # Closing a temporary chat with messages asks first: nobody would answer.
            window.chat.discard_temporary()

    def test_window_project_library_is_indexed_once_and_searched_by_each_chat_of_it(
        self, chat_window, router, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """A folder added in the project's dialog is indexed once, searched by each chat
        of the project (through the model's tool call) and listed in their Libraries
        panel as the project's; a chat moved out of the project searches it no more."""
        from PySide6.QtWidgets import QFileDialog

        from llamachat.tests.support import make_library_folder

        root = make_library_folder(tmp_path / "docs")
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(root))
        window, history = chat_window()
        project = history.projects.create("Work <b>x</b>")
        window.sidebar.refresh()
        dialog = window.sidebar.edit_project(project)
        assert dialog is not None
        dialog.add_folder_button.click()
        host = window.app.libraries
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        assert [dialog.folders.item(n).text() for n in range(dialog.folders.count())] == [
            str(root.resolve())
        ]
        dialog.reject()

        chats = []
        for question in ("How did the zebra division do?", "And the zebra revenue?"):
            menu = window.sidebar.project_menu(project)
            next(a for a in menu.actions() if a.text() == "New chat in this project").trigger()
            router.script(
                Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra revenue"}')]),
                Reply(content="42 million."),
            )
            send_and_wait(qtbot, window, question)
            result = router.chat_requests()[-1].json["messages"][-1]
            assert result["role"] == "tool" and "42 million" in result["content"]
            chats.append(window.session_id)
        [row] = host.libraries()  # one index for the project, none per chat
        assert (row.project_id, row.session_id, row.files) == (project, None, 7)

        window.libraries.open_panel()
        panel = window.libraries.panel
        assert panel is not None
        top = panel.tree.topLevelItem(0)
        assert top.text(0) == f"From project Work <b>x</b>: {root.resolve()}"
        assert panel.tree.topLevelItemCount() == 1
        panel.close()

        history.projects.move(chats[1], None)
        router.script(Reply(content="No documents here."))
        send_and_wait(qtbot, window, "Anything on zebras?")
        assert "search_documents" not in json.dumps(router.chat_requests()[-1].json)
        window.open_session(chats[0])
        router.script(Reply(content="Still searched."))
        send_and_wait(qtbot, window, "Still there?")
        assert "search_documents" in json.dumps(router.chat_requests()[-1].json["tools"])

    def test_window_library_with_a_model_that_cannot_call_tools_sends_the_passages_and_says_so(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A folder added to a new chat whose model's template takes no tools: the status bar
        and the Libraries panel say llamachat searches it; the first message (the library is
        read meanwhile: the request waits for it) goes out with the best passages before it,
        its sources listed under the reply; the next message's passages are counted by the
        meter before it is sent, and the earlier ones are not replayed."""
        router.models["test-model"].tools = False
        root = make_zebra_folder(tmp_path / "docs")
        window, _history = chat_window()
        watch = window.chat.context
        qtbot.waitUntil(lambda: not watch.takes_tools())
        window.libraries.add_folders([root])
        assert "This model cannot search it itself" in window.statusBar().currentMessage()

        router.script(Reply(content="It earned 42 million."))
        send_and_wait(qtbot, window, "How did the zebra division do?")
        [first] = [request.json for request in router.chat_requests()]
        assert "tools" not in first
        content = first["messages"][-1]["content"]
        assert content.startswith("[Excerpts from the user's attached documents")
        assert "42 million" in content and content.endswith("How did the zebra division do?")
        assert ">zebra.md (Zebra)</a>" in library_sources(window)
        assert "still being read" not in library_sources(window)

        window.composer.set_text("And the zebra division last year?")
        qtbot.waitUntil(lambda: watch.breakdown().get("excerpts") > 0, timeout=10_000)
        assert "passages found in the chat's libraries" in window.meter.toolTip()
        router.script(Reply(content="No figure for last year."))
        send_and_wait(qtbot, window, "And the zebra division last year?")
        second = router.chat_requests()[-1].json["messages"]
        assert second[-3] == {"role": "user", "content": "How did the zebra division do?"}
        assert "42 million" in second[-1]["content"]

        window.libraries.open_panel()
        panel = window.libraries.panel
        assert panel is not None
        assert "This model cannot search them itself" in panel.summary.text()
        panel.close()

    @pytest.mark.real_router
    def test_real_router_smollm2_gets_the_passages_found_in_its_library(
        self, chat_window, real_router, qtbot, tmp_path: Path
    ) -> None:
        """With the real llama-server, SmolLM2 (its template takes no tools; not loaded yet,
        as at a new user's first message) gets the library's best passages in its request,
        which the server takes, and the reply lists the source."""
        # As a new user's: the model is not loaded when the first message goes (its server
        # has not said yet that its template takes no tools).
        models = Models(Client(real_router.url))
        if model_status(real_router.url, SMOL_ID) == "loaded":
            models.unload(SMOL_ID)
            qtbot.waitUntil(
                lambda: model_status(real_router.url, SMOL_ID) == "unloaded", timeout=30_000
            )
        root = make_zebra_folder(tmp_path / "docs")
        window, history = chat_window(url=real_router.url, default_model=SMOL_ID)
        watch = window.chat.context
        replies: list = []
        window.chat.outbox.started.connect(replies.append)
        window.libraries.add_folders([root])
        window.chat.set_params({"max_tokens": 24})  # a short answer on two shared cores
        # The model loads first; a busy machine reads a prompt at ~25 tokens/s.
        start_sending(qtbot, window, "How did the zebra division do?")
        qtbot.waitUntil(lambda: bool(replies) and not window.is_streaming(), timeout=120_000)
        [reply] = replies
        sent = reply.request()
        assert sent.tools == () and [p.name for p in sent.question] == ["excerpts", "user"]
        assert "42 million" in sent.messages()[-1]["content"]
        assert history.messages(window.session_id)[-1]["status"] == "complete"
        assert sent.params["max_tokens"] == 24
        assert ">zebra.md (Zebra)</a>" in library_sources(window)
        qtbot.waitUntil(lambda: not watch.takes_tools(), timeout=30_000)
