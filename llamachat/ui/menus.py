"""The chat window's menu bar (File, Chat, Help) and its keyboard shortcuts.

`install(window)` builds both from the window's commands, in one place because they
are tied: a menu item shows its key after a tab while the window's QShortcuts own
every key (a key bound twice, to an action and a shortcut, is ambiguous and never
fires). Raises nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QShortcut

from . import shortcuts

if TYPE_CHECKING:
    from .window import ChatWindow

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


def _keyed(action: QAction, name: str) -> QAction:
    """`action`, its text followed by the key the window's shortcut `name` answers to."""
    action.setText(f"{action.text()}\t{shortcuts.BY_ACTION[name].shown()}")
    return action


def _build_menus(window: ChatWindow) -> None:
    top, router = window.top_bar, window.router_guide
    menus = window.menuBar()
    file_menu = menus.addMenu("&File")
    file_menu.addAction(
        _keyed(QAction("New chat", window, triggered=window.new_session), "new_chat")
    )
    file_menu.addAction(window.sidebar.import_action)
    file_menu.addSeparator()
    file_menu.addAction(_keyed(top.settings_action, "settings"))
    file_menu.addAction(QAction("Import MCP servers…", window, triggered=window.import_mcp_servers))
    file_menu.addAction(router.server_log_action)
    file_menu.addAction(router.add_model_action)
    file_menu.addSeparator()
    file_menu.addAction(QAction("Close window", window, triggered=window.close))
    quit_action = QAction("Quit", window, triggered=lambda: window.quit_requested.emit())
    file_menu.addAction(_keyed(quit_action, "quit"))

    chat_menu = menus.addMenu("&Chat")
    chat_menu.addAction(
        _keyed(
            QAction("Search chats", window, triggered=window.sidebar.focus_search),
            "search_sessions",
        )
    )
    chat_menu.addAction(
        _keyed(
            QAction("Choose model", window, triggered=window.model_picker.open_popup),
            "switch_model",
        )
    )
    chat_menu.addAction(
        _keyed(
            QAction("Copy last reply", window, triggered=window.copy_last_reply),
            "copy_last_reply",
        )
    )
    chat_menu.addAction(_keyed(QAction("Stop reply", window, triggered=window.stop), "stop"))
    chat_menu.addSeparator()
    chat_menu.addAction(window.web_search.action)
    chat_menu.addAction(top.skills_action)
    chat_menu.addAction(QAction("MCP servers…", window, triggered=window.open_mcp_panel))
    chat_menu.addAction(
        QAction("Edit prompt presets…", window, triggered=window.preset_picker.edit_presets)
    )

    help_menu = menus.addMenu("&Help")
    help_menu.addAction(
        _keyed(QAction("Keyboard shortcuts", window, triggered=window.show_shortcuts), "shortcuts")
    )
