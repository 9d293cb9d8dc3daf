"""The chat window: sessions, the conversation, the composer, and the chrome around them.

`ChatWindow(app)` is built from the `App` alone, which owns the configuration, the
History, the registry and the router's state: the window reads them there and
follows its signals (Settings saved in any window, the router found or started).
The GUI thread owns every widget and the History's SQLite connection; replies stream in a
`StreamWorker` on its own thread, which only emits signals. The sessions sidebar sits
on the left; a top bar holds the model picker, the prompt preset, the web search
toggle, Skills and Settings; the status bar carries the context meter. The model
picker and the meter ask the server on the task runner (`tasks`), through the App's
`providers.Registry`. While the router is looked for or started,
when none could be had, and while it offers no models, the getting-started panel
(`first_run.FirstRunPanel`) sits above the conversation and says what to do.

Sending, Stop, Retry, Edit, the loaded skills and the streaming reply are the
conversation's (`controller.Conversation`, shared with the quick window): the window
forwards what the user does and shows what it signals. A reply is saved as it
streams (`reply.ReplyStream`): the user message first, then an assistant row with
status "streaming" that a one-second timer rewrites, so a crash loses at most a
second of text; the final save marks it "complete", "stopped" or "error".

Errors: none of its own. Backend failures are shown inline on the reply with a
Retry; a model list that cannot be fetched is shown beside the model picker;
other environment problems (an attachment that cannot be read, a config file that
cannot be written) go to the status bar.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QUrl, Signal, Slot
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QMainWindow,
    QPlainTextEdit,
    QSizePolicy,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from .. import prompts, providers, turn
from ..config import Config, ConfigError
from ..db import History, HistoryError, MessageRow
from ..models import ModelInfo
from ..server import is_loopback
from ..skills import SkillStore
from . import controller, first_run, markdown, plain, shortcuts, tasks
from .app import FAILED, PENDING, READY, App, RouterState
from .chips import SkillChips
from .composer import Attachment, Composer
from .controller import Conversation
from .conversation import ConversationView
from .meter import ContextMeter
from .model_picker import ModelPicker
from .notice import NoticeBar
from .presets import PresetPicker
from .reply import ReplyStream
from .settings import SettingsDialog
from .sidebar import SessionSidebar
from .skills_panel import SkillsPanel, SkillsWatcher
from .worker import collect_garbage_on_gui_thread

if TYPE_CHECKING:
    from ..server import ManagedServer

log = logging.getLogger(__name__)

STATUS_MS = 8000
SIDEBAR_WIDTH = 260
SERVER_LOG_BYTES = 64 * 1024


class ServerLogDialog(QDialog):
    """The tail of the managed llama-server's log, read when opened or refreshed."""

    def __init__(self, server: ManagedServer, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.server = server
        self.setWindowTitle("llama-server log")
        self.setAccessibleName("Server log")
        self.resize(820, 480)
        self.path_label = plain.Label()
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit()
        self.text.setAccessibleName("Server log text")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        refresh = buttons.addButton("Refresh", QDialogButtonBox.ButtonRole.ActionRole)
        refresh.setAccessibleName("Refresh log")
        refresh.clicked.connect(self.refresh)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.path_label)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Read the log's last lines again and scroll to the newest."""
        # The log is capped and only its tail is read, so this is quick on the GUI thread.
        tail = self.server.log_file.tail(SERVER_LOG_BYTES)
        state = "running" if self.server.is_running() else "not running"
        self.path_label.setText(
            f"{self.server.log_path} · llama-server {state} at {self.server.url}"
        )
        self.text.setPlainText(tail or "(the log is empty)")
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())


class ChatWindow(QMainWindow):
    """The main chat window, built from the App (configuration, history, router)."""

    session_changed = Signal(object)
    model_changed = Signal(str)
    models_listed = Signal(list)
    streaming_changed = Signal(bool)
    # File > Quit (Ctrl+Q): the running instance ends the app, tray icon included.
    quit_requested = Signal()

    def __init__(self, app: App, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.app = app
        cfg = app.config
        # The registry the picker and meter were given: the App's, until it replaces it.
        self._registry = app.registry
        self._prompts = prompts.Prompts(cfg.prompts_dir)
        try:
            self._prompts.ensure_default()
        except prompts.PromptError as exc:
            log.warning("cannot create the default prompt in %s: %s", cfg.prompts_dir, exc)
        # The conversation: session, skills, edit state, the reply and its requests.
        self.chat = Conversation(
            app,
            model=cfg.default_model,
            preset=lambda: self.preset_picker.system_text(),
            prompt=lambda: (self.preset_picker.current_name(), self.preset_picker.custom_text()),
            images=self._reads_images,
            parent=self,
        )
        # What the search toggle was built from, to see what a config_changed changes.
        self._search_from = (cfg.search_url, cfg.search_enabled)
        self._skills_watcher: SkillsWatcher | None = None
        self._watched: object = None
        self._skills_panel: SkillsPanel | None = None
        self._shown_server: ManagedServer | None = None
        # While the router is looked for or started, the picker lists from a stand-in.
        self._router_pending = False
        self._adding_model = False
        collect_garbage_on_gui_thread()
        self._models: dict[str, ModelInfo] = {}
        self._said_no_models = False

        # Pygments' lexers load on first use (~0.1 s); load them off the GUI thread now
        # rather than stall the first code block of the first reply.
        tasks.run_in_background(markdown.warm_up)
        self._build()
        self._follow_conversation()
        self._watch_skills()
        app.config_changed.connect(self._on_config_changed)
        app.router_changed.connect(self._on_router_changed)
        app.server_event.connect(self._on_server_event)
        if app.router.status in (PENDING, FAILED) or app.router.server is not None:
            self._on_router_changed(app.router)

        self.new_session()
        self._apply_model(self._model)
        self._refresh_skill_names()
        if self.history.recovered_from is not None:
            kept = (
                f"{self.history.salvaged} readable messages were copied into a new one"
                if self.history.salvaged
                else "a new one started"
            )
            self.show_problem(
                f"The history file was damaged; it was moved to {self.history.recovered_from} "
                f"and {kept}."
            )

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        self.setWindowTitle("llamachat")
        self.resize(1180, 800)
        # A fixed floor instead of one that follows the content: chips and attachments
        # coming and going would otherwise resize the window's limits on every change.
        self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.setMinimumSize(640, 420)

        self.model_picker = ModelPicker(
            self._registry, current=self.cfg.default_model, default_model=self.cfg.default_model
        )
        self.model_picker.model_changed.connect(self.set_model)
        self.model_picker.models_listed.connect(self._on_models_listed)
        self.model_picker.default_changed.connect(self._on_default_changed)
        model_label = QLabel("&Model")
        model_label.setBuddy(self.model_picker.combo)

        self.preset_picker = PresetPicker(self._prompts)
        self.preset_picker.preset_changed.connect(self._on_preset_changed)
        self.preset_picker.system_text_changed.connect(self._on_system_text_changed)
        preset_label = QLabel("&Prompt")
        preset_label.setBuddy(self.preset_picker.combo)

        self.search_action = QAction("Web search", self)
        self.search_action.setCheckable(True)
        self.search_action.setChecked(self.chat.search_on)
        self.search_action.setToolTip("Let the model search the web (SearXNG at search_url)")
        self.search_action.toggled.connect(self.set_search_enabled)
        self.search_button = QToolButton()
        self.search_button.setDefaultAction(self.search_action)
        self.search_button.setAccessibleName("Web search")
        self.search_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        # Fusion's dark palette barely shades a checked button: on must be plain to see.
        self.search_button.setStyleSheet(
            "QToolButton:checked { background-color: palette(highlight);"
            " color: palette(highlighted-text); border: 1px solid palette(highlight);"
            " border-radius: 3px; padding: 2px 5px; }"
        )

        self.skills_action = QAction("Skills…", self)
        self.skills_action.setToolTip(
            "The skills: describe, load, unload, import (or type /skills)"
        )
        self.skills_action.triggered.connect(self.open_skills_panel)
        self.skills_button = QToolButton()
        self.skills_button.setText("Skills")
        self.skills_button.setAccessibleName("Skills")
        self.skills_button.setToolTip(self.skills_action.toolTip())
        self.skills_button.clicked.connect(self.open_skills_panel)

        self.settings_action = QAction("Settings…", self)
        self.settings_action.setToolTip("Router, search, skills folders, default model, theme")
        self.settings_action.triggered.connect(self.open_settings)
        self.settings_button = QToolButton()
        self.settings_button.setText("Settings")
        self.settings_button.setAccessibleName("Settings")
        self.settings_button.setToolTip(self.settings_action.toolTip())
        self.settings_button.clicked.connect(self.open_settings)

        top_bar = QFrame()
        top_bar.setObjectName("topBar")
        top_bar.setAccessibleName("Chat settings")
        top = QHBoxLayout(top_bar)
        top.setContentsMargins(10, 6, 10, 6)
        top.setSpacing(8)
        top.addWidget(model_label)
        top.addWidget(self.model_picker, 1)
        top.addWidget(preset_label)
        top.addWidget(self.preset_picker)
        top.addSpacing(6)
        top.addWidget(self.search_button)
        top.addWidget(self.skills_button)
        top.addWidget(self.settings_button)
        rule = QFrame()
        rule.setFrameShape(QFrame.Shape.HLine)
        rule.setFrameShadow(QFrame.Shadow.Sunken)

        self.conversation = ConversationView()
        self.conversation.setAccessibleName("Conversation")
        self.conversation.set_font_size(self.cfg.font_size)
        self.conversation.retry_requested.connect(self.retry)
        self.conversation.regenerate_requested.connect(self.retry)
        self.conversation.edit_requested.connect(self.edit_message)

        self.first_run_panel = first_run.FirstRunPanel()
        self.first_run_panel.open_folder_requested.connect(self.open_models_folder)
        self.first_run_panel.add_file_requested.connect(self.choose_model_file)
        self.first_run_panel.check_requested.connect(self.check_models)
        self.first_run_panel.settings_requested.connect(self.open_settings)
        self.first_run_panel.log_requested.connect(self.show_server_log)

        self.skill_chips = SkillChips()
        self.skill_chips.unload_requested.connect(self.unload_skill)

        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.notice.connect(self.show_status)

        self.meter = ContextMeter(self._registry)
        # Only as wide as its bar and figures, so it sits at the status bar's right end.
        self.meter.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        self.composer.editor.textChanged.connect(lambda: self.meter.set_draft(self.composer.text()))
        self.statusBar().addPermanentWidget(self.meter)
        # A message longer than the bar is cut at its edge: hovering shows it whole.
        self.statusBar().messageChanged.connect(
            lambda text: self.statusBar().setToolTip(plain.tooltip(text))
        )

        self.sidebar = SessionSidebar(self.history, mode="chat")
        self.sidebar.session_activated.connect(self.open_session)
        self.sidebar.new_chat_requested.connect(self.new_session)
        self.sidebar.session_deleted.connect(self._on_session_deleted)
        self.sidebar.session_renamed.connect(self._on_session_renamed)
        self.session_changed.connect(self.sidebar.set_current)
        self.sidebar.setMinimumWidth(180)
        self.sidebar.list_view.setStyleSheet("QListView::item { padding: 5px 6px; }")

        chat = QWidget()
        body = QVBoxLayout()
        body.setContentsMargins(10, 4, 10, 6)
        body.addWidget(self.skill_chips)
        body.addWidget(self.composer)
        layout = QVBoxLayout(chat)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(top_bar)
        layout.addWidget(rule)
        layout.addWidget(self.first_run_panel)
        self.problem_bar = NoticeBar()
        problem_row = QVBoxLayout()
        problem_row.setContentsMargins(10, 6, 10, 0)
        problem_row.addWidget(self.problem_bar)
        layout.addLayout(problem_row)
        layout.addWidget(self.conversation, 1)
        layout.addLayout(body)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(chat)
        self.splitter.setCollapsible(1, False)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([SIDEBAR_WIDTH, max(400, self.width() - SIDEBAR_WIDTH)])
        self.setCentralWidget(self.splitter)
        # The sidebar keeps its own margins inside the splitter handle's reach.
        self.sidebar.layout().setContentsMargins(8, 8, 4, 8)

        self._build_menus()
        self._update_search_toggle()
        self._shortcuts = shortcuts.install(
            self,
            {
                "new_chat": self.new_session,
                "search_sessions": self.sidebar.focus_search,
                "stop": self.stop,
                "focus_composer": self.focus_composer,
                "copy_last_reply": self.copy_last_reply,
                "switch_model": self.model_picker.open_popup,
                "settings": self.open_settings,
                "shortcuts": self.show_shortcuts,
                "quit": self.quit_requested.emit,
            },
        )
        self.composer.editor.setFocus()

    def _build_menus(self) -> None:
        # Menu items show their keys after a tab instead of owning them: the window's
        # QShortcuts own every key, and a key bound twice is ambiguous and never fires.
        def keyed(action: QAction, name: str) -> QAction:
            action.setText(f"{action.text()}\t{shortcuts.BY_ACTION[name].shown()}")
            return action

        menus = self.menuBar()
        file_menu = menus.addMenu("&File")
        file_menu.addAction(
            keyed(QAction("New chat", self, triggered=self.new_session), "new_chat")
        )
        file_menu.addAction(self.sidebar.import_action)
        file_menu.addSeparator()
        file_menu.addAction(keyed(self.settings_action, "settings"))
        self.server_log_action = QAction("Server log…", self, triggered=self.show_server_log)
        self.server_log_action.setVisible(False)
        file_menu.addAction(self.server_log_action)
        self.add_model_action = QAction("Add GGUF model…", self, triggered=self.choose_model_file)
        self.add_model_action.setVisible(False)
        file_menu.addAction(self.add_model_action)
        file_menu.addSeparator()
        file_menu.addAction(QAction("Close window", self, triggered=self.close))
        quit_action = QAction("Quit", self, triggered=lambda: self.quit_requested.emit())
        file_menu.addAction(keyed(quit_action, "quit"))

        chat_menu = menus.addMenu("&Chat")
        chat_menu.addAction(
            keyed(
                QAction("Search chats", self, triggered=self.sidebar.focus_search),
                "search_sessions",
            )
        )
        chat_menu.addAction(
            keyed(
                QAction("Choose model", self, triggered=self.model_picker.open_popup),
                "switch_model",
            )
        )
        chat_menu.addAction(
            keyed(
                QAction("Copy last reply", self, triggered=self.copy_last_reply), "copy_last_reply"
            )
        )
        chat_menu.addAction(keyed(QAction("Stop reply", self, triggered=self.stop), "stop"))
        chat_menu.addSeparator()
        chat_menu.addAction(self.search_action)
        chat_menu.addAction(self.skills_action)
        chat_menu.addAction(
            QAction("Edit prompt presets…", self, triggered=self.preset_picker.edit_presets)
        )

        help_menu = menus.addMenu("&Help")
        help_menu.addAction(
            keyed(QAction("Keyboard shortcuts", self, triggered=self.show_shortcuts), "shortcuts")
        )

    # ------------------------------------------------------------------ public seams

    @property
    def cfg(self) -> Config:
        """The configuration in effect: the App's (never a copy of it)."""
        return self.app.config

    @property
    def history(self) -> History:
        """The chat history: the App's."""
        return self.app.history

    @property
    def _server(self) -> ManagedServer | None:
        return self.app.managed_server()

    @property
    def session_id(self) -> int | None:
        """The open session's id; None until the first message of a new chat is sent."""
        return self.chat.session_id

    @property
    def _model(self) -> str:
        return self.chat.model

    @property
    def _skills(self) -> SkillStore | None:
        return self.chat.store

    def is_streaming(self) -> bool:
        """True while a reply streams."""
        return self.chat.is_streaming()

    def running_workers(self) -> int:
        """Worker threads not yet ended (a stopped stream may still be closing its socket)."""
        return self.chat.threads.running()

    def show_status(self, text: str, timeout: int = STATUS_MS) -> None:
        """Say something in the status bar (timeout in ms; 0 keeps it)."""
        self.statusBar().showMessage(text, timeout)

    def show_problem(self, text: str) -> None:
        """Show a problem the user must act on, whole, above the chat until dismissed."""
        log.info("shown to the user: %s", text)
        self.problem_bar.show_text(text)

    def new_session(self) -> None:
        """Start an empty chat: no messages, no loaded skills; created on the first send."""
        if self.chat.is_streaming():
            self.stop()
        self.chat.new_session()
        # A custom prompt belongs to the chat it was written for; the preset carries over.
        self.preset_picker.set_session_prompt(self.preset_picker.current_name())
        self.conversation.clear()
        self.meter.set_used(0)
        self._update_title()

    def open_session(self, session_id: int) -> bool:
        """Show a stored chat with its model and loaded skills; False when it does not exist."""
        if self.chat.is_streaming():
            self.stop()
        opened = self.chat.open_session(session_id)
        if opened is None:
            self.show_status(f"Chat {session_id} no longer exists.")
            return False
        session, messages = opened
        self.preset_picker.set_session_prompt(
            session.get("prompt_name") or "", session.get("prompt_custom") or ""
        )
        if missing := self.chat.missing_skills():
            self.show_status(
                f"Skills of this chat no longer found: {', '.join(missing)}. "
                "The model does not get them; click a chip to remove it.",
                timeout=0,
            )
        self.conversation.load_messages(messages)
        if session.get("model"):
            self._apply_model(session["model"])
        self._show_usage(messages)
        self._update_title()
        return True

    def current_model(self) -> str:
        """The id of the model new replies come from ('' when none is known yet)."""
        return self._model

    def set_model(self, model_id: str) -> None:
        """Answer with `model_id` from now on (remembered on the open chat)."""
        self._apply_model(model_id)
        if self.session_id is not None and model_id:
            self.history.set_model(self.session_id, model_id)

    @Slot(object)
    def _on_router_changed(self, state: RouterState) -> None:
        """Follow the App's router: waiting for it, failed, or in use (maybe another one)."""
        if state.server is not None and state.server is not self._shown_server:
            self._show_managed_server(state.server)
        if state.status == PENDING:
            self._show_router_pending(state.text)
        elif state.status == FAILED:
            self._show_router_failed(state.text)
        else:
            self._use_registry(ready=state.status == READY)
            if state.status == READY:
                self.show_status(f"Using the llama.cpp router at {state.url}.")

    def _use_registry(self, *, ready: bool) -> None:
        """List from the App's registry: a new one (other servers), or the same after a wait.

        A router found at the URL already in use is kept as it is: a reply streaming
        from it goes on.
        """
        pending = self._leave_pending()
        if self.app.registry is not self._registry:
            if ready:
                self.stop()
            self._registry = self.app.registry
            self.model_picker.set_registry(self._registry)
            self.meter.set_registry(self._registry)
        elif pending:
            self.model_picker.set_registry(self._registry)
        elif ready:
            self.refresh_models()

    def _show_router_pending(self, text: str) -> None:
        """Say that the router is being looked for or started, until it is in use or failed.

        The window stays usable; the model picker waits instead of reporting the
        configured URL as unreachable.
        """
        if not self._router_pending:
            self._router_pending = True
            self.model_picker.set_registry(first_run.PendingRouter())
            self.model_picker.setEnabled(False)
        self.first_run_panel.show_pending(text)
        self.show_status(text, timeout=0)

    def _show_router_failed(self, message: str) -> None:
        """Show in the window why no router could be found or started (`message`, in full)."""
        if self._leave_pending():
            self.model_picker.set_registry(self._registry)
        self.first_run_panel.show_failure(message, has_log=self._server is not None)
        self.show_status(message.split("\n", 1)[0], timeout=0)

    def _leave_pending(self) -> bool:
        """End the waiting state; True when it was on (the caller gives the picker its source)."""
        if not self._router_pending:
            return False
        self._router_pending = False
        self.model_picker.setEnabled(True)
        if self.first_run_panel.state() == "pending":
            self.first_run_panel.dismiss()
        return True

    def models(self) -> list[ModelInfo]:
        """The models last listed by the router and providers."""
        return list(self._models.values())

    def refresh_models(self) -> None:
        """List the available models again in the background; the picker fills when they arrive."""
        self.model_picker.refresh()

    def search_enabled(self) -> bool:
        """Whether the model is offered the web_search tool (the Web search toggle)."""
        return self.chat.search_on

    @Slot(bool)
    def set_search_enabled(self, enabled: bool) -> None:
        """Offer web search to the model or not; the system message's date note follows."""
        enabled = enabled and bool(self.cfg.search_url)
        if self.search_action.isChecked() != enabled:
            self.search_action.setChecked(enabled)
        if enabled == self.chat.search_on:
            return
        self.chat.set_search_on(enabled)
        self.show_status("Web search on." if enabled else "Web search off.")

    def focus_composer(self) -> None:
        """Put the cursor in the message box."""
        self.composer.editor.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def copy_last_reply(self) -> str:
        """Copy the last reply's text to the clipboard; returns it ('' when there is none)."""
        view = self.conversation.last_assistant()
        text = view.content() if view is not None else ""
        if not text:
            self.show_status("No reply to copy yet.")
            return ""
        QGuiApplication.clipboard().setText(text)
        self.show_status("Copied the last reply.")
        return text

    def show_shortcuts(self) -> shortcuts.ShortcutsDialog:
        """Open Help > Keyboard shortcuts."""
        dialog = shortcuts.ShortcutsDialog(parent=self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def open_settings(self) -> SettingsDialog:
        """Open the Settings dialog; saving applies the new settings at once, in every window."""
        dialog = SettingsDialog(
            self.app.file_config,
            models=[info.id for info in self.model_picker.models()],
            store=self.app.save_settings,
            parent=self,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.saved.connect(lambda new: self.show_status(f"Settings saved to {new.path}."))
        dialog.open()
        return dialog

    def open_skills_panel(self) -> SkillsPanel | None:
        """Open the skills panel (also `/skills`); None when config.toml turned skills off."""
        if self._skills is None or self._skills_watcher is None:
            self.show_status(
                "Skills are turned off: set skills_enabled = true in config.toml to use them."
            )
            return None
        if self._skills_panel is not None:
            self._skills_panel.update_view()
            self._skills_panel.raise_()
            self._skills_panel.activateWindow()
            return self._skills_panel
        panel = SkillsPanel(
            self._skills,
            self.loaded_skills,
            import_dir=self.cfg.skills_dir,
            watcher=self._skills_watcher,
            parent=self,
        )
        panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        panel.load_requested.connect(self._on_panel_load)
        panel.unload_requested.connect(self.unload_skill)
        panel.destroyed.connect(self._on_panel_closed)
        self._skills_panel = panel
        panel.open()
        return panel

    def _show_managed_server(self, server: ManagedServer) -> None:
        """Offer the log and the models folder of the llama-server llamachat started."""
        self._shown_server = server
        self.server_log_action.setVisible(True)
        self.add_model_action.setVisible(True)
        if self.first_run_panel.state() == "empty":
            self._show_empty()

    def models_folder(self) -> Path | None:
        """The managed server's models folder (None for a router llamachat did not start)."""
        if self._server is None:
            return None
        return Path(self._server.cfg.models_dir).expanduser()

    def open_models_folder(self) -> Path | None:
        """Show the managed server's models folder in the file manager, creating it if missing."""
        folder = self.models_folder()
        if folder is None:
            self._say_problem(
                "llamachat did not start this router: its models are in the folder its "
                "--models-dir option names."
            )
            return None
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._say_problem(f"Cannot create the models folder {folder}: {exc.strerror or exc}")
            return None
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            self.show_status(f"No file manager could be opened; the models folder is {folder}.")
        return folder

    def choose_model_file(self) -> None:
        """Ask for a GGUF file and add it to the managed server's models folder."""
        path, _filter = QFileDialog.getOpenFileName(
            self, "Add a GGUF model", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.add_model_file(Path(path))

    def add_model_file(self, path: Path) -> None:
        """Link (or copy) a GGUF into the managed server's models folder, then list it.

        Runs on a worker thread (a copy can take minutes); the router re-scans its folder
        and the model picker lists the model. A file that is not a usable GGUF is
        explained in the window.
        """
        server = self._server
        folder = self.models_folder()
        if server is None or folder is None:
            self._say_problem(
                "llamachat did not start this router: put the file in the folder its "
                "--models-dir option names."
            )
            return
        if self._adding_model:
            self.show_status("A model file is being added already.")
            return
        self._adding_model = True
        path = Path(path)
        url, api_key = server.url, self.cfg.api_key()
        self.first_run_panel.set_busy(f"Adding {path.name}…")
        self.show_status(f"Adding {path.name} to {folder}…", timeout=0)
        tasks.run_in_background(
            lambda: first_run.add_model(path, folder, url, api_key=api_key),
            lambda future: self._on_model_file_added(path.name, future),
            receiver=self,
        )

    def check_models(self) -> None:
        """Make the router re-scan its models folder, then list the models again."""
        url = self._server.url if self._server is not None else self.cfg.router_url
        api_key = self.cfg.api_key()
        self.first_run_panel.set_problem("")
        tasks.run_in_background(
            lambda: first_run.rescan(url, api_key=api_key),
            lambda future: self._on_rescanned(str(future.result())),
            receiver=self,
        )

    def _on_model_file_added(self, name: str, future: Future) -> None:
        self._adding_model = False
        self.first_run_panel.set_busy("")
        error = future.result()
        if error:
            self.statusBar().clearMessage()
            self._say_problem(error)
            return
        self.show_status(f"Added {name} to the models folder.")
        self.refresh_models()

    def _on_rescanned(self, error: str) -> None:
        if error:
            self._say_problem(error)
        else:
            self.show_status("Asked the router to look for models again.")
        self.refresh_models()

    def _say_problem(self, text: str) -> None:
        """Explain a failed models-folder action on the panel (when shown) and the status bar."""
        if self.first_run_panel.state() != "hidden":
            self.first_run_panel.set_problem(text)
        else:
            self.show_problem(text)

    def _show_empty(self) -> None:
        self.first_run_panel.show_empty(models_dir=self.models_folder(), url=self.cfg.router_url)

    def show_server_log(self) -> ServerLogDialog | None:
        """Open the tail of the managed server's log (None when llamachat started no server)."""
        if self._server is None:
            self.show_status("llamachat did not start a llama-server: it has no log to show.")
            return None
        dialog = ServerLogDialog(self._server, parent=self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def loaded_skills(self) -> list[str]:
        """The skills loaded for this chat, in load order."""
        return self.chat.loaded_skills()

    def load_skill(self, name: str) -> bool:
        """Load a skill into the chat's system message; True when it was not loaded before."""
        return self.chat.load_skill(name)

    @Slot(str)
    def unload_skill(self, name: str) -> None:
        """Drop a skill from the chat's system message."""
        if self.chat.unload_skill(name):
            self.show_status(f"Unloaded skill {name}.")

    def system_message(self) -> str:
        """The system message every request starts with; cached until the loaded skills change."""
        return self.chat.system_message()

    def next_turn(self, model: str | None = None) -> turn.Turn:
        """The next request to `model` (default: the chat's): the system message, the chat so far."""
        return self.chat.next_turn(model)

    def request_messages(self) -> list[dict]:
        """The messages of the next request: the system message, then the chat so far."""
        return self.chat.next_turn().messages()

    # ------------------------------------------------------------------ sending

    @Slot()
    def send(self) -> None:
        """Send the composer's message (loading any skills it names) and stream the reply."""
        if self.chat.is_streaming():
            self.show_status("A reply is still coming: stop it (Esc) before sending.")
            return
        if self.composer.is_empty():
            return
        typed = self.composer.text()
        attachments = self.composer.attachments()
        if typed.strip() == "/skills" and not attachments and not self._is_skill("skills"):
            self.composer.clear()
            self.open_skills_panel()
            return
        outcome = self.chat.submit(typed, [item.to_dict() for item in attachments])
        if outcome == controller.NO_MODEL:
            self.show_status("No model to answer: pick one in the Model list.")
        elif outcome in (controller.SENT, controller.HELD):
            self.composer.clear()

    @Slot()
    def stop(self) -> None:
        """Stop the reply now, keeping what arrived (saved as "stopped"); else leave editing."""
        if self.chat.stop():
            self.show_status("Stopped.")

    @Slot(object)
    def retry(self, message_id: object) -> None:
        """Ask for a reply again; the earlier one (and what followed) stays until it has text."""
        if self.chat.is_streaming():
            self.stop()
        self.chat.retry(message_id)

    @Slot(object)
    def edit_message(self, message_id: object) -> None:
        """Put a sent message back in the composer; sending replaces it and what followed."""
        if self.chat.is_streaming():
            self.stop()
        message = self.chat.edit(message_id)
        if message is None:
            return
        self.composer.set_text(message["content"])
        self.composer.set_attachments(
            [Attachment.from_dict(item) for item in message.get("attachments") or []]
        )
        self.composer.editor.setFocus()

    # ------------------------------------------------------------------ conversation events

    def _follow_conversation(self) -> None:
        chat = self.chat
        chat.session_changed.connect(self.session_changed)
        chat.message_added.connect(self._on_message_added)
        chat.messages_reset.connect(self.conversation.load_messages)
        chat.reply_started.connect(self._on_reply_started)
        chat.reply_ended.connect(self._on_reply_ended)
        chat.skills_changed.connect(self._show_skill_chips)
        chat.store_changed.connect(self._on_store_changed)
        chat.stats.connect(self.meter.update_from_stats)
        chat.notice.connect(self._on_notice)

    @Slot(str, int)
    def _on_notice(self, text: str, timeout: int) -> None:
        # A notice meant to stay (timeout 0) is a problem the user must act on.
        if timeout == 0:
            self.show_problem(text)
        else:
            self.show_status(text, timeout)

    @Slot(object)
    def _on_message_added(self, message: dict) -> None:
        # The new chat's title (or the chat's new place at the top) shows at once.
        self.sidebar.refresh()
        self.conversation.append_message(message)
        self._update_title()

    @Slot(object)
    def _on_reply_started(self, reply: ReplyStream) -> None:
        reply.attach(self.conversation.append_message(reply.row()))
        self.composer.set_streaming(True)
        self.streaming_changed.emit(True)
        self.conversation.scroll_to_bottom()

    @Slot(str, str)
    def _on_reply_ended(self, status: str, error: str) -> None:
        self.composer.set_streaming(False)
        self.sidebar.refresh()
        self.streaming_changed.emit(False)

    @Slot(object)
    def _on_store_changed(self, store: SkillStore | None) -> None:
        if store is not self._watched:
            self._watch_skills()
        self._refresh_skill_names()

    # ------------------------------------------------------------------ skills and models

    def _show_skill_chips(self, _names: object = None) -> None:
        # A chip per loaded skill; the ones gone from disk struck through.
        self.skill_chips.set_skills(
            self.chat.loaded_skills(), frozenset(self.chat.missing_skills())
        )

    def _refresh_skill_names(self) -> None:
        if self._skills is not None:
            self.composer.offer_skills(self._skills)
        self._show_skill_chips()

    def _update_title(self) -> None:
        session = self.history.get_session(self.session_id) if self.session_id else None
        title = (session["title"] if session else "") or "New chat"
        self.setWindowTitle(f"{title} — llamachat")

    def _show_usage(self, messages: list[MessageRow]) -> None:
        """Put the context use of a chat's last reply on the meter."""
        for message in reversed(messages):
            if message["role"] == "assistant" and (message.get("usage") or message.get("timings")):
                self.meter.set_used(0)
                self.meter.update_from_stats(
                    {"usage": message.get("usage") or {}, "timings": message.get("timings") or {}}
                )
                return
        self.meter.set_used(0)

    def _reads_images(self, model: str) -> bool:
        return "image" in self.model_picker.modalities(model)

    def _apply_model(self, model_id: str) -> None:
        changed = model_id != self._model
        self.chat.model = model_id
        if self.model_picker.current_model() != model_id:
            self.model_picker.set_current(model_id)
        self.composer.set_model(model_id, images=self._reads_images(model_id))
        self.meter.set_model(model_id)
        if changed:
            self.model_changed.emit(model_id)

    @Slot(list)
    def _on_models_listed(self, infos: list) -> None:
        self._models = {info.id: info for info in infos}
        # The modalities may have arrived only now (a chat's model listed after it opened).
        self.composer.set_model(self._model, images=self._reads_images(self._model))
        if self._router_pending:
            # A listing asked for before the wait began: the router it reached is not yet
            # known to be the one llamachat will use, so it is no news about models.
            self.models_listed.emit(infos)
            return
        # Said once per empty spell, not at every poll; a source that failed is shown by
        # the picker with its own message instead.
        said, self._said_no_models = self._said_no_models, not infos
        if not infos and not said and not self._registry.errors:
            self.show_status(
                f"The router at {self.cfg.router_url} offers no models: add GGUF files "
                "to its models folder.",
                timeout=0,
            )
        self._update_first_run(infos)
        self.models_listed.emit(infos)

    def _update_first_run(self, infos: list[ModelInfo]) -> None:
        """Say where models go while there is nothing to chat with; step aside once there is.

        Only for a router on this machine: for a remote one llamachat can neither tell
        where its models live nor put any there.
        """
        if infos:
            if self.first_run_panel.state() != "hidden":
                self.first_run_panel.dismiss()
        elif providers.ROUTER not in self._registry.errors and (
            self._server is not None or is_loopback(self.cfg.router_url)
        ):
            self._show_empty()

    @Slot(str)
    def _on_default_changed(self, model_id: str) -> None:
        try:
            self.app.save_settings({"default_model": model_id})
        except ConfigError as exc:
            self.show_problem(f"The default model was not saved: {exc}")
            return
        self.show_status(
            f"{model_id} is the default model for new chats."
            if model_id
            else "No default model: llamachat picks one."
        )

    @Slot(str, str)
    def _on_preset_changed(self, name: str, custom: str) -> None:
        if self.session_id is not None:
            try:
                self.history.set_prompt(self.session_id, name, custom)
            except HistoryError as exc:
                self.show_problem(f"The chat's prompt could not be saved: {exc}")

    @Slot(str)
    def _on_system_text_changed(self, text: str) -> None:
        self.chat.system_text_changed()

    @Slot(int)
    def _on_session_deleted(self, session_id: int) -> None:
        if session_id == self.session_id:
            self.new_session()

    @Slot(int, str)
    def _on_session_renamed(self, session_id: int, _title: str) -> None:
        if session_id == self.session_id:
            self._update_title()

    # ------------------------------------------------------------------ skills on disk

    def _is_skill(self, name: str) -> bool:
        return self._skills is not None and name in self._skills.user_names()

    def _watch_skills(self) -> None:
        """Follow the skills folders on disk (a new store after the settings changed them)."""
        if self._skills_panel is not None:
            self._skills_panel.close()
            self._skills_panel = None
        if self._skills_watcher is not None:
            self._skills_watcher.deleteLater()
            self._skills_watcher = None
        self._watched = self._skills
        if self._skills is not None:
            self._skills_watcher = SkillsWatcher(self._skills, parent=self)
            self._skills_watcher.changed.connect(self._refresh_skill_names)
        self.skills_button.setEnabled(self._skills is not None)
        self.skills_action.setEnabled(self._skills is not None)

    @Slot(str)
    def _on_panel_load(self, name: str) -> None:
        if self.load_skill(name):
            self.show_status(f"Loaded skill {name}.")

    @Slot()
    def _on_panel_closed(self) -> None:
        self._skills_panel = None

    # ------------------------------------------------------------------ settings and server

    def _update_search_toggle(self) -> None:
        offered = bool(self.cfg.search_url)
        self.search_button.setVisible(offered)
        self.search_action.setVisible(offered)

    @Slot(object)
    def _on_config_changed(self, cfg: Config) -> None:
        """Follow settings saved in any window: default model, font, web search (skills: `chat`)."""
        self.model_picker.set_default(cfg.default_model)
        self.conversation.set_font_size(cfg.font_size)
        search_from = (cfg.search_url, cfg.search_enabled)
        if search_from != self._search_from:
            self._search_from = search_from
            self._update_search_toggle()
            self.set_search_enabled(cfg.search_enabled)

    @Slot(str, str)
    def _on_server_event(self, kind: str, message: str) -> None:
        if kind == "gave_up":
            return  # the App marked the router failed: _on_router_changed said why
        text = first_run.event_text(kind, message)
        if kind == "starting" and self._router_pending:
            self.first_run_panel.show_pending(text)
        # A start can take a minute and a restart follows an exit: each stays until the next.
        self.show_status(text, timeout=STATUS_MS if kind in ("ready", "stopped") else 0)

    # ------------------------------------------------------------------ closing

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save a streaming reply as stopped and let the worker threads end."""
        self.stop()
        self.chat.close()
        if not self.chat.threads.wait_all(10_000):
            log.warning("a worker thread did not end within 10 s of closing the window")
        self.model_picker.shutdown()
        super().closeEvent(event)
