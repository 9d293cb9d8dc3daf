"""The skills panel, and the file watcher that keeps the skill store current.

`SkillsPanel(store, loaded_names)` (a dialog, accessible name "Skills") lists every
skill with its description, source folder, flags and whether this chat has it
loaded; under a skill, the copies of the same name it hides in later folders; then
the loaded skills deleted from disk; then the problems found (errors: not loaded;
warnings: loaded anyway) with their paths and what to fix. Load / Unload emit
`load_requested` / `unload_requested`, "Load when mentioned" `mentions_toggled`; the
window acts and the panel re-reads `loaded_names()` and `mentions()`. Refresh reads
the folders again; "Import skill folder…" copies skills in with `skills.import_folder`.
Enter presses no button: it would load whatever row is current.

`SkillsWatcher(store)` watches the skill roots, each skill folder and each
SKILL.md, re-scans the store when one changes and emits `changed`, so a skill
written to disk appears without a restart. A root that does not exist yet is
watched through its nearest existing parent (even `~` for `~/.agents/skills`), so
its creation is noticed too. The window and the panel share one.

Errors: none raised. A refused import (`skills.SkillImportError`) is shown in the
panel with each folder's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QListWidget,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llamachat import skills
from llamachat.context import NO_TOOLS
from llamachat.skills import SkillStore
from llamachat.ui import plain

log = logging.getLogger(__name__)

# Editors and copies write a file in several steps; one re-scan after they settle.
SETTLE_MS = 150
COLUMNS = ("Skill", "Description", "Folder", "Flags", "Loaded")


class SkillsWatcher(QObject):
    """Re-scans a SkillStore when its folders or SKILL.md files change; emits `changed`."""

    changed = Signal()

    def __init__(self, store: SkillStore, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._watcher = QFileSystemWatcher(self)
        self._watcher.directoryChanged.connect(self._on_disk_changed)
        self._watcher.fileChanged.connect(self._on_disk_changed)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self.check)
        self._sync_paths()

    def watched(self) -> list[str]:
        """The paths watched now."""
        return sorted(self._watcher.directories() + self._watcher.files())

    @Slot()
    def check(self) -> bool:
        """Re-scan now; True (and `changed` emitted) when the skills changed."""
        # Watch new folders before scanning: a file written in between is then either
        # seen by this scan or reported by the watcher, never missed.
        self._sync_paths()
        if self.store.refresh():
            self.changed.emit()
            return True
        return False

    def _wanted(self) -> set[str]:
        paths: set[str] = set()
        for root in self.store.roots():
            if not root.is_dir():
                # A missing root is watched through its nearest existing parent (~ when
                # even ~/.agents is missing), so its creation is noticed; `check` then
                # moves the watch one level down at a time until the root itself.
                parent = next((p for p in root.parents if p.is_dir()), None)
                if parent is not None:
                    paths.add(str(parent))
                continue
            paths.add(str(root))
            try:
                children = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
            except OSError as exc:
                log.info("cannot list skills folder %s: %s", root, exc)
                continue
            for folder in children:
                paths.add(str(folder))
                skill_file = folder / skills.SKILL_FILE
                if skill_file.is_file():
                    paths.add(str(skill_file))
        return paths

    def _sync_paths(self) -> None:
        wanted = self._wanted()
        current = set(self._watcher.directories() + self._watcher.files())
        gone = sorted(current - wanted)
        new = sorted(wanted - current)
        # Empty lists make Qt warn, so only call with something to do.
        if gone:
            self._watcher.removePaths(gone)
        if new:
            failed = self._watcher.addPaths(new)
            if failed:
                log.info("cannot watch %s", ", ".join(failed))

    @Slot(str)
    def _on_disk_changed(self, path: str) -> None:
        self._timer.start()


class SkillsPanel(QDialog):
    """Every skill, its state and its problems; load, unload, refresh and import."""

    load_requested = Signal(str)
    unload_requested = Signal(str)
    # A skill's name and whether a one-word mention of it should load it at once.
    mentions_toggled = Signal(str, bool)

    def __init__(
        self,
        store: SkillStore,
        loaded_names: Callable[[], list[str]],
        *,
        import_dir: Path,
        watcher: SkillsWatcher | None = None,
        catalog_budget: Callable[[], int | None] | None = None,
        mentions: Callable[[], Iterable[str]] | None = None,
        takes_tools: Callable[[], bool] = lambda: True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        # False: the chat's model is sent no tools, the skill tools neither.
        self._takes_tools = takes_tools
        self._loaded_names = loaded_names
        # The characters the model's catalog may take (its share of the context), or None.
        self._catalog_budget = catalog_budget
        self._mentions = mentions
        self.import_dir = Path(import_dir)
        self.watcher = watcher if watcher is not None else SkillsWatcher(store, parent=self)
        self.watcher.changed.connect(self.update_view)
        self.setWindowTitle("Skills")
        self.setAccessibleName("Skills")
        self.resize(860, 520)
        self._build()
        self.update_view()

    def _build(self) -> None:
        self.tree = QTreeWidget()
        self.tree.setAccessibleName("Skill list")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setWordWrap(True)
        # Paths lose their middle, not the skill folder's name at their end.
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.tree.header()
        header.setStretchLastSection(False)
        for column in (0, 3, 4):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        self.tree.setColumnWidth(2, 220)
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.tree.itemDoubleClicked.connect(lambda *_: self._on_toggle())

        self.load_button = QPushButton("Load")
        self.load_button.setAccessibleName("Load skill")
        self.load_button.clicked.connect(self._on_toggle)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setAccessibleName("Unload skill")
        self.unload_button.clicked.connect(self._on_toggle)
        self.mention_button = QPushButton("Load when mentioned")
        self.mention_button.setAccessibleName("Load when mentioned")
        self.mention_button.setCheckable(True)
        self.mention_button.setToolTip(
            "On: naming this skill in a message loads it, even by a one-word name. "
            "Off: a one-word mention only suggests it."
        )
        self.mention_button.clicked.connect(self._on_mention_clicked)
        self.mention_button.setVisible(self._mentions is not None)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setAccessibleName("Refresh skills")
        self.refresh_button.setToolTip("Read the skills folders again")
        self.refresh_button.clicked.connect(self.refresh)
        import_button = QPushButton("Import skill folder…")
        import_button.setAccessibleName("Import skill folder")
        import_button.clicked.connect(self._on_import)

        self.left_out_label = plain.Label()
        self.left_out_label.setAccessibleName("Left out of the catalog")
        self.left_out_label.setWordWrap(True)
        self.left_out_label.hide()
        self.problems_label = plain.Label("Problems")
        self.problems = QListWidget()
        self.problems.setAccessibleName("Skill problems")
        self.problems.setWordWrap(True)
        self.message = plain.Label()
        self.message.setAccessibleName("Skills message")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        self.tools_label = plain.Label(
            f"This model cannot load skills itself ({NO_TOOLS}), nor read their files: "
            "load a skill here (Load) or with /name in your message, and it goes into the "
            "system message."
        )
        self.tools_label.setAccessibleName("Skill tools")
        self.tools_label.setWordWrap(True)
        self.tools_label.hide()
        self.roots_label = plain.Label()
        self.roots_label.setWordWrap(True)
        self.roots_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        buttons = QHBoxLayout()
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.unload_button)
        buttons.addWidget(self.mention_button)
        buttons.addWidget(self.refresh_button)
        buttons.addWidget(import_button)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        buttons.addWidget(close)
        # No default button: Enter in the list would otherwise press Load on whatever
        # row is current (the first, on opening). Loading is a click or a double-click.
        own = (self.load_button, self.unload_button, self.mention_button, self.refresh_button)
        for button in (*own, import_button, *close.buttons()):
            if isinstance(button, QPushButton):
                button.setAutoDefault(False)
                button.setDefault(False)

        layout = QVBoxLayout(self)
        layout.addWidget(self.roots_label)
        layout.addWidget(self.tools_label)
        layout.addWidget(self.tree, 3)
        layout.addWidget(self.left_out_label)
        layout.addWidget(self.problems_label)
        layout.addWidget(self.problems, 1)
        layout.addWidget(self.message)
        layout.addLayout(buttons)

    # ------------------------------------------------------------------ public

    def skill_names(self) -> list[str]:
        """The skills that can be loaded, top to bottom (not hidden or missing copies)."""
        return [name for name, kind in self._rows() if kind == _SKILL]

    def rows(self) -> list[list[str]]:
        """Every row's column texts, top to bottom: skills, hidden copies, missing skills."""
        return [[item.text(c) for c in range(len(COLUMNS))] for item in self._items()]

    def _rows(self) -> list[tuple[str, str]]:
        return [(item.text(0), item.data(0, Qt.ItemDataRole.UserRole)) for item in self._items()]

    def _items(self) -> list[QTreeWidgetItem]:
        found = (self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount()))
        return [item for item in found if item is not None]

    @Slot()
    def refresh(self) -> None:
        """Read the skills folders again now (the Refresh button) and show what they hold."""
        self.watcher.check()
        self.update_view()

    def problem_texts(self) -> list[str]:
        """The problems listed, each "path: what to fix"."""
        return [self.problems.item(i).text() for i in range(self.problems.count())]

    def left_out(self) -> list[str]:
        """The skills the panel lists as left out of the model's catalog."""
        text = self.left_out_label.text()
        return text.rpartition(": ")[2].split(", ") if text else []

    def message_text(self) -> str:
        """The last import's outcome ('' when none)."""
        return self.message.text()

    @Slot()
    def update_view(self) -> None:
        """Show the store's skills and problems and which skills are loaded."""
        selected = self._selected()
        loaded = set(self._loaded_names())
        mentioned = set(self._mentions()) if self._mentions is not None else set()
        self.tools_label.setVisible(not self._takes_tools())
        self.roots_label.setText(
            "Skills are read from (the first folder wins a name they share): "
            + ", ".join(_home_relative(root) for root in self.store.roots())
        )
        hidden = self.store.hidden()
        self.tree.clear()
        for skill in self.store.skills():
            flags = []
            if not skill.user_invocable:
                flags.append("model only")
            if not skill.model_invocable:
                flags.append("user only")
            if skill.name in mentioned:
                flags.append("loads when mentioned")
            losers = hidden.get(skill.name, [])
            if losers:
                flags.append("wins over " + ", ".join(_root_of(path) for path in losers))
            folder = _home_relative(skill.folder.parent) if skill.folder else ""
            loaded_text = "loaded" if skill.name in loaded else ""
            item = self._add_row(
                [skill.name, skill.description, folder, ", ".join(flags), loaded_text], _SKILL
            )
            item.setToolTip(1, plain.tooltip(skill.description))
            item.setToolTip(2, plain.tooltip(str(skill.path or "")))
            if skill.name == selected:
                self.tree.setCurrentItem(item)
            for path in losers:
                shadow = self._add_row(
                    [skill.name, "(hidden copy)", _root_of(path), f"hidden by {folder}", ""],
                    _HIDDEN,
                )
                shadow.setToolTip(2, plain.tooltip(str(path)))
                shadow.setToolTip(
                    3,
                    plain.tooltip(
                        f"{path} is not used: {skill.path} has the same name and its folder "
                        "comes first. Rename one of them to use both."
                    ),
                )
        present = set(self.store.names())
        for name in self._loaded_names():
            if name not in present:
                gone = self._add_row(
                    [
                        name,
                        "Deleted from disk: the model no longer gets it.",
                        "",
                        "missing",
                        "loaded",
                    ],
                    _MISSING,
                )
                if name == selected:
                    self.tree.setCurrentItem(gone)
        budget = self._catalog_budget() if self._catalog_budget is not None else None
        left = self.store.left_out(budget) if budget else []
        self.left_out_label.setText(
            "Left out of the catalog the model sees (its share of the context is full; "
            "load them yourself with /name): " + ", ".join(left)
            if left
            else ""
        )
        self.left_out_label.setVisible(bool(left))
        self.problems.clear()
        found = self.store.problems()
        for problem in found:
            kind = "Error, not loaded" if problem.skipped else "Warning, loaded"
            self.problems.addItem(f"{kind}: {problem}")
        errors = sum(1 for problem in found if problem.skipped)
        counts = f"{_count(errors, 'error')}, {_count(len(found) - errors, 'warning')}"
        self.problems_label.setText(f"Problems ({counts})" if found else "No problems found")
        self.problems.setVisible(bool(found))
        self._update_buttons()

    def _add_row(self, texts: list[str], kind: str) -> QTreeWidgetItem:
        item = QTreeWidgetItem(texts)
        item.setData(0, Qt.ItemDataRole.UserRole, kind)
        if kind != _SKILL:
            for column in range(len(COLUMNS)):
                item.setForeground(column, self.palette().placeholderText())
        self.tree.addTopLevelItem(item)
        return item

    def import_folder(self, source: Path) -> list[Path]:
        """Copy a skill folder (or a folder of them) into the skills folder; shows the outcome."""
        imported: list[Path] = []
        lines: list[str] = []
        try:
            imported = skills.import_folder(Path(source), self.import_dir)
        except skills.SkillImportError as exc:
            imported = exc.imported
            lines.append("Not imported:")
            lines.extend(f"• {problem}" for problem in exc.problems)
        if imported:
            lines.insert(0, "Imported: " + ", ".join(path.name for path in imported))
        self.message.setText("\n".join(lines))
        self.message.setVisible(bool(lines))
        self.watcher.check()
        self.update_view()
        return imported

    # ------------------------------------------------------------------ slots

    def _selected(self) -> str:
        """The selected skill's name ('' for none, or for a hidden copy)."""
        item = self.tree.currentItem()
        if item is None or item.data(0, Qt.ItemDataRole.UserRole) == _HIDDEN:
            return ""
        return item.text(0)

    def _update_buttons(self) -> None:
        name = self._selected()
        loaded = bool(name) and name in self._loaded_names()
        present = bool(name) and name in self.store.names()
        self.load_button.setEnabled(present and not loaded)
        self.unload_button.setEnabled(loaded)
        mentioned = self._mentions is not None and name in set(self._mentions())
        self.mention_button.setEnabled(present)
        self.mention_button.setChecked(present and mentioned)

    @Slot()
    def _on_mention_clicked(self) -> None:
        name = self._selected()
        if name:
            self.mentions_toggled.emit(name, self.mention_button.isChecked())
            self.update_view()

    @Slot()
    def _on_toggle(self) -> None:
        name = self._selected()
        if not name or (name not in self._loaded_names() and name not in self.store.names()):
            return
        if name in self._loaded_names():
            self.unload_requested.emit(name)
        else:
            self.load_requested.emit(name)
        self.update_view()

    @Slot()
    def _on_import(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Import skill folder", str(Path.home()))
        if folder:
            self.import_folder(Path(folder))


_SKILL, _HIDDEN, _MISSING = "skill", "hidden", "missing"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _root_of(skill_file: Path) -> str:
    """The skills folder a SKILL.md is in, as `_home_relative` shows it."""
    return _home_relative(skill_file.parent.parent)


def _home_relative(path: Path) -> str:
    """`path` with the home folder shown as ~, as people write it in config.toml."""
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)
