"""The chat window's menu bar (File, Chat, Help) and its keyboard shortcuts.

`install(window, commands, actions)` builds both, in one place because they are tied:
a menu item shows its key after a tab while the window's QShortcuts own every key (a
key bound twice, to an action and a shortcut, is ambiguous and never fires). The
window hands over what the menus call (`Commands`) and the actions its parts own
(`Actions`); this module knows nothing else of it. Raises nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QShortcut
from PySide6.QtWidgets import QMainWindow

from llamachat.ui import shortcuts


@dataclass(frozen=True)
class Commands:
    """What the menu items and keys call; the first ten are keyboard shortcuts too."""

    new_chat: Callable[[], object]
    new_temporary_chat: Callable[[], object]
    search_sessions: Callable[[], object]
    stop: Callable[[], object]
    focus_composer: Callable[[], object]
    copy_last_reply: Callable[[], object]
    switch_model: Callable[[], object]
    settings: Callable[[], object]
    shortcuts: Callable[[], object]
    quit: Callable[[], object]
    import_mcp_servers: Callable[[], object]
    close: Callable[[], object]
    mcp_servers: Callable[[], object]
    edit_presets: Callable[[], object]
    compact_chat: Callable[[], object]
    memory: Callable[[], object]
    compare: Callable[[], object]
    compare_wins: Callable[[], object]


@dataclass(frozen=True)
class Actions:
    """The actions the window's parts own, placed in the menus as they are."""

    import_chats: QAction
    transcribe_file: QAction  # the composer's "Transcribe audio file…"
    settings: QAction
    router: list[QAction]  # server log, add, get, delete, options: File, after MCP import
    web_search: QAction
    skills: QAction
    about: QAction


def install(window: QMainWindow, commands: Commands, actions: Actions) -> list[QShortcut]:
    """Give the window its menus and its keyboard shortcuts; returns the shortcuts."""
    _build_menus(window, commands, actions)
    return shortcuts.install(
        window,
        {
            "new_chat": commands.new_chat,
            "new_temporary_chat": commands.new_temporary_chat,
            "search_sessions": commands.search_sessions,
            "stop": commands.stop,
            "focus_composer": commands.focus_composer,
            "copy_last_reply": commands.copy_last_reply,
            "switch_model": commands.switch_model,
            "settings": commands.settings,
            "shortcuts": commands.shortcuts,
            "quit": commands.quit,
        },
    )


def _action(text: str, window: QMainWindow, slot: Callable[[], object]) -> QAction:
    """A new action of the window's that calls `slot` when triggered."""
    action = QAction(text, window)
    # A lambda: `triggered` passes `checked`, which none of the commands takes.
    action.triggered.connect(lambda: slot())
    return action


def _keyed(action: QAction, name: str) -> QAction:
    """`action`, its text followed by the key the window's shortcut `name` answers to."""
    action.setText(f"{action.text()}\t{shortcuts.BY_ACTION[name].shown()}")
    return action


def _build_menus(window: QMainWindow, commands: Commands, actions: Actions) -> None:
    menus = window.menuBar()
    file_menu = menus.addMenu("&File")
    file_menu.addAction(_keyed(_action("New chat", window, commands.new_chat), "new_chat"))
    file_menu.addAction(
        _keyed(
            _action("New temporary chat", window, commands.new_temporary_chat),
            "new_temporary_chat",
        )
    )
    file_menu.addAction(actions.import_chats)
    file_menu.addAction(actions.transcribe_file)
    file_menu.addSeparator()
    file_menu.addAction(_keyed(actions.settings, "settings"))
    file_menu.addAction(_action("Import MCP servers…", window, commands.import_mcp_servers))
    for action in actions.router:
        file_menu.addAction(action)
    file_menu.addSeparator()
    file_menu.addAction(_action("Close window", window, commands.close))
    file_menu.addAction(_keyed(_action("Quit", window, commands.quit), "quit"))

    chat_menu = menus.addMenu("&Chat")
    chat_menu.addAction(
        _keyed(_action("Search chats", window, commands.search_sessions), "search_sessions")
    )
    chat_menu.addAction(
        _keyed(_action("Choose model", window, commands.switch_model), "switch_model")
    )
    chat_menu.addAction(
        _keyed(_action("Copy last reply", window, commands.copy_last_reply), "copy_last_reply")
    )
    chat_menu.addAction(_keyed(_action("Stop reply", window, commands.stop), "stop"))
    chat_menu.addAction(_action("Compact chat", window, commands.compact_chat))
    chat_menu.addAction(_action("Compare with…", window, commands.compare))
    chat_menu.addAction(_action("Comparison wins…", window, commands.compare_wins))
    chat_menu.addSeparator()
    chat_menu.addAction(actions.web_search)
    chat_menu.addAction(actions.skills)
    chat_menu.addAction(_action("MCP servers…", window, commands.mcp_servers))
    chat_menu.addAction(_action("Memory…", window, commands.memory))
    chat_menu.addAction(_action("Edit prompt presets…", window, commands.edit_presets))

    help_menu = menus.addMenu("&Help")
    help_menu.addAction(
        _keyed(_action("Keyboard shortcuts", window, commands.shortcuts), "shortcuts")
    )
    help_menu.addAction(actions.about)
