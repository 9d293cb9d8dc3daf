"""The tests of `llamachat.ui.views.sidebar`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QContextMenuEvent, QPalette
from PySide6.QtWidgets import QApplication, QPushButton

from llamachat.history.store import History, HistoryError
from llamachat.tests.support import (
    click_session,
    highlighted_sessions,
    history_with_sessions,
    offscreen_dialogs,
    send_and_wait,
    visible_widget_named,
)
from llamachat.ui.views.session_list import marked_html
from llamachat.ui.views.sidebar import SessionSidebar


class TestSidebar:
    """The sessions sidebar: past chats newest first, full-text search, rename, delete, export."""

    def test_chrome_window_search_finds_titles_shows_plain_marked_snippets_or_no_matches(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """Search finds a renamed chat by its title; snippets are plain text (no Markdown
        marks), the matched words are marked on screen, and a search without hits says so."""

        history = History(tmp_path / "history.db")
        renamed = history.create_session("chat", "test-model")
        history.add_message(renamed, "user", "something else")
        history.rename_session(renamed, "Alpaca shearing")
        talked = history.create_session("chat", "test-model")
        asked = "tell me about the fibre of camelids, in some detail, with sources and examples"
        history.add_message(talked, "user", asked)
        history.add_message(
            talked, "assistant", "# Fibre\nThe **alpaca** gives `wool`, see [this](http://x)."
        )
        window, _ = chat_window(history=history)
        window.resize(900, 600)
        window.sidebar.search("alpaca")
        assert window.sidebar.session_ids() == [renamed, talked]
        rows = [window.sidebar.model.data(window.sidebar.model.index(r)) for r in range(2)]
        assert rows[0] == "Alpaca shearing"
        assert rows[1] == asked + "\nFibre The alpaca gives wool, see this."
        assert not window.sidebar.no_matches.isVisible()
        assert marked_html("<b>Alpaca</b> alpacas", "alpaca", "X") == (
            '&lt;b&gt;<span style="X">Alpaca</span>&lt;/b&gt; <span style="X">alpaca</span>s'
        )

        # Nothing is selected (a new chat is shown): any highlight colour is a marked word.
        highlight = window.sidebar.list_view.palette().color(QPalette.ColorRole.Highlight).rgb()

        def marked_pixels(row: int | None = None, *, below_title: bool = False) -> int:
            view = window.sidebar.list_view
            image = view.viewport().grab().toImage()
            area = view.viewport().rect()
            if row is not None:
                area = view.visualRect(window.sidebar.model.index(row))
            if below_title:
                area.setTop(area.top() + area.height() // 3)
            return sum(
                image.pixel(x, y) == highlight
                for x in range(area.left(), area.right(), 2)
                for y in range(area.top(), area.bottom())
            )

        assert highlighted_sessions(window) == []
        # The title hit is marked in its title, the other in its snippet's line.
        assert marked_pixels(0) > 0 and marked_pixels(1, below_title=True) > 0
        window.sidebar.search("")
        assert marked_pixels() == 0

        window.sidebar.search("zzyzx")
        assert window.sidebar.session_ids() == []
        assert window.sidebar.no_matches.isVisible()
        assert window.sidebar.no_matches.text() == "No matches"
        window.sidebar.search("")
        assert not window.sidebar.no_matches.isVisible()

    def test_chrome_window_title_follows_renames_and_edits_of_an_automatic_title(
        self, chat_window, qtbot
    ) -> None:
        """Renaming the open chat retitles the window at once; editing the first question
        renames a chat titled automatically, and no longer once the user renamed it."""
        window, history = chat_window()
        send_and_wait(qtbot, window, "Wher do llamas live")
        assert window.windowTitle() == "Wher do llamas live — llamachat"
        first = history.messages(window.session_id)[0]["id"]
        window.messages.edit_requested.emit(first)
        window.composer.set_text("Where do llamas live")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert window.windowTitle() == "Where do llamas live — llamachat"
        model = window.sidebar.model
        assert model.data(model.index(model.row_of(window.session_id))) == "Where do llamas live"

        assert model.setData(model.index(model.row_of(window.session_id)), "Llamas")
        assert window.windowTitle() == "Llamas — llamachat"
        first = history.messages(window.session_id)[0]["id"]
        window.messages.edit_requested.emit(first)
        window.composer.set_text("Where do alpacas live")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert window.windowTitle() == "Llamas — llamachat"
        window.sidebar.rename_session(window.session_id, "Camelids")
        assert window.windowTitle() == "Camelids — llamachat"

    @offscreen_dialogs
    def test_chrome_window_sidebar_highlights_the_shown_chat_whatever_happens(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """Deleting another chat, right-clicking one, or starting a new chat leaves the
        highlight on the chat shown (none for a new chat, so Delete deletes nothing)."""

        history = History(tmp_path / "history.db")
        ids = []
        for text in ("first", "second", "third", "fourth"):
            ids.append(history.create_session("chat", "test-model"))
            history.add_message(ids[-1], "user", text)
        window, _ = chat_window(history=history)
        click_session(qtbot, window, ids[1])
        assert window.session_id == ids[1] and highlighted_sessions(window) == [ids[1], ids[1]]

        window.sidebar.delete_session(ids[2])
        assert window.session_id == ids[1] and highlighted_sessions(window) == [ids[1], ids[1]]
        window.sidebar.delete_session(ids[0])
        assert highlighted_sessions(window) == [ids[1], ids[1]]

        view = window.sidebar.list_view
        menus: list[str] = []

        def close_menu() -> None:
            menu = QApplication.activePopupWidget()
            if menu is None:
                QTimer.singleShot(10, close_menu)
                return
            menus.append(type(menu).__name__)
            menu.close()

        close_menu()
        row = window.sidebar.model.row_of(ids[3])
        where = view.visualRect(window.sidebar.model.index(row)).center()
        # As the platform does it: the button press, then a context menu event.
        qtbot.mousePress(view.viewport(), Qt.MouseButton.RightButton, pos=where)
        QApplication.sendEvent(
            view.viewport(),
            QContextMenuEvent(
                QContextMenuEvent.Reason.Mouse, where, view.viewport().mapToGlobal(where)
            ),
        )
        qtbot.mouseRelease(view.viewport(), Qt.MouseButton.RightButton, pos=where)
        qtbot.waitUntil(lambda: menus == ["QMenu"])
        assert window.session_id == ids[1] and highlighted_sessions(window) == [ids[1], ids[1]]

        window.new_session()
        assert highlighted_sessions(window) == []
        view.setFocus()
        qtbot.keyClick(view, Qt.Key.Key_Delete)
        assert sorted(window.sidebar.session_ids()) == [ids[1], ids[3]]

    def test_chrome_window_delete_and_undo_in_the_sidebar(self, chat_window, router, qtbot) -> None:
        """Deleting the open chat starts a new one; Undo brings the chat back to the list."""

        window, history = chat_window()
        send_and_wait(qtbot, window, "keep me")
        kept = window.session_id
        window.new_session()
        send_and_wait(qtbot, window, "delete me")
        doomed = window.session_id
        assert window.sidebar.session_ids() == [doomed, kept]

        window.sidebar.list_view.setFocus()
        window.sidebar.list_view.setCurrentIndex(
            window.sidebar.model.index(window.sidebar.model.row_of(doomed))
        )
        qtbot.keyClick(window.sidebar.list_view, Qt.Key.Key_Delete)
        assert window.sidebar.session_ids() == [kept]
        assert window.session_id is None and window.messages.views() == []
        assert [s["id"] for s in history.list_sessions()] == [kept]
        assert "delete me" in window.sidebar.notice_text()

        qtbot.mouseClick(
            visible_widget_named(window, QPushButton, "Undo delete"), Qt.MouseButton.LeftButton
        )
        assert window.sidebar.session_ids() == [doomed, kept]
        click_session(qtbot, window, doomed)
        assert window.session_id == doomed
        assert window.messages.views()[0].content() == "delete me"

    def test_sidebar_search_finds_a_message_from_an_old_session(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = history_with_sessions(tmp_path)
        old = history.create_session("chat")
        history.add_message(old, "user", "Where does the quokka live?")
        history.add_message(old, "assistant", "The quokka lives on Rottnest Island.")
        for n in range(30):
            sid = history.create_session("chat")
            history.add_message(sid, "user", f"question number {n}")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.session_ids()[-1] == old and len(sidebar.session_ids()) == 31
        assert sidebar.search_field.accessibleName() == "Search sessions"
        assert sidebar.list_view.accessibleName() == "Sessions"
        assert sidebar.new_button.accessibleName() == "New chat"
        qtbot.keyClicks(sidebar.search_field, "rottnest")
        qtbot.waitUntil(lambda: sidebar.session_ids() == [old])
        shown = sidebar.model.data(sidebar.model.index(0))
        assert shown.startswith("Where does the quokka live?\n") and "Rottnest" in shown
        with qtbot.waitSignal(sidebar.session_activated) as opened:
            qtbot.mouseClick(
                sidebar.list_view.viewport(),
                Qt.MouseButton.LeftButton,
                pos=sidebar.list_view.visualRect(sidebar.model.index(0)).center(),
            )
        assert opened.args == [old]
        sidebar.search_field.clear()
        qtbot.waitUntil(lambda: len(sidebar.session_ids()) == 31)
        history.add_message(old, "user", "And what do quokkas eat?")
        sidebar.refresh()
        assert sidebar.session_ids()[0] == old
        with qtbot.waitSignal(sidebar.new_chat_requested):
            qtbot.mouseClick(sidebar.new_button, Qt.MouseButton.LeftButton)
        history.close()

    def test_sidebar_delete_hides_the_session_and_undo_brings_it_back(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = history_with_sessions(tmp_path)
        ids = []
        for text in ("first chat", "second chat", "third chat"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.set_current(ids[1])
        with qtbot.waitSignal(sidebar.session_deleted) as deleted:
            sidebar.delete_session(ids[1])
        assert deleted.args == [ids[1]]
        assert sidebar.session_ids() == [ids[2], ids[0]]
        assert [s["id"] for s in history.list_sessions()] == [ids[2], ids[0]]
        assert history.search("second") == []
        assert sidebar.notice_text() == "Deleted “second chat”."
        assert sidebar.undo_button.isVisibleTo(sidebar) and sidebar.current() is None
        qtbot.mouseClick(sidebar.undo_button, Qt.MouseButton.LeftButton)
        assert sidebar.session_ids() == [ids[2], ids[1], ids[0]]
        assert [s["id"] for s in history.search("second")] == [ids[1]]
        assert sidebar.notice_text() == ""
        history.close()

    def test_sidebar_renames_exports_and_imports_sessions(self, qtbot, tmp_path: Path) -> None:

        history = history_with_sessions(tmp_path)
        sid = history.create_session("chat", "qwen")
        history.add_message(sid, "user", "Name three rivers")
        history.add_message(sid, "assistant", "Nile, Amazon, Danube.", model="qwen")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.model.setData(sidebar.model.index(0), "Rivers") is True
        assert history.get_session(sid)["title"] == "Rivers"
        sidebar.export_session(sid, tmp_path / "rivers.md", "markdown")
        markdown = (tmp_path / "rivers.md").read_text(encoding="utf-8")
        assert markdown.startswith("# Rivers\n") and "Nile, Amazon, Danube." in markdown
        sidebar.export_session(sid, tmp_path / "rivers.json", "json")
        new_id = sidebar.import_file(tmp_path / "rivers.json")
        assert new_id != sid and sidebar.session_ids()[:2] in ([new_id, sid], [sid, new_id])
        assert [m["content"] for m in history.messages(new_id)] == [
            "Name three rivers",
            "Nile, Amazon, Danube.",
        ]
        (tmp_path / "bad.json").write_text(json.dumps({"format": "something else"}))
        with pytest.raises(HistoryError, match="not a llamachat session"):
            sidebar.import_file(tmp_path / "bad.json")
        (tmp_path / "garbage.json").write_text("{not json")
        with pytest.raises(HistoryError, match="garbage.json: it is not JSON"):
            sidebar.import_file(tmp_path / "garbage.json")
        with pytest.raises(HistoryError, match="cannot write"):
            sidebar.export_session(sid, tmp_path / "missing" / "x.md", "markdown")
        assert history.count_sessions() == 2
        history.close()

    def test_sidebar_pins_a_chat_to_the_top_from_its_menu(self, qtbot, tmp_path: Path) -> None:

        history = history_with_sessions(tmp_path)
        ids = []
        for text in ("oldest", "middle", "newest"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.session_ids() == [ids[2], ids[1], ids[0]]
        menu = sidebar.session_menu(ids[0])
        pin = next(a for a in menu.actions() if a.text() == "Pin to top")
        pin.trigger()
        menu.close()
        assert sidebar.session_ids() == [ids[0], ids[2], ids[1]]
        row = sidebar.model.index(0)
        assert row.data(Qt.ItemDataRole.DecorationRole) is not None
        assert "Pinned" in row.data(Qt.ItemDataRole.ToolTipRole)
        assert sidebar.model.index(1).data(Qt.ItemDataRole.DecorationRole) is None
        # A newer message elsewhere does not move a chat above the pinned one.
        history.add_message(ids[1], "user", "still below")
        sidebar.refresh()
        assert sidebar.session_ids() == [ids[0], ids[1], ids[2]]
        menu = sidebar.session_menu(ids[0])
        next(a for a in menu.actions() if a.text() == "Unpin").trigger()
        menu.close()
        assert sidebar.session_ids() == [ids[1], ids[2], ids[0]]
        history.close()

    def test_after_the_new_project_dialog_the_window_takes_its_keys_again(
        self, qtbot, chat_window
    ) -> None:
        """After ⋯ > New project… the window is active again: Ctrl+K reaches the search field
        without a click on the window."""
        from PySide6.QtCore import Qt, QTimer
        from PySide6.QtWidgets import QApplication, QInputDialog, QToolButton

        def answer() -> None:  # the name asked, then OK, once the dialog is up
            dialog = QApplication.activeModalWidget()
            if not isinstance(dialog, QInputDialog):
                QTimer.singleShot(20, answer)
                return
            dialog.setTextValue("Work")
            dialog.accept()

        window, history = chat_window(listed=False)
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow)
        more = next(
            b
            for b in window.sidebar.findChildren(QToolButton)
            if b.accessibleName() == "More session actions"
        )
        action = next(a for a in more.menu().actions() if a.text() == "New project…")
        QTimer.singleShot(0, answer)
        action.trigger()
        assert [p["name"] for p in history.projects.listed()] == ["Work"]
        qtbot.waitUntil(window.isActiveWindow)
        assert QApplication.focusWidget() is window.composer.editor
        qtbot.keyClick(
            QApplication.focusWidget(), Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier
        )
        assert window.sidebar.search_field.hasFocus()


class TestSidebarExportFaults:
    """An export on a disk that fills."""

    def test_an_export_that_fails_part_way_leaves_no_file_or_the_old_one(
        self, qtbot, tmp_path, file_size_limit
    ) -> None:
        """Export (and the quit dialog's Save as, the same writer) on a disk that fills:
        a HistoryError saying so, and no 0-byte or cut file left (issue 37, item 11)."""
        history = History(tmp_path / "h.db")
        chat = history.create_session("chat", "m", title="Long")
        history.add_message(chat, "user", "word " * 400_000)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        old = tmp_path / "old.md"
        old.write_text("the old export", encoding="utf-8")
        file_size_limit(1_000_000)
        for target in (tmp_path / "new.md", old):
            with pytest.raises(HistoryError, match="cannot write"):
                sidebar.export_session(chat, target, "markdown")
        assert not (tmp_path / "new.md").exists()
        assert old.read_text(encoding="utf-8") == "the old export"
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
        history.close()
