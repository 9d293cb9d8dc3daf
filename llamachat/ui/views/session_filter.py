"""The sidebar's search filters: a funnel button beside the search field whose menu keeps
the list and the search to a project (or the chats in none), a model, a time of last
update, or the quick questions (kept, but not among the chats); and, under the field
while a filter is on, a bar saying what it keeps, with Clear.

`SessionFilters` owns both widgets (`button`, `bar`); the sidebar lays them out and
passes `changed` on to `SessionListModel.set_filter`. Project and model names are
outside text: menus get them with `&` doubled (not a mnemonic), the bar as plain text.
GUI thread only; History's errors pass through (the menu reads projects and models as it opens).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from PySide6.QtCore import QObject, QPointF, Qt, Signal
from PySide6.QtGui import QActionGroup, QIcon, QPainter, QPalette, QPixmap, QPolygonF
from PySide6.QtWidgets import QApplication, QFrame, QHBoxLayout, QMenu, QToolButton, QWidget

from llamachat.history.search import NO_FILTER, SPANS, SearchFilter
from llamachat.history.store import History
from llamachat.ui import plain
from llamachat.ui.chat.state import ONESHOT

# A longer model or project name is cut in the middle in the menu and the bar.
NAME_CHARS = 48


def short(name: str) -> str:
    """`name` on one line, at most NAME_CHARS characters (cut in the middle)."""
    name = " ".join(name.split())
    if len(name) <= NAME_CHARS:
        return name
    half = (NAME_CHARS - 1) // 2
    return name[:half] + "…" + name[-half:]


def menu_text(name: str) -> str:
    """Outside `name` as a menu item's text: its "&" shown, not taken for a mnemonic."""
    return short(name).replace("&", "&&")


@functools.cache
def funnel_icon(active: bool) -> QIcon:
    """A drawn funnel: outlined, or filled in the highlight colour while a filter is on."""
    pixmap = QPixmap(16, 16)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    palette = QApplication.palette()
    color = palette.color(QPalette.ColorRole.Highlight if active else QPalette.ColorRole.WindowText)
    painter.setPen(color)
    if active:
        painter.setBrush(color)
    points = [(1.5, 2.5), (14.5, 2.5), (9.5, 8.5), (9.5, 14), (6.5, 12.5), (6.5, 8.5)]
    painter.drawPolygon(QPolygonF([QPointF(x, y) for x, y in points]))
    painter.end()
    return QIcon(pixmap)


class SessionFilters(QObject):
    """The filter button and the bar that says which filter is on."""

    changed = Signal(object)  # the SearchFilter now on

    def __init__(self, history: History, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._history = history
        self._filter = NO_FILTER
        self.button = QToolButton()
        self.button.setAccessibleName("Filter chats")
        self.button.setText("Filter")
        self.button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.button)
        self.menu.aboutToShow.connect(self._fill_menu)
        self.button.setMenu(self.menu)

        self.label = plain.Label()
        self.label.setWordWrap(True)
        self.label.setAccessibleName("Filters on")
        self.clear_button = QToolButton()
        self.clear_button.setText("Clear")
        self.clear_button.setAccessibleName("Clear filters")
        self.clear_button.setToolTip("Show every chat again")
        self.clear_button.clicked.connect(self.clear)
        self.bar = QFrame()
        self.bar.setFrameShape(QFrame.Shape.StyledPanel)
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(6, 2, 2, 2)
        row.addWidget(self.label, 1)
        row.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignTop)
        self._show()

    def current(self) -> SearchFilter:
        """The filter on (NO_FILTER: none)."""
        return self._filter

    def set_filter(self, search_filter: SearchFilter) -> None:
        """Put `search_filter` on, show it, and say so through `changed` when it is new."""
        if search_filter == self._filter:
            return
        self._filter = search_filter
        self._show()
        self.changed.emit(search_filter)

    def clear(self) -> None:
        """Take every filter off."""
        self.set_filter(NO_FILTER)
        self.button.setFocus(Qt.FocusReason.OtherFocusReason)

    def describe(self) -> str:
        """What the filter on keeps, in words ('' when none is on)."""
        parts = []
        project = self._filter.project
        if project is None:
            parts.append("No project")
        elif project != "any":
            found = self._history.projects.get(project)
            parts.append(f"Project {short(found['name'])}" if found else "A deleted project")
        if self._filter.model:
            parts.append(f"Model {short(self._filter.model)}")
        if self._filter.updated != "any":
            parts.append(SPANS[self._filter.updated])
        if self._filter.mode == ONESHOT:
            parts.insert(0, "Quick questions")
        return " · ".join(parts)

    def _show(self) -> None:
        text = self.describe()
        plain.set_text(self.label, text)
        self.bar.setVisible(bool(text))
        self.button.setIcon(funnel_icon(bool(text)))
        self.button.setAccessibleDescription(f"On: {text}" if text else "No filter on")
        self.button.setToolTip(
            plain.tooltip(
                f"Filtered: {text}"
                if text
                else "Filter by project, model or date, or list the quick questions"
            )
        )

    def _fill_menu(self) -> None:
        """The menu as the history is now: its projects and models, the current choices checked."""
        self.menu.clear()
        projects = [(menu_text(p["name"]), p["id"]) for p in self._history.projects.listed()]
        self._choices(
            "Project", "project", [("Any project", "any"), ("No project", None)], projects
        )
        models = self._history.models()
        if self._filter.model and self._filter.model not in models:
            models.append(self._filter.model)  # its chats were deleted meanwhile
        self._choices("Model", "model", [("Any model", "")], [(menu_text(m), m) for m in models])
        self._choices("Last updated", "updated", [(text, key) for key, text in SPANS.items()], [])
        # The quick window's questions are kept but not among the chats: listed here.
        quick = self.menu.addAction("Quick questions")
        quick.setCheckable(True)
        quick.setChecked(self._filter.mode == ONESHOT)
        quick.triggered.connect(lambda on: self._choose("mode", ONESHOT if on else ""))
        self.menu.addSeparator()
        clear = self.menu.addAction("Clear filters", self.clear)
        clear.setEnabled(self._filter.active)

    def _choices(
        self, title: str, part: str, fixed: list[tuple[str, Any]], named: list[tuple[str, Any]]
    ) -> None:
        """A submenu choosing the filter's `part`: the `fixed` choices, then the `named`
        ones (a project, a model), the current one checked."""
        current = getattr(self._filter, part)
        chosen = next((text for text, value in named + fixed[1:] if value == current), "")
        # The title says the choice made, so the menu shows the whole filter at a glance.
        submenu = self.menu.addMenu(f"{title}: {chosen}" if chosen else title)
        group = QActionGroup(submenu)
        for text, value in fixed + named:
            if named and (text, value) == named[0]:
                submenu.addSeparator()
            action = submenu.addAction(text)
            action.setCheckable(True)
            action.setChecked(value == current)
            action.triggered.connect(lambda _on=False, p=part, v=value: self._choose(p, v))
            group.addAction(action)

    def _choose(self, part: str, value: Any) -> None:
        self.set_filter(dataclasses.replace(self._filter, **{part: value}))
