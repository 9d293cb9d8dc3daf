"""One conversation's loaded skills: loading and unloading them, the skills a typed question
names, the skills folders followed, and the `/` list re-checked.

`SkillLoader(state, ...)` reads its conversation's `ChatState` and asks its writer to
change the skill part of it (`ask_loaded`: the loaded names, `ask_store`: the store). It
is handed what else it needs as callables: the History (the chat's skills are saved with
it), `forget_system` (the system message holds the skills), and the conversation's
signals to emit (`changed`, `store_changed`, `suggested`, `notice`). It never reaches
back into the conversation.

Errors: none raised; a save History refuses becomes a `notice`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, QTimer, Slot

from llamachat import turn
from llamachat.config import Config
from llamachat.history.store import History, HistoryError
from llamachat.skills import SkillStore
from llamachat.ui.chat.state import CHAT, ONESHOT, ChatState

# What a `/` completer offers: the user's skill names and their descriptions.
Offered = tuple[list[str], dict[str, str]]


class SkillLoader(QObject):
    """Loads and unloads a conversation's skills and follows its skills folders."""

    def __init__(
        self,
        state: ChatState,
        cfg: Config,
        *,
        history: Callable[[], History],
        ask_loaded: Callable[[list[str]], None],
        ask_store: Callable[[SkillStore | None], None],
        forget_system: Callable[[], None],
        changed: Callable[[list[str]], None],
        store_changed: Callable[[SkillStore | None], None],
        suggested: Callable[[list[str]], None],
        notice: Callable[[str, int], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.state = state
        self._history = history
        self._ask_loaded = ask_loaded
        self._ask_store = ask_store
        self._forget_system = forget_system
        self._changed = changed
        self._store_changed = store_changed
        self._suggested = suggested
        self._notice = notice
        self._skills_from = (cfg.skill_roots(), cfg.skills_enabled)
        # What the `/` list offered before the last question: re-checked once it has left.
        self._offered: Offered = ([], {})
        self._suggestions: list[str] = []
        # One-shot: the skills the question asked for, which a retry asks for again.
        self._asked: list[str] = []

    def load(self, name: str) -> bool:
        """Load a skill into the system message; True when it was not loaded before."""
        store = self.state.store
        if store is None or name in self.state.loaded or store.load(name) is None:
            return False
        self.set_loaded([*self.state.loaded, name])
        return True

    def unload(self, name: str) -> bool:
        """Drop a skill from the system message; True when it was loaded."""
        if name not in self.state.loaded:
            return False
        self.set_loaded([n for n in self.state.loaded if n != name])
        return True

    def set_loaded(self, names: list[str], *, persist: bool = True) -> None:
        """Make `names` the loaded skills (saved with a chat-mode session unless not `persist`)."""
        state = self.state
        self._ask_loaded(list(names))
        self._forget_system()
        if persist and state.mode == CHAT and state.session_id is not None:
            try:
                self._history().set_skills(state.session_id, state.loaded)
            except HistoryError as exc:
                self._notice(f"The chat's skills could not be saved: {exc}", 0)
        self._changed(list(state.loaded))

    def take(self, text: str, always: Iterable[str]) -> turn.Question:
        """The typed `text` with its `/name` commands out, and the skills it names loaded
        (its `skills`: those not loaded before). `always`: what `skill_mentions` loads."""
        # Before the request leaves, only the skills folders are looked at (a skill added
        # or removed: a few stat calls); every SKILL.md (500 of them cost ~2.5 ms) is
        # re-checked once it has left. A loaded skill's own file is checked as it is
        # loaded into the request, so the model never gets an old text.
        store = self.state.store
        self._offered = self._offer()
        if store is not None:
            store.refresh(files=False)
        question = turn.parse_question(text, store, always=always, refresh=False)
        loaded = [name for name in question.skills if self.load(name)]
        self._suggestions = [n for n in question.suggested if n not in self.state.loaded]
        return turn.Question(question.text, tuple(loaded), question.commands, question.suggested)

    def held(self, question: turn.Question) -> None:
        """Nothing is sent (only skills were named): say what was loaded, offer the rest."""
        self.recheck()
        self._suggested(self._suggestions)
        loaded = self.state.loaded
        if self.state.mode == ONESHOT:
            if loaded:
                self._notice(f"Skill {', '.join(loaded)} will be used for the next question.", 0)
        elif question.commands:
            self._notice(f"Skill {', '.join(question.commands)} loaded; nothing was sent.", 8000)

    def sending(self, question: turn.Question) -> None:
        """The question is about to be sent: say what its commands loaded (chat mode)."""
        if self.state.mode == CHAT:
            if question.skills:
                self._notice(f"Loaded skill {', '.join(question.skills)}.", 8000)
            elif question.commands:
                self._notice(f"Already loaded: {', '.join(question.commands)}.", 8000)
        # After the request left (or when none leaves): the window's completer is rebuilt
        # only when what it offers changed on disk.
        QTimer.singleShot(0, self, self.recheck)

    def sent(self) -> None:
        """The question went: offer the skills it only mentioned."""
        # After the message: a new chat's session_changed, which clears them, comes first.
        suggested = self._suggestions
        self._suggested(suggested)
        if suggested and self.state.mode == ONESHOT:
            # The quick window has no suggestion chips: say how to use the skill instead.
            commands = " ".join(f"/{name}" for name in suggested)
            self._notice(
                f"Mentioned, not loaded: skill {', '.join(suggested)} (add {commands} to "
                "the question to use it).",
                8000,
            )

    def asked(self) -> None:
        """The question was saved: one-shot, its skills are the ones a retry asks for again."""
        if self.state.mode == ONESHOT:
            self._asked = list(self.state.loaded)

    def ask_again(self) -> None:
        """A one-shot retry: load again the skills its question asked for."""
        self.set_loaded(self._asked)

    @Slot(str)
    def model_loaded(self, name: str) -> None:
        """The model loaded a skill mid-reply (`load_skill`)."""
        # One-shot: the chips show it; the answer's notice line stays for problems.
        if self.load(name) and self.state.mode == CHAT:
            self._notice(f"The model loaded skill {name}.", 8000)

    @Slot()
    def reply_over(self) -> None:
        """A reply ended: one-shot, its skills served that answer only."""
        if self.state.mode == ONESHOT:
            self.set_loaded([], persist=False)

    def recheck(self) -> None:
        """Re-check every SKILL.md; say so when what a `/` completer offers changed."""
        if self.state.store is not None:
            self.state.store.refresh()
        if self._offer() != self._offered:
            self._store_changed(self.state.store)

    def follow(self, cfg: Config) -> None:
        """Follow the skills folders of settings saved in any window."""
        skills_from = (cfg.skill_roots(), cfg.skills_enabled)
        if skills_from != self._skills_from:
            self._skills_from = skills_from
            store = turn.skill_store(cfg)
            self._ask_store(store)
            self.set_loaded([n for n in self.state.loaded if store is not None and store.load(n)])
            self._store_changed(store)

    def _offer(self) -> Offered:
        store = self.state.store
        if store is None:
            return [], {}
        return store.user_names(), store.descriptions()
