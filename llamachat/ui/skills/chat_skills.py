"""The chat window's skills on screen: the skills panel, the chips, the composer's names.

`ChatSkills` keeps what the window shows of skills in step with its conversation
(`controller.Conversation`, which owns the store and the loaded skills): a chip per
loaded skill (the ones gone from disk struck through), a "Load pdf? ~N tokens" chip
per skill the last message only mentioned by a word, the skill names the composer
completes, the Skills command enabled only while skills are on, and one skills
panel (`skills_panel.SkillsPanel`) at a time, whose "Load when mentioned" it saves
as `skill_mentions`. A `SkillsWatcher` follows the skills
folders on disk, and is replaced when the settings give the conversation a new
store. What it does is said through `status`.

Errors: none raised. Skills turned off in config.toml are said, not opened.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QWidget

from llamachat.config import ConfigError
from llamachat.skills import Skill, SkillStore
from llamachat.tools import skill_tools
from llamachat.ui.app import App
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.skills.skills_panel import SkillsPanel, SkillsWatcher
from llamachat.ui.views.chips import SkillChips, SkillSuggestions, skill_tokens
from llamachat.ui.views.composer import Composer
from llamachat.ui.views.top_bar import TopBar

log = logging.getLogger(__name__)


class ChatSkills(QObject):
    """The skills panel, chips, composer names and Skills command of one chat window."""

    # A status-bar line: what was loaded or unloaded, or why the panel did not open.
    status = Signal(str)

    def __init__(
        self,
        app: App,
        chat: Conversation,
        *,
        chips: SkillChips,
        suggestions: SkillSuggestions,
        composer: Composer,
        top_bar: TopBar,
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._chat = chat
        self._window = parent
        self._chips = chips
        self._suggestions = suggestions
        self._composer = composer
        self._top_bar = top_bar
        self._watcher: SkillsWatcher | None = None
        self._watched: object = None
        self._panel: SkillsPanel | None = None
        self._chips_shown: tuple | None = None
        self._counted: dict[str, int] = {}
        chips.unload_requested.connect(self.unload)
        suggestions.load_requested.connect(self._on_suggestion_clicked)
        chat.skills_changed.connect(self._show_chips)
        # The server's count of a skill replaces the first estimate once the meter has it.
        chat.context.changed.connect(self._on_counted)
        chat.skills_suggested.connect(self._on_skills_suggested)
        chat.session_changed.connect(self._on_session_changed)
        chat.store_changed.connect(self._on_store_changed)
        self._watch()

    def is_user_skill(self, name: str) -> bool:
        """True when `name` is a skill in the user's folders (so `/name` loads it)."""
        store = self._chat.store
        return store is not None and name in store.user_names()

    def open_panel(self) -> SkillsPanel | None:
        """Open the skills panel (or raise the open one); None when skills are turned off."""
        store = self._chat.store
        if store is None or self._watcher is None:
            self.status.emit(
                "Skills are turned off: set skills_enabled = true in config.toml to use them."
            )
            return None
        if self._panel is not None:
            self._panel.update_view()
            self._panel.raise_()
            self._panel.activateWindow()
            return self._panel
        panel = SkillsPanel(
            store,
            self._chat.loaded_skills,
            import_dir=self._app.config.skills_dir,
            watcher=self._watcher,
            catalog_budget=lambda: skill_tools.catalog_budget(
                self._app.config, self._chat.context.context_size()
            ),
            mentions=lambda: self._app.config.skill_mentions,
            takes_tools=self._chat.context.takes_tools,
            parent=self._window,
        )
        panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        panel.load_requested.connect(self._on_panel_load)
        panel.unload_requested.connect(self.unload)
        panel.mentions_toggled.connect(self._on_mentions_toggled)
        panel.destroyed.connect(self._on_panel_closed)
        self._panel = panel
        panel.open()
        return panel

    @Slot(str)
    def unload(self, name: str) -> None:
        """Drop a skill from the chat's system message."""
        if self._chat.unload_skill(name):
            self.status.emit(f"Unloaded skill {name}.")

    def refresh_names(self) -> None:
        """Offer the store's skill names to the composer and redraw the chips."""
        if self._chat.store is not None:
            self._composer.offer_skills(self._chat.store, panel=True)
        self._show_chips()

    def _show_chips(self, _names: object = None) -> None:
        # A chip per loaded skill, with its cost; the ones gone from disk struck through.
        # Rebuilt only when that changes: the meter says it changed at every count.
        shown = (
            self._chat.loaded_skills(),
            frozenset(self._chat.missing_skills()),
            {name: self._cost(skill) for name, skill in self._loaded().items()},
        )
        if shown != self._chips_shown:
            self._chips_shown = shown
            self._chips.set_skills(*shown)

    def _cost(self, skill: Skill) -> int:
        return skill_tokens(skill, self._chat.context.quick_tokens)

    @Slot()
    def _on_counted(self) -> None:
        # The meter says it changed at every keystroke: only the loaded skills' counts in
        # its breakdown matter here, and reading them touches no file.
        breakdown = self._chat.context.breakdown()
        counted = {name: breakdown.get(f"skill:{name}") for name in self._chat.loaded_skills()}
        if counted != self._counted:
            self._counted = counted
            self._show_chips()

    def _loaded(self) -> dict[str, Skill]:
        store = self._chat.store
        found = {name: store.load(name) for name in self._chat.loaded_skills()} if store else {}
        return {name: skill for name, skill in found.items() if skill is not None}

    @Slot(list)
    def _on_skills_suggested(self, names: list) -> None:
        store = self._chat.store
        found = [store.load(name) for name in names] if store is not None else []
        self._suggestions.set_skills(
            [skill for skill in found if skill is not None], self._chat.context.quick_tokens
        )

    @Slot(object)
    def _on_session_changed(self, _session_id: object) -> None:
        # Another chat: what the last message of this one mentioned is not its business.
        self._suggestions.set_skills([])

    @Slot(str)
    def _on_suggestion_clicked(self, name: str) -> None:
        if self._chat.load_skill(name):
            tokens = self._loaded().get(name)
            cost = f" (~{self._cost(tokens):,} tokens)" if tokens is not None else ""
            self.status.emit(
                f"Loaded skill {name}{cost}; Regenerate the last reply to answer with it. "
                "Click its chip to unload it."
            )

    @Slot(str, bool)
    def _on_mentions_toggled(self, name: str, on: bool) -> None:
        """Save the skills whose one-word mention loads them (`skill_mentions`)."""
        names = [n for n in self._app.config.skill_mentions if n != name] + ([name] if on else [])
        try:
            self._app.save_settings({"skill_mentions": names})
        except ConfigError as exc:
            self.status.emit(f"Not saved: {exc}")
            return
        how = "loads it" if on else "only suggests it"
        self.status.emit(f"Mentioning {name} in a message now {how}.")

    @Slot(object)
    def _on_store_changed(self, store: SkillStore | None) -> None:
        if store is not self._watched:
            self._watch()
        self.refresh_names()

    def _watch(self) -> None:
        """Follow the skills folders on disk (a new store after the settings changed them)."""
        if self._panel is not None:
            self._panel.close()
            self._panel = None
        if self._watcher is not None:
            self._watcher.deleteLater()
            self._watcher = None
        store = self._chat.store
        self._watched = store
        if store is not None:
            self._watcher = SkillsWatcher(store, parent=self)
            self._watcher.changed.connect(self.refresh_names)
        self._top_bar.enable_skills(store is not None)

    @Slot(str)
    def _on_panel_load(self, name: str) -> None:
        if self._chat.load_skill(name):
            tokens = self._loaded().get(name)
            cost = f" (~{self._cost(tokens):,} tokens)" if tokens is not None else ""
            self.status.emit(f"Loaded skill {name}{cost}.")

    @Slot()
    def _on_panel_closed(self) -> None:
        self._panel = None
