"""The tests of `llamachat.ui.views.session_filter`."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from PySide6.QtCore import Qt

from llamachat.history.search import SearchFilter
from llamachat.tests.support import history_with_sessions
from llamachat.ui.views.sidebar import SessionSidebar


class TestSessionFilter:
    """The sidebar's search filters: a project, a model or a date, shown flat."""

    def test_sidebar_filter_keeps_a_project_model_or_date_flat_says_so_and_clears(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The funnel's menu filters the list and the search by project, model and last
        update; the chats show flat, a bar says the filter as plain text, Clear ends it."""

        history = history_with_sessions(tmp_path)
        lab = history.projects.create("R&D <b>lab</b>")
        history.projects.create("Finances")
        wool = history.create_session("chat", "qwen", project_id=lab)
        history.add_message(wool, "user", "alpaca wool")
        history.add_message(wool, "assistant", "sure", model="<i>evil&model</i>")
        farm = history.create_session("chat", "gemma")
        history.add_message(farm, "user", "alpaca farm")
        tax = history.create_session("chat", "qwen")
        history.add_message(tax, "user", "tax")
        with sqlite3.connect(history.path) as conn:
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86400, tax)
            )
        conn.close()
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.resize(280, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        filters = sidebar.filters
        assert filters.button.accessibleName() == "Filter chats"
        assert not filters.bar.isVisible() and sidebar.model.rowCount() == 5
        sidebar.activateWindow()
        sidebar.search_field.setFocus()
        qtbot.waitUntil(sidebar.search_field.hasFocus)
        qtbot.keyClick(sidebar.search_field, Qt.Key.Key_Tab)
        assert filters.button.hasFocus()  # the next stop after the search field

        def choose(title: str, text: str) -> None:
            filters.menu.aboutToShow.emit()
            submenu = next(a.menu() for a in filters.menu.actions() if a.text().startswith(title))
            next(a for a in submenu.actions() if a.text() == text).trigger()

        filters.menu.aboutToShow.emit()
        projects = next(a.menu() for a in filters.menu.actions() if a.text() == "Project")
        assert [a.text() for a in projects.actions() if a.text()] == [
            "Any project",
            "No project",
            "Finances",
            "R&&D <b>lab</b>",
        ]
        choose("Project", "R&&D <b>lab</b>")
        assert sidebar.session_ids() == [wool] and sidebar.model.rowCount() == 1
        assert filters.bar.isVisible()
        assert filters.label.text() == "Project R&D <b>lab</b>"
        assert filters.label.textFormat() == Qt.TextFormat.PlainText
        facts = sidebar.model.index(0).data(Qt.ItemDataRole.AccessibleDescriptionRole)
        assert facts.endswith(" · Project R&D <b>lab</b>")  # flat: which project it is in
        choose("Model", "<i>evil&&model</i>")
        assert filters.label.text() == "Project R&D <b>lab</b> · Model <i>evil&model</i>"
        filters.menu.aboutToShow.emit()
        assert [a.text() for a in filters.menu.actions()][:2] == [
            "Project: R&&D <b>lab</b>",
            "Model: <i>evil&&model</i>",
        ]
        # A search keeps to the filter; a filter matching nothing says so.
        sidebar.search("alpaca")
        assert sidebar.session_ids() == [wool]
        sidebar.search("")
        choose("Project", "No project")
        assert sidebar.session_ids() == [] and sidebar.no_matches.isVisible()
        choose("Model", "Any model")
        assert sidebar.session_ids() == [farm, tax]
        choose("Last updated", "Last 30 days")
        assert sidebar.session_ids() == [farm]
        assert filters.label.text() == "No project · Last 30 days"
        qtbot.mouseClick(filters.clear_button, Qt.MouseButton.LeftButton)
        assert not filters.bar.isVisible() and filters.current() == SearchFilter()
        assert sidebar.model.index(0).data() == "▾ Finances" and sidebar.model.rowCount() == 5
        history.close()
