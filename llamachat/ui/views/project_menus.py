"""Projects in the sidebar: the menus of a project's header and of a chat's "Move to
project", and the dialog that edits a project's name, instructions and defaults.

A project's instructions join the system message of every chat in it (`turn.system_parts`).
Its defaults are what a new chat in it starts with: a system prompt preset, a model,
skills loaded at its start, request parameters (`params_panel.ParamsPanel`). Its files
are libraries, files and folders searched by each of its chats (added and removed at once,
not on OK; deleting the project forgets them).
`ProjectChoices` is what the dialog offers (the window's presets, models and skills).
History's errors reach the caller (the sidebar says them in its notice bar).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llamachat import outside
from llamachat.history.store import History, ProjectRow
from llamachat.ui import plain
from llamachat.ui.library.host import LibraryHost
from llamachat.ui.views.params_panel import ParamsPanel

# The sidebar's way to run a menu's action: errors said, the list shown again after.
_Act = Callable[[Callable[[], object]], None]


@dataclass(frozen=True)
class ProjectChoices:
    """What a project's defaults can be chosen from."""

    presets: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)


class ProjectDialog(QDialog):
    """A project's name and the defaults of a new chat in it."""

    def __init__(
        self,
        project: ProjectRow,
        choices: ProjectChoices,
        parent: QWidget | None = None,
        libraries: LibraryHost | None = None,
    ) -> None:
        super().__init__(parent)
        self._project_id = project["id"]
        self._libraries = libraries
        self.setWindowTitle(f"Project {project['name']}")
        self.name = QLineEdit(project["name"])
        self.name.setAccessibleName("Project name")
        self.instructions = QPlainTextEdit(project["instructions"])
        self.instructions.setAccessibleName("Instructions")
        self.instructions.setPlaceholderText(
            "What every chat in this project should know or do, e.g. “Answer in French.” "
            "or “The code is Python 3.11.”"
        )
        self.instructions.setTabChangesFocus(True)
        self.instructions.setMaximumHeight(110)
        self.preset = _combo(
            [""] + choices.presets, project["prompt_name"], "(the one picked in the top bar)"
        )
        self.preset.setAccessibleName("System prompt preset")
        self.preset.setToolTip("The prompt preset a new chat in this project starts with.")
        self.model = _combo([""] + choices.models, project["model"], "(the default model)")
        self.model.setAccessibleName("Model")
        self.skills = QLineEdit(", ".join(project["skills"]))
        self.skills.setAccessibleName("Skills")
        known = ", ".join(choices.skills) or "none found"
        self.skills.setPlaceholderText("skill names, separated by commas")
        self.skills.setToolTip(
            plain.tooltip(f"Loaded at the start of each new chat. Skills: {known}")
        )
        self.params = ParamsPanel()
        self.params.reset_button.hide()
        self.params.show_values(project["params"], {})
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Instructions", self.instructions)
        if libraries is not None:
            form.addRow("Files", self._libraries_row(libraries))
        defaults = plain.Label("A new chat in this project starts with:")
        form.addRow(defaults)
        form.addRow("Prompt preset", self.preset)
        form.addRow("Model", self.model)
        form.addRow("Skills", self.skills)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.params)
        layout.addWidget(buttons)

    def _libraries_row(self, libraries: LibraryHost) -> QWidget:
        """The project's files and folders, with Add files…, Add folder… and Remove."""
        self.folders = QListWidget()
        self.folders.setAccessibleName("Project libraries")
        self.folders.setToolTip(
            "Files and folders each chat of this project searches (read, not pasted whole)."
        )
        self.folders.setMaximumHeight(90)
        self.add_files_button = QPushButton("Add files…")
        self.add_files_button.clicked.connect(self.choose_files)
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.clicked.connect(self.choose_folder)
        self.remove_folder_button = QPushButton("Remove")
        self.remove_folder_button.clicked.connect(self.remove_folder)
        buttons = QVBoxLayout()
        buttons.addWidget(self.add_files_button)
        buttons.addWidget(self.add_folder_button)
        buttons.addWidget(self.remove_folder_button)
        buttons.addStretch(1)
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.folders, 1)
        row.addLayout(buttons)
        libraries.changed.connect(self.show_folders)
        self.show_folders()
        return box

    @Slot()
    def show_folders(self) -> None:
        """List the project's libraries again (a QListWidget's text is plain)."""
        assert self._libraries is not None
        self.folders.clear()
        for row in self._libraries.libraries(project_id=self._project_id):
            item = QListWidgetItem(outside.shown(row.root))
            item.setData(Qt.ItemDataRole.UserRole, row.id)
            self.folders.addItem(item)
        self.remove_folder_button.setEnabled(self.folders.count() > 0)

    @Slot()
    def choose_folder(self) -> None:
        """Ask for a folder and attach it to the project (indexed in the background)."""
        folder = QFileDialog.getExistingDirectory(self, "Add folder to project", str(Path.home()))
        if folder and self._libraries is not None:
            self._libraries.attach_to_project(self._project_id, Path(folder))

    @Slot()
    def choose_files(self) -> None:
        """Ask for files and attach each to the project (indexed in the background)."""
        files, _ = QFileDialog.getOpenFileNames(self, "Add files to project", str(Path.home()))
        if self._libraries is not None:
            for file in files:
                self._libraries.attach_to_project(self._project_id, Path(file))

    @Slot()
    def remove_folder(self) -> None:
        """Forget the chosen folder (or the first) as the project's library."""
        item = self.folders.currentItem() or self.folders.item(0)
        if item is not None and self._libraries is not None:
            self._libraries.remove(int(item.data(Qt.ItemDataRole.UserRole)))

    def changes(self) -> dict:
        """The project's fields as the dialog shows them (for `Projects.update`)."""
        return {
            "name": self.name.text(),
            "instructions": self.instructions.toPlainText(),
            "prompt_name": str(self.preset.currentData() or ""),
            "model": str(self.model.currentData() or ""),
            "skills": [name.strip() for name in self.skills.text().split(",") if name.strip()],
            "params": self.params.values(),
        }


def _combo(values: list[str], current: str, blank: str) -> QComboBox:
    """A list of `values` ('' shown as `blank`) with `current` chosen."""
    combo = QComboBox()
    for value in dict.fromkeys([*values, current]):
        combo.addItem(value or blank, value)
    combo.setCurrentIndex(max(combo.findData(current), 0))
    return combo


def _mover(
    history: History, session_id: int, project_id: int | None, act: _Act
) -> Callable[[], None]:
    return lambda: act(lambda: history.projects.move(session_id, project_id))


def new_project(parent: QWidget, history: History) -> int | None:
    """Ask for a name and make a project of it; its id (None: cancelled)."""
    name, ok = QInputDialog.getText(parent, "New project", "Project name:")
    if not ok or not name.strip():
        return None
    return history.projects.create(name)


def move_menu(
    menu: QMenu,
    history: History,
    session_id: int,
    current: int | None,
    act: _Act,
) -> QMenu:
    """Add to `menu` the "Move to project" submenu of a chat in project `current`; it."""
    moves = menu.addMenu("Move to project")
    for project in history.projects.listed():
        if project["id"] != current:
            # A name is the user's text, not a mnemonic: "R&D" shows its "&".
            moves.addAction(
                project["name"].replace("&", "&&"), _mover(history, session_id, project["id"], act)
            )
    moves.addSeparator()

    def into_new() -> None:
        project_id = new_project(menu.parentWidget() or menu, history)
        if project_id is not None:
            history.projects.move(session_id, project_id)

    moves.addAction("New project…", lambda: act(into_new))
    if current is not None:
        moves.addAction("Out of the project", _mover(history, session_id, None, act))
    return moves


def project_menu(
    parent: QWidget,
    new_chat: Callable[[], object],
    edit: Callable[[], object],
    delete: Callable[[], object],
) -> QMenu:
    """The menu of a project's header: a new chat in it, edit it, delete it."""
    menu = QMenu(parent)
    menu.addAction("New chat in this project", new_chat)
    menu.addAction("Edit project…", edit)
    menu.addAction("Delete project…", delete)
    return menu


def confirm_delete(parent: QWidget, project: ProjectRow, chats: int) -> bool:
    """Ask whether to delete `project` (its `chats` stay, in no project)."""
    held = {0: "It holds no chat.", 1: "Its chat stays, in no project."}.get(
        chats, f"Its {chats} chats stay, in no project."
    )
    box = QMessageBox(
        QMessageBox.Icon.Question,
        "Delete project",
        "",
        QMessageBox.StandardButton.Cancel,
        parent,
    )
    box.setTextFormat(Qt.TextFormat.PlainText)  # the name is the user's text
    box.setText(
        f"Delete the project “{project['name']}”? {held} Its instructions, defaults and "
        "files list go with it (the files themselves stay)."
    )
    delete = box.addButton("Delete project", QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is delete


def edit_project(
    parent: QWidget,
    history: History,
    project_id: int,
    choices: ProjectChoices,
    act: _Act,
    libraries: LibraryHost | None = None,
) -> ProjectDialog | None:
    """Open the dialog of a project's name, defaults and libraries (OK saves the name and
    defaults through `act`)."""
    project = history.projects.get(project_id)
    if project is None:
        return None
    dialog = ProjectDialog(project, choices, parent, libraries)
    dialog.accepted.connect(
        lambda: act(lambda: history.projects.update(project_id, **dialog.changes()))
    )
    dialog.finished.connect(dialog.deleteLater)
    dialog.open()
    return dialog
