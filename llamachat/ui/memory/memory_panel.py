"""The Memory panel: every memory, by scope, to search, add, edit, pin and delete.

What people dislike in other apps' memory is not knowing what the model remembers, or
why: the panel lists every memory with its scope (everywhere, or a project), who kept
it (you or the model) and what this chat's requests do with it ("sent in this chat",
"left out: over memory_tokens", "not in this chat's scope"). The chat's own switch is
here, and a line says when memory is off and why. A memory's text is outside text (a
model may have written it): it is shown only in item views and line edits, which never
interpret it. Raises nothing: History's refusals are shown in the panel's own line.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llamachat.history.memories import MAX_CHARS
from llamachat.history.store import History, HistoryError
from llamachat.ui import plain
from llamachat.ui.chat.conversation import Conversation

EVERYWHERE = "Everywhere"
_ID = Qt.ItemDataRole.UserRole


class MemoryPanel(QDialog):
    """Lists and edits the memories of one History, seen from one chat."""

    turn_on_requested = Signal()  # "Turn memory on" (memory_enabled is false)

    def __init__(
        self,
        history: History,
        chat: Conversation,
        *,
        enabled: Callable[[], bool],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Memory")
        self.resize(720, 480)
        self._history = history
        self._chat = chat
        self._enabled = enabled

        self.state_line = plain.Label("")
        self.state_line.setWordWrap(True)
        self.turn_on = QPushButton("Turn memory on")
        self.turn_on.clicked.connect(self.turn_on_requested)
        self.chat_switch = QCheckBox("Use memory in this chat")
        self.chat_switch.setToolTip(
            plain.tooltip(
                "Off: this chat's requests carry no memory and the model keeps none. "
                "Saved with the chat."
            )
        )
        self.chat_switch.toggled.connect(self._on_switch)
        state_row = QHBoxLayout()
        state_row.addWidget(self.state_line, 1)
        state_row.addWidget(self.turn_on)
        state_row.addWidget(self.chat_switch)

        self.new_text = QLineEdit()
        self.new_text.setPlaceholderText("A short fact to remember, e.g. I use metric units")
        self.new_text.setMaxLength(MAX_CHARS)
        self.new_text.setAccessibleName("New memory")
        self.new_text.returnPressed.connect(self.add)
        self.scope = QComboBox()
        self.scope.setAccessibleName("Scope")
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add)
        add_row = QHBoxLayout()
        add_row.addWidget(self.new_text, 1)
        add_row.addWidget(self.scope)
        add_row.addWidget(self.add_button)

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search memories")
        self.search.setAccessibleName("Search memories")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter)

        self.tree = QTreeWidget()
        self.tree.setAccessibleName("Memories")
        self.tree.setHeaderLabels(["Memory", "Pinned", "Kept by", "In this chat"])
        self.tree.setRootIsDecorated(True)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        self.tree.itemChanged.connect(self._on_item_changed)
        self.tree.itemSelectionChanged.connect(self._update_buttons)

        self.pin_button = QPushButton("Pin")
        self.pin_button.setToolTip(
            plain.tooltip("Pinned memories are sent first, whatever the budget.")
        )
        self.pin_button.clicked.connect(self.toggle_pin)
        self.edit_button = QPushButton("Edit")
        self.edit_button.clicked.connect(self._edit_selected)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        self.problem = plain.Label("")
        self.problem.setWordWrap(True)
        self.summary = plain.Label("")
        buttons = QHBoxLayout()
        buttons.addWidget(self.summary, 1)
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.pin_button)
        buttons.addWidget(self.delete_button)

        layout = QVBoxLayout(self)
        layout.addLayout(state_row)
        layout.addLayout(add_row)
        layout.addWidget(self.search)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.problem)
        layout.addLayout(buttons)
        chat.memory.changed.connect(self.update_view)
        chat.memory.used.connect(self.update_view)
        self.update_view()

    # ------------------------------------------------------------------ showing

    @Slot()
    def update_view(self) -> None:
        """List the memories again (after any change, here or by the model)."""
        chat, state = self._chat, self._chat.state
        on, temporary = self._enabled(), state.temporary
        if temporary:
            text = "A temporary chat reads and writes no memory."
        elif not on:
            text = "Memory is off (memory_enabled in the configuration): nothing is sent or kept."
        elif not state.memory_on:
            text = "Memory is off in this chat: its requests carry none and the model keeps none."
        else:
            text = "Memories in this chat's scope go into its system prompt."
        self.state_line.setText(text)
        self.turn_on.setVisible(not on)
        self.chat_switch.blockSignals(True)
        self.chat_switch.setChecked(state.memory_on)
        self.chat_switch.blockSignals(False)
        self.chat_switch.setEnabled(on and not temporary)
        self.new_text.setEnabled(not temporary)
        self.add_button.setEnabled(not temporary)

        try:
            projects = {p["id"]: p["name"] for p in self._history.projects.listed()}
            rows = self._history.memories.listed(every=True)
        except HistoryError as exc:
            self.problem.setText(f"The memories could not be read: {exc}")
            return
        project_id = chat.builder.project_id()
        self._fill_scopes(projects, project_id)
        selected = self.selected_id()
        choice = chat.builder.memory_choice(chat.model)
        sent = {m["id"] for m in choice.kept}
        left = {m["id"] for m in choice.left_out}
        used = set(chat.memory.used_in(chat.session_id))
        self.tree.blockSignals(True)
        self.tree.clear()
        groups: dict[int | None, QTreeWidgetItem] = {}
        for scope_id, name in [(None, EVERYWHERE), *sorted(projects.items(), key=lambda p: p[1])]:
            group = QTreeWidgetItem([name if scope_id is None else f"Project {name}"])
            group.setFlags(Qt.ItemFlag.ItemIsEnabled)
            groups[scope_id] = group
        for row in rows:
            in_scope = row["project_id"] is None or row["project_id"] == project_id
            item = QTreeWidgetItem(
                [
                    row["text"],
                    "pinned" if row["pinned"] else "",
                    "the model" if row["author"] == "model" else "you",
                    _in_chat(row["id"], in_scope, sent, left, used),
                ]
            )
            item.setData(0, _ID, row["id"])
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            groups.get(row["project_id"], groups[None]).addChild(item)
        for group in groups.values():
            if group.childCount():
                self.tree.addTopLevelItem(group)
                group.setExpanded(True)
        if selected is not None:
            self.select(selected)  # once in the tree: an item outside it cannot be selected
        self.tree.blockSignals(False)
        for column in (1, 2, 3):
            self.tree.resizeColumnToContents(column)
        count = len(rows)
        summary = f"{count} memor{'y' if count == 1 else 'ies'}"
        if left:
            summary += f"; {len(left)} left out of this chat's prompt (over memory_tokens)"
        self.summary.setText(summary)
        self._filter(self.search.text())
        self._update_buttons()

    def _fill_scopes(self, projects: dict[int, str], project_id: int | None) -> None:
        self.scope.blockSignals(True)
        self.scope.clear()
        self.scope.addItem(EVERYWHERE, None)
        for pid, name in sorted(projects.items(), key=lambda p: p[1]):
            self.scope.addItem(f"Project {name}", pid)
        # A memory added here goes where the chat's would: its project's, else everywhere.
        at = self.scope.findData(project_id) if project_id is not None else 0
        self.scope.setCurrentIndex(max(at, 0))
        self.scope.blockSignals(False)

    def _groups(self) -> list[QTreeWidgetItem]:
        top = (self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount()))
        return [group for group in top if group is not None]

    def items(self) -> list[QTreeWidgetItem]:
        """Every memory's row, in the order shown."""
        return [item for group in self._groups() for item in _children(group)]

    def rows_text(self) -> list[tuple[str, ...]]:
        """What the list shows of each memory the search does not hide: text, pinned, kept
        by, in this chat."""
        return [
            tuple(item.text(column) for column in range(4))
            for item in self.items()
            if not item.isHidden()
        ]

    def selected_id(self) -> int | None:
        """The selected memory's id (None: none selected)."""
        for item in self.tree.selectedItems():
            memory_id = item.data(0, _ID)
            if isinstance(memory_id, int):
                return memory_id
        return None

    def select(self, memory_id: int) -> None:
        """Select the memory `memory_id`."""
        for item in self.items():
            item.setSelected(item.data(0, _ID) == memory_id)

    # ------------------------------------------------------------------ changes

    @Slot()
    def add(self) -> int | None:
        """Keep the typed fact in the chosen scope; its id (None: refused, the panel says why)."""
        text = self.new_text.text()
        if not text.strip():
            return None
        project_id = self.scope.currentData()
        try:
            memory_id = self._history.memories.add(
                text, project_id=project_id, session_id=self._chat.session_id
            )
        except HistoryError as exc:
            self.problem.setText(f"Not remembered: {exc}")
            return None
        self.problem.setText("")
        self.new_text.clear()
        self._chat.memory.changed.emit()
        self.select(memory_id)
        return memory_id

    def prefill(self, text: str) -> None:
        """Put `text` (a message's, to be shortened into a fact) in the new memory's line."""
        self.new_text.setText(" ".join(text.split())[:MAX_CHARS])
        self.new_text.setFocus()
        self.new_text.selectAll()

    @Slot()
    def toggle_pin(self) -> None:
        """Pin the selected memory, or unpin it."""
        memory_id = self.selected_id()
        row = self._history.memories.get(memory_id) if memory_id is not None else None
        if row is not None:
            self._change(row["id"], pinned=not row["pinned"])

    @Slot()
    def delete_selected(self) -> None:
        """Forget the selected memory."""
        memory_id = self.selected_id()
        if memory_id is not None:
            self._chat.memory.forget(memory_id)

    def edit(self, memory_id: int, text: str) -> None:
        """Change a memory's text."""
        self._change(memory_id, text=text)

    def _change(self, memory_id: int, **changes: object) -> None:
        try:
            self._history.memories.update(memory_id, **changes)
        except HistoryError as exc:
            self.problem.setText(f"Not changed: {exc}")
            self.update_view()
            return
        self.problem.setText("")
        self._chat.memory.changed.emit()

    @Slot()
    def _edit_selected(self) -> None:
        for item in self.tree.selectedItems():
            if isinstance(item.data(0, _ID), int):
                self.tree.editItem(item, 0)

    @Slot(QTreeWidgetItem, int)
    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        memory_id = item.data(0, _ID)
        if column == 0 and isinstance(memory_id, int):
            row = self._history.memories.get(memory_id)
            if row is not None and item.text(0) != row["text"]:
                self.edit(memory_id, item.text(0))

    @Slot(bool)
    def _on_switch(self, on: bool) -> None:
        self._chat.memory.set_on(on)
        self.update_view()

    @Slot(str)
    def _filter(self, text: str) -> None:
        words = text.casefold().split()
        for group in self._groups():
            shown = 0
            for item in _children(group):
                hidden = not all(word in item.text(0).casefold() for word in words)
                item.setHidden(hidden)
                shown += not hidden
            group.setHidden(shown == 0)

    @Slot()
    def _update_buttons(self) -> None:
        memory_id = self.selected_id()
        row = self._history.memories.get(memory_id) if memory_id is not None else None
        for button in (self.edit_button, self.pin_button, self.delete_button):
            button.setEnabled(row is not None)
        self.pin_button.setText("Unpin" if row is not None and row["pinned"] else "Pin")


def _children(group: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    children = (group.child(i) for i in range(group.childCount()))
    return [item for item in children if item is not None]


def _in_chat(memory_id: int, in_scope: bool, sent: set, left: set, used: set) -> str:
    """What this chat's requests do with a memory, in words."""
    if not in_scope:
        return "not in this chat's scope"
    if memory_id in left:
        return "left out: over memory_tokens"
    if memory_id in used:
        return "sent in this chat"
    if memory_id in sent:
        return "sent with the next message"
    return ""
