"""The tests of `llamachat.ui.views.session_list`."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QMimeData, QModelIndex, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from llamachat.history.search import SearchFilter
from llamachat.tests.support import (
    history_with_sessions,
    offscreen_limits,
)
from llamachat.ui.views.session_list import SESSION_MIME
from llamachat.ui.views.sidebar import SessionSidebar


class TestSessionList:
    """The sessions list's model: a page at a time as the list scrolls, chats dragged to projects."""

    @offscreen_limits
    def test_sidebar_pages_ten_thousand_sessions_as_the_list_scrolls(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = history_with_sessions(tmp_path, 10_000)
        sidebar = SessionSidebar(history, page_size=100)
        qtbot.addWidget(sidebar)
        sidebar.resize(300, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        assert sidebar.model.rowCount() == 100
        assert sidebar.model.canFetchMore(QModelIndex())
        assert [sidebar.model.data(sidebar.model.index(r)) for r in range(2)] == [
            "chat 9999",
            "chat 9998",
        ]
        sidebar.list_view.scrollToBottom()
        qtbot.waitUntil(lambda: sidebar.model.rowCount() >= 200)
        assert sidebar.model.rowCount() < 10_000
        while sidebar.model.canFetchMore(QModelIndex()):
            sidebar.model.fetchMore(QModelIndex())
        assert sidebar.model.rowCount() == 10_000
        assert sidebar.session_ids()[-1] == 1
        history.close()

    def test_sidebar_drag_a_chat_onto_a_project_moves_it_in_or_out_and_keeps_its_pin(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A chat dragged onto a project's header or chat moves into it, onto a chat in no
        project or the space below out of it; pins stay; other drops are refused."""

        history = history_with_sessions(tmp_path)
        work = history.projects.create("Work")
        home = history.projects.create("Home")
        alpha, beta, gamma = (history.create_session("chat", title=t) for t in "abc")
        history.set_pinned(alpha, True)
        history.projects.move(beta, home)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        model = sidebar.model
        shown = lambda: [model.index(r).data() for r in range(model.rowCount())]
        assert shown() == ["▾ Home", "b", "▾ Work", "a", "c"]
        move = Qt.DropAction.MoveAction
        dragged = model.mimeData([model.index(model.row_of(alpha))])
        assert dragged.formats() == [SESSION_MIME]
        assert model.mimeData([model.index(0)]) is None  # a header is not dragged
        assert model.flags(model.index(0)) & Qt.ItemFlag.ItemIsDropEnabled
        assert not model.flags(model.index(0)) & Qt.ItemFlag.ItemIsDragEnabled
        assert model.flags(model.index(3)) & Qt.ItemFlag.ItemIsDragEnabled
        # Between two rows, another program's text, a chat of another history: no drop.
        assert not model.canDropMimeData(dragged, move, 3, 0, QModelIndex())
        text = QMimeData()
        text.setText(str(alpha))
        assert not model.canDropMimeData(text, move, -1, 0, model.index(2))
        foreign = QMimeData()
        foreign.setData(SESSION_MIME, json.dumps({"history": "/x.db", "ids": [alpha]}).encode())
        assert not model.canDropMimeData(foreign, move, -1, 0, model.index(2))
        assert not model.dropMimeData(foreign, move, -1, 0, model.index(2))
        assert history.get_session(alpha)["project_id"] is None
        # Onto a project's header: into it, pinned still.
        assert model.dropMimeData(dragged, move, -1, 0, model.index(2))
        assert shown() == ["▾ Home", "b", "▾ Work", "a", "c"]
        assert model.project(3)["id"] == work
        assert history.get_session(alpha)["project_id"] == work
        assert history.get_session(alpha)["pinned"] == 1
        # Where it already is: no drop; onto a chat of another project: into that one.
        assert not model.canDropMimeData(dragged, move, -1, 0, model.index(2))
        assert model.dropMimeData(dragged, move, -1, 0, model.index(model.row_of(beta)))
        assert history.get_session(alpha)["project_id"] == home
        assert shown() == ["▾ Home", "a", "b", "▾ Work", "c"]
        # Onto a chat in no project, or the space below the list: out of any project.
        assert model.dropMimeData(dragged, move, -1, 0, model.index(model.row_of(gamma)))
        assert history.get_session(alpha)["project_id"] is None
        beta_drag = model.mimeData([model.index(model.row_of(beta))])
        assert model.dropMimeData(beta_drag, move, -1, 0, QModelIndex())
        assert shown() == ["▾ Home", "▾ Work", "a", "c", "b"]
        # Dropped on the view itself (as a drag ends), onto a header.
        view = sidebar.list_view
        sidebar.resize(280, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        assert view.acceptDrops() and view.dragEnabled()
        at = view.visualRect(model.index(1)).center()
        buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
        enter = QDragEnterEvent(at, move, dragged, buttons, keys)
        QApplication.sendEvent(view.viewport(), enter)
        assert enter.isAccepted()
        drop = QDropEvent(QPointF(at), move, dragged, buttons, keys)
        drop.ignore()  # as Qt delivers it: accepted only by who takes it
        QApplication.sendEvent(view.viewport(), drop)
        assert drop.isAccepted() and history.get_session(alpha)["project_id"] == work
        assert shown() == ["▾ Home", "▾ Work", "a", "c", "b"] and model.project(2)["id"] == work
        # Filtered, the list is flat: nothing is dragged or dropped.
        sidebar.filters.set_filter(SearchFilter(project=work))
        assert shown() == ["a"]
        assert not model.flags(model.index(0)) & Qt.ItemFlag.ItemIsDragEnabled
        assert not model.canDropMimeData(beta_drag, move, -1, 0, model.index(0))
        history.close()

    def test_the_sidebar_marks_chats_with_a_draft_and_lists_quick_questions(
        self, qtbot, chat_window, router
    ) -> None:
        """A chat holding a draft not sent says "draft" in the list (its tooltip too), gone once
        the box is emptied; the Filter menu's Quick questions lists the quick window's questions."""
        from llamachat.tests.support import send_and_wait
        from llamachat.ui.views.session_list import SessionListModel

        window, history = chat_window()
        send_and_wait(qtbot, window, "first chat")
        session_id = window.session_id
        model = window.sidebar.model
        row = lambda: model.index(model.row_of(session_id))
        assert not row().data(SessionListModel.DraftRole)
        window.composer.set_text("not sent yet")
        window.drafts.save()
        assert row().data(SessionListModel.DraftRole)
        assert "Draft not sent" in row().data(0x03)  # ToolTipRole
        window.new_session()
        window.sidebar.refresh()  # read again from the history: still marked
        assert row().data(SessionListModel.DraftRole)
        window.open_session(session_id)
        window.composer.set_text("")
        window.drafts.save()
        assert not row().data(SessionListModel.DraftRole)

        quick = history.create_session("oneshot", "test-model", title="what is EADDRINUSE")
        history.add_message(quick, "user", "what is EADDRINUSE")
        window.sidebar.refresh()
        assert quick not in window.sidebar.session_ids()
        menu = window.sidebar.filters.menu
        menu.aboutToShow.emit()
        action = next(a for a in menu.actions() if a.text() == "Quick questions")
        action.trigger()
        assert window.sidebar.session_ids() == [quick]
        assert window.sidebar.filters.describe() == "Quick questions"
        window.sidebar.search("EADDRINUSE")
        assert window.sidebar.session_ids() == [quick]
