"""Projects in the sidebar: the menus of a project's header and of a chat's "Move to
project", and the dialog that edits a project's name and defaults.

A project's defaults are what a new chat in it starts with: a system prompt preset, a
model, skills loaded at its start, request parameters (`params_panel.ParamsPanel`).
`ProjectChoices` is what the dialog offers (the window's presets, models and skills).
History's errors reach the caller (the sidebar says them in its notice bar).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QInputDialog,
    QLineEdit,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from llamachat.history.store import History, ProjectRow
from llamachat.ui import plain
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
        self, project: ProjectRow, choices: ProjectChoices, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Project {project['name']}")
        self.name = QLineEdit(project["name"])
        self.name.setAccessibleName("Project name")
        self.preset = _combo([""] + choices.presets, project["prompt_name"], "(the chat's)")
        self.preset.setAccessibleName("System prompt preset")
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
        form.addRow("System prompt", self.preset)
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

    def changes(self) -> dict:
        """The project's fields as the dialog shows them (for `Projects.update`)."""
        return {
            "name": self.name.text(),
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
    history: History,
    project_id: int,
    new_chat: Callable[[], object],
    edit: Callable[[], object],
    act: _Act,
) -> QMenu:
    """The menu of a project's header: a new chat in it, edit it, delete it."""
    menu = QMenu(parent)
    menu.addAction("New chat in this project", new_chat)
    menu.addAction("Edit project…", edit)
    menu.addAction(
        "Delete project (keeps its chats)", lambda: act(lambda: history.projects.delete(project_id))
    )
    return menu


def edit_project(
    parent: QWidget,
    history: History,
    project_id: int,
    choices: ProjectChoices,
    act: _Act,
) -> ProjectDialog | None:
    """Open the dialog of a project's name and defaults (OK saves them through `act`)."""
    project = history.projects.get(project_id)
    if project is None:
        return None
    dialog = ProjectDialog(project, choices, parent)
    dialog.accepted.connect(
        lambda: act(lambda: history.projects.update(project_id, **dialog.changes()))
    )
    dialog.finished.connect(dialog.deleteLater)
    dialog.open()
    return dialog
