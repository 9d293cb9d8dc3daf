"""The chat window's menu bar (File, Chat, Help) and its keyboard shortcuts.

`install(window)` builds both from the window's commands, in one place because they
are tied: a menu item shows its key after a tab while the window's QShortcuts own
every key (a key bound twice, to an action and a shortcut, is ambiguous and never
fires). Raises nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QShortcut

from llamachat.ui import shortcuts

if TYPE_CHECKING:
    from llamachat.ui.window import ChatWindow

log = logging.getLogger(__name__)


def install(window: ChatWindow) -> list[QShortcut]:
    """Give the chat window its menus and its keyboard shortcuts; returns the shortcuts."""
    _build_menus(window)
    return shortcuts.install(
        window,
        {
            "new_chat": window.new_session,
            "search_sessions": window.sidebar.focus_search,
            "stop": window.stop,
            "focus_composer": window.focus_composer,
            "copy_last_reply": window.copy_last_reply,
            "switch_model": window.model_picker.open_popup,
            "settings": window.open_settings,
            "shortcuts": window.show_shortcuts,
            "quit": window.quit_requested.emit,
        },
    )


def _action(text: str, window: ChatWindow, slot: Callable[[], object]) -> QAction:
    """A new action of the window's that calls `slot` when triggered."""
    action = QAction(text, window)
    action.triggered.connect(slot)
    return action


def _keyed(action: QAction, name: str) -> QAction:
    """`action`, its text followed by the key the window's shortcut `name` answers to."""
    action.setText(f"{action.text()}\t{shortcuts.BY_ACTION[name].shown()}")
    return action


def _build_menus(window: ChatWindow) -> None:
    top, router = window.top_bar, window.router_guide
    menus = window.menuBar()
    file_menu = menus.addMenu("&File")
    file_menu.addAction(_keyed(_action("New chat", window, window.new_session), "new_chat"))
    file_menu.addAction(window.sidebar.import_action)
    file_menu.addSeparator()
    file_menu.addAction(_keyed(top.settings_action, "settings"))
    file_menu.addAction(_action("Import MCP servers…", window, window.import_mcp_servers))
    file_menu.addAction(router.server_log_action)
    file_menu.addAction(router.add_model_action)
    file_menu.addAction(router.get_model_action)
    file_menu.addAction(router.delete_model_action)
    file_menu.addAction(router.model_options_action)
    file_menu.addSeparator()
    file_menu.addAction(_action("Close window", window, window.close))
    quit_action = _action("Quit", window, lambda: window.quit_requested.emit())
    file_menu.addAction(_keyed(quit_action, "quit"))

    chat_menu = menus.addMenu("&Chat")
    chat_menu.addAction(
        _keyed(
            _action("Search chats", window, window.sidebar.focus_search),
            "search_sessions",
        )
    )
    chat_menu.addAction(
        _keyed(
            _action("Choose model", window, window.model_picker.open_popup),
            "switch_model",
        )
    )
    chat_menu.addAction(
        _keyed(
            _action("Copy last reply", window, window.copy_last_reply),
            "copy_last_reply",
        )
    )
    chat_menu.addAction(_keyed(_action("Stop reply", window, window.stop), "stop"))
    chat_menu.addSeparator()
    chat_menu.addAction(window.web_search.action)
    chat_menu.addAction(top.skills_action)
    chat_menu.addAction(_action("MCP servers…", window, window.open_mcp_panel))
    chat_menu.addAction(_action("Edit prompt presets…", window, window.preset_picker.edit_presets))

    help_menu = menus.addMenu("&Help")
    help_menu.addAction(
        _keyed(_action("Keyboard shortcuts", window, window.show_shortcuts), "shortcuts")
    )
    help_menu.addAction(router.about_action)
