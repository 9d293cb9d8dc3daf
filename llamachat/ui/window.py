"""The chat window: sessions, the conversation, the composer, and the chrome around them.

`ChatWindow(app)` is built from the `App` alone, which owns the configuration, the
History, the registry and the router's state: the window reads them there and
follows its signals (Settings saved in any window, the router found or started).
The GUI thread owns every widget and the History's SQLite connection; replies stream in a
`StreamWorker` on its own thread, which only emits signals. The sessions sidebar sits
on the left; a top bar (`top_bar.TopBar`) holds the model picker, the prompt preset,
the web search toggle (`search_toggle.SearchToggle`), Skills and Settings; the status
bar carries the context meter. The model picker and the meter ask the server on the
task runner (`tasks`), through the App's `providers.Registry`. While the router is
looked for or started, when none could be had, and while it offers no models, the
getting-started panel (`first_run.FirstRunPanel`) sits above the conversation and
says what to do.

The window lays these out; its other jobs have their own owners: starting, opening
and forking chats (with the title, prompt and meter that follow the open one), and
reopening the one shown last, are `chat_sessions.ChatSessions`'; the router's state, the models folder and the server log are the
`router_guide.RouterGuide`'s; the skills panel, chips and the composer's skill names
are `chat_skills.ChatSkills`'; the chosen model (applied to the chat, the composer and
the meter) and the default star are `models.choice.ModelChoice`'s; a message too long
for the context is `overflow.OverflowGuide`'s; the menus and keyboard shortcuts are
built by `menus.install` from the window's commands.

Sending, Stop, Retry, Edit, the loaded skills and the streaming reply are the
conversation's (`conversation.Conversation`, shared with the quick window): the window
forwards what the user does and shows what it signals; the accessors both windows
answer (session, model, streaming, skills) are `seams.ConversationSeams`'. A reply is
saved as it streams (`reply.ReplyStream`): the user message first, then an assistant
row with status "streaming" that a one-second timer rewrites, so a crash loses at
most a second of text; the final save marks it "complete", "stopped" or "error".

Errors: none of its own. Backend failures are shown inline on the reply with a
Retry; a model list that cannot be fetched is shown beside the model picker;
other environment problems (an attachment that cannot be read, a config file that
cannot be written) go to the status bar.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QCloseEvent, QGuiApplication, QShortcut
from PySide6.QtWidgets import (
    QFrame,
    QLayout,
    QMainWindow,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from llamachat import prompts
from llamachat.config import Config
from llamachat.router.models import ModelInfo
from llamachat.ui import first_run, menus, plain, shortcuts, tasks
from llamachat.ui.app import App
from llamachat.ui.chat import conversation, send_check
from llamachat.ui.chat.composer_drafts import Drafts
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.chat.seams import ConversationSeams
from llamachat.ui.chat.worker import collect_garbage_on_gui_thread
from llamachat.ui.chat_sessions import ChatSessions
from llamachat.ui.library.chat_libraries import ChatLibraries
from llamachat.ui.mcp.mcp_panel import McpPanel, choose_and_import
from llamachat.ui.memory.chat_memories import ChatMemories
from llamachat.ui.models.choice import ModelChoice
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.router_guide import RouterGuide
from llamachat.ui.settings import SettingsDialog
from llamachat.ui.skills.chat_skills import ChatSkills
from llamachat.ui.views import markdown
from llamachat.ui.views.chips import SkillChips, SkillSuggestions
from llamachat.ui.views.composer import Composer
from llamachat.ui.views.messages import MessagesView
from llamachat.ui.views.meter import ContextMeter
from llamachat.ui.views.notice import STATUS_MS, NoticeBar
from llamachat.ui.views.overflow import OverflowGuide, OverflowPanel
from llamachat.ui.views.params_panel import ChatParams
from llamachat.ui.views.presets import PresetPicker
from llamachat.ui.views.project_menus import ProjectChoices
from llamachat.ui.views.search_toggle import SearchToggle
from llamachat.ui.views.sidebar import SessionSidebar
from llamachat.ui.views.summary import CompactingView, TrimMarker
from llamachat.ui.views.temporary_bar import TemporaryBar, TemporaryChats
from llamachat.ui.views.top_bar import TopBar

log = logging.getLogger(__name__)

SIDEBAR_WIDTH = 260


class ChatWindow(ConversationSeams, QMainWindow):
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
            images=lambda model: self.model_choice.reads_images(model),
            model_status=lambda model: self.model_picker.status(model),
            parent=self,
        )
        collect_garbage_on_gui_thread()

        # Pygments' lexers load on first use (~0.1 s); load them off the GUI thread now
        # rather than stall the first code block of the first reply.
        tasks.run_in_background(markdown.warm_up)
        self._build()
        self._follow_conversation()
        app.config_changed.connect(self._on_config_changed)
        self.router_guide.start()

        self.sessions.reopen()
        self.model_choice.apply(self.chat.model)
        self.skills.refresh_names()
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
        main_layout = self.layout()  # a QMainWindow always has its own
        if main_layout is not None:
            main_layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.setMinimumSize(800, 480)

        self.model_picker = ModelPicker(
            self.app.registry, current=self.cfg.default_model, default_model=self.cfg.default_model
        )
        self.preset_picker = PresetPicker(self._prompts)
        self.preset_picker.system_text_changed.connect(self._on_system_text_changed)

        self.web_search = SearchToggle(self.app, self.chat, parent=self)
        self.web_search.status.connect(self.show_status)
        self.chat_params = ChatParams(self.chat, parent=self)
        self.top_bar = TopBar(self.model_picker, self.preset_picker, self.web_search.button)
        self.top_bar.settings_requested.connect(self.open_settings)

        self.messages = MessagesView(forks=True)
        self.messages.setAccessibleName("Conversation")
        self.messages.set_font_size(self.cfg.font_size)
        self.messages.retry_requested.connect(self.retry)
        self.messages.regenerate_requested.connect(self.retry)
        self.messages.continue_requested.connect(self.chat.continue_reply)
        self.messages.edit_requested.connect(self.edit_message)
        self.messages.version_requested.connect(self.chat.show_version)
        self.messages.fork_requested.connect(self.fork)

        self.first_run_panel = first_run.FirstRunPanel()
        self.first_run_panel.settings_requested.connect(self.open_settings)
        self.problem_bar = NoticeBar()

        self.skill_chips = SkillChips()
        self.skill_suggestions = SkillSuggestions()

        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.notice.connect(self.show_status)
        self.libraries = ChatLibraries(
            self.app, self.chat, composer=self.composer, status_bar=self.statusBar(), parent=self
        )
        self.libraries.status.connect(self.show_status)
        self.memories = ChatMemories(
            self.app, self.chat, self.messages, self.statusBar(), parent=self
        )
        self.memories.status.connect(self.show_status)
        self.skills = ChatSkills(
            self.app,
            self.chat,
            chips=self.skill_chips,
            suggestions=self.skill_suggestions,
            composer=self.composer,
            top_bar=self.top_bar,
            parent=self,
        )
        self.skills.status.connect(self.show_status)
        self.top_bar.skills_requested.connect(self.skills.open_panel)

        self.meter = ContextMeter(self.app.registry)
        # Only as wide as its bar and figures, so it sits at the status bar's right end.
        self.meter.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        self.meter.follow(self.chat.context)
        self.meter.follow_cache(self.chat.warmer)
        # The cache warm-up follows the typing and the model's loads.
        warmer = self.chat.warmer
        self.composer.editor.textChanged.connect(lambda: warmer.draft_changed(self.composer.text()))
        self.model_picker.model_event.connect(warmer.statuses_changed)
        self.model_picker.models_listed.connect(warmer.statuses_changed)
        # The picker's choice goes to the chat, the composer and the meter.
        self.model_choice = ModelChoice(
            self.app,
            self.chat,
            picker=self.model_picker,
            composer=self.composer,
            meter=self.meter,
            parent=self,
        )
        self.model_choice.changed.connect(self.model_changed)
        self.model_choice.status.connect(self.show_status)
        self.model_choice.problem.connect(self.show_problem)
        # After the choice is applied: the panel shows the defaults of the model now chosen.
        self.model_picker.model_changed.connect(self.chat_params.refresh)
        self.overflow = OverflowPanel()
        # The message goes along to the new chat, still there to send.
        self.overflow.new_chat.connect(self._new_chat_with_message)
        self.overflow_guide = OverflowGuide(
            self.app, self.chat, composer=self.composer, panel=self.overflow, parent=self
        )
        self.overflow_guide.status.connect(self.show_status)
        self.overflow_guide.problem.connect(self.show_problem)
        self.overflow_guide.send_requested.connect(self.send)
        self.trim_marker = TrimMarker()
        self.compacting = compacting = CompactingView()
        compaction = self.chat.compaction
        compaction.started.connect(
            lambda: compacting.start(self.messages.reading_speed(self.chat.model))
        )
        compaction.progress.connect(compacting.set_title)
        compaction.written.connect(compacting.show_written)
        compaction.ended.connect(lambda _status, _error: compacting.hide())
        self.chat.compaction.trimmed.connect(self.trim_marker.set_count)
        # Beside the meter: the top bar has no room left at 900 px for a long model name.
        self.statusBar().addPermanentWidget(self.chat_params.button)
        self.statusBar().addPermanentWidget(self.meter)
        # A message longer than the bar is cut at its edge: hovering shows it whole.
        self.statusBar().messageChanged.connect(
            lambda text: self.statusBar().setToolTip(plain.tooltip(text))
        )

        self.router_guide = RouterGuide(
            self.app,
            panel=self.first_run_panel,
            picker=self.model_picker,
            meter=self.meter,
            parent=self,
        )
        self.router_guide.status.connect(self.show_status)
        self.router_guide.problem.connect(self.show_problem)
        self.router_guide.router_replaced.connect(self.stop)
        self.model_choice.listed.connect(self.router_guide.show_listing)
        self.model_choice.listed.connect(self.models_listed)

        self.sidebar = SessionSidebar(self.history, mode="chat")
        self.sidebar.new_chat_requested.connect(self.new_session)
        self.sidebar.problem.connect(self.show_problem)
        self.sidebar.libraries = self.app.libraries
        self.sidebar.project_choices = lambda: ProjectChoices(
            self.preset_picker.names(),
            [info.id for info in self.model_picker.models()],
            self.chat.store.names() if self.chat.store else [],
        )
        # A temporary chat is none of the list's: its ids are those of its memory database.
        self.session_changed.connect(
            lambda sid: self.sidebar.set_current(None if self.chat.scratch else sid)
        )
        self.sidebar.setMinimumWidth(180)
        self.sidebar.list_view.setStyleSheet("QListView::item { padding: 5px 6px; }")

        self.drafts = Drafts(self.composer, self.chat, parent=self)
        self.drafts.status.connect(self.show_status)
        self.drafts.drafted.connect(self.sidebar.show_draft)
        self.sessions = ChatSessions(
            self.chat,
            view=self.messages,
            drafts=self.drafts,
            presets=self.preset_picker,
            meter=self.meter,
            choice=self.model_choice,
            sidebar=self.sidebar,
            stop=self.stop,
            parent=self,
        )
        self.temporary_bar = TemporaryBar()
        self.temporary = TemporaryChats(
            self.chat,
            self.temporary_bar,
            open_chat=self.sessions.open,
            new_chat=self.sessions.new,
            save_draft=self.drafts.save,
            parent=self,
        )
        self.sessions.may_leave = self.temporary.may_leave
        self.sessions.status.connect(self.show_status)
        self.sessions.problem.connect(self.show_problem)
        self.sessions.title_changed.connect(
            lambda title: self.setWindowTitle(f"{title} — llamachat")
        )

        self.splitter = _lay_out(self)

        self.web_search.offer()
        self._shortcuts = _install_menus(self)
        self.composer.editor.setFocus()

    # ------------------------------------------------------------------ public seams

    # (the session, model, streaming state and skills: `ConversationSeams`, from `chat`)

    def show_status(self, text: str, timeout: int = STATUS_MS) -> None:
        """Say something in the status bar (timeout in ms; 0 keeps it)."""
        self.statusBar().showMessage(text, timeout)

    def show_problem(self, text: str) -> None:
        """Show a problem the user must act on, whole, above the chat until dismissed."""
        log.info("shown to the user: %s", text)
        self.problem_bar.show_text(text)

    def new_session(self) -> None:
        """Start an empty chat: no messages, no loaded skills; created on the first send."""
        self.sessions.new()

    @Slot()
    def _new_chat_with_message(self) -> None:
        self.sessions.new(carry=True)

    def open_session(self, session_id: int) -> bool:
        """Show a stored chat with its model and loaded skills; False when it does not exist."""
        return self.sessions.open(session_id)

    def fork(self, message_id: object) -> bool:
        """Open a new chat holding this chat up to `message_id` ("New chat from here")."""
        return self.sessions.fork(message_id)

    def set_model(self, model_id: str) -> None:
        """Answer with `model_id` from now on (remembered on the open chat)."""
        self.model_choice.set_model(model_id)

    def models(self) -> list[ModelInfo]:
        """The models last listed by the router and providers."""
        return self.model_choice.models()

    def focus_composer(self) -> None:
        """Make this window active and put the cursor in its message box (also as a dialog closes)."""
        self.activateWindow()
        self.composer.editor.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def copy_last_reply(self) -> str:
        """Copy the last reply's text to the clipboard; returns it ('' when there is none)."""
        view = self.messages.last_assistant()
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
        dialog.finished.connect(self.focus_composer)
        dialog.open()
        return dialog

    def open_settings(self) -> SettingsDialog:
        """Open the Settings dialog; saving applies the new settings at once, in every window."""
        dialog = SettingsDialog(
            self.app.file_config,
            models=[info.id for info in self.model_picker.models()],
            store=self.app.save_settings,
            shortcut_note=self.app.shortcut_note,
            parent=self,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.saved.connect(lambda new: self.show_status(f"Settings saved to {new.path}."))
        dialog.open()
        return dialog

    def open_mcp_panel(self) -> McpPanel:
        """Open the MCP servers panel: states, tools and their token budget."""
        panel = McpPanel(
            self.app,
            context_size=self.meter.context_size,
            takes_tools=self.chat.context.takes_tools,
            parent=self,
        )
        panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        panel.finished.connect(self.focus_composer)
        panel.show()
        return panel

    def import_mcp_servers(self) -> None:
        """File > Import MCP servers…: add an mcp.json's servers to config.toml."""
        said = choose_and_import(self.app, self)
        if said:
            self.show_status(said)

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
        if (
            typed.strip() == "/skills"
            and not attachments
            and not self.skills.is_user_skill("skills")
        ):
            self.composer.clear()
            self.skills.open_panel()
            return
        outcome = self._submit_draft()
        if outcome == conversation.NO_MODEL:
            self.show_status("No model to answer: pick one in the Model list.")
        elif outcome in (conversation.SENT, conversation.HELD, send_check.COUNTING):
            self.overflow.hide()

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
        self._put_back(self.chat.edit(message_id))

    # ------------------------------------------------------------------ conversation events

    def _follow_conversation(self) -> None:
        chat = self.chat
        chat.session_changed.connect(self.session_changed)
        chat.message_added.connect(self.messages.append_message)
        chat.messages_reset.connect(self.messages.load_messages)
        chat.versions_changed.connect(self.messages.set_versions)
        chat.editing.connect(self.messages.set_editing)
        chat.reply_started.connect(self._on_reply_started)
        chat.reply_ended.connect(self._on_reply_ended)
        chat.stats.connect(self.meter.update_from_stats)
        chat.notice.connect(self._on_notice)
        chat.returned.connect(self._put_back_unsent)
        compaction = chat.compaction
        compaction.started.connect(lambda: self.composer.set_streaming(True))
        compaction.ended.connect(lambda _status, _error: self.composer.set_streaming(False))
        compaction.progress.connect(lambda text: self.show_status(text, STATUS_MS))
        self.messages.summary_edited.connect(compaction.edit_summary)

    @Slot(str, int)
    def _on_notice(self, text: str, timeout: int) -> None:
        # A notice meant to stay (timeout 0) is a problem the user must act on.
        if timeout == 0:
            self.show_problem(text)
        else:
            self.show_status(text, timeout)

    @Slot(object)
    def _on_reply_started(self, reply: ReplyStream) -> None:
        reply.attach(self.messages.append_message(reply.row()))
        self.composer.set_streaming(True)
        self.streaming_changed.emit(True)
        self.messages.scroll_to_bottom()

    @Slot(str, str)
    def _on_reply_ended(self, status: str, error: str) -> None:
        self.composer.set_streaming(False)
        self.streaming_changed.emit(False)

    @Slot(str)
    def _on_system_text_changed(self, text: str) -> None:
        self.chat.system_text_changed()

    # ------------------------------------------------------------------ settings

    @Slot(object)
    def _on_config_changed(self, cfg: Config) -> None:
        """Follow settings saved in any window: font and web search (model: `model_choice`)."""
        self.messages.set_font_size(cfg.font_size)
        self.web_search.follow(cfg)

    # ------------------------------------------------------------------ closing

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the draft and a streaming reply (as stopped) and let the worker threads end;
        a temporary chat with content is kept or discarded as the user says."""
        self.temporary.may_leave(closing=True)
        self.drafts.save()
        self.stop()
        self.chat.close()
        if not self.chat.threads.wait_all(10_000):
            log.warning("a worker thread did not end within 10 s of closing the window")
        self.model_picker.shutdown()
        super().closeEvent(event)


def _install_menus(window: ChatWindow) -> list[QShortcut]:
    """Give the window its menus and keyboard shortcuts, from its commands and its parts' actions."""
    router = window.router_guide
    commands = menus.Commands(
        new_chat=window.new_session,
        new_temporary_chat=window.temporary.start,
        search_sessions=window.sidebar.focus_search,
        stop=window.stop,
        focus_composer=window.focus_composer,
        copy_last_reply=window.copy_last_reply,
        switch_model=window.model_picker.open_popup,
        settings=window.open_settings,
        shortcuts=window.show_shortcuts,
        quit=window.quit_requested.emit,
        import_mcp_servers=window.import_mcp_servers,
        close=window.close,
        mcp_servers=window.open_mcp_panel,
        edit_presets=window.preset_picker.edit_presets,
        compact_chat=window.chat.compaction.compact,
        memory=window.memories.open_panel,
    )
    actions = menus.Actions(
        import_chats=window.sidebar.import_action,
        settings=window.top_bar.settings_action,
        router=[
            router.server_log_action,
            router.add_model_action,
            router.get_model_action,
            router.delete_model_action,
            router.model_options_action,
        ],
        web_search=window.web_search.action,
        skills=window.top_bar.skills_action,
        about=router.about_action,
    )
    return menus.install(window, commands, actions)


def _lay_out(window: ChatWindow) -> QSplitter:
    """Put the window's widgets in their places: the sessions sidebar beside the chat (the top
    bar, the getting-started panel, problems, the conversation, then the composer with its
    notices and chips); the splitter between them."""
    chat = QWidget()
    body = QVBoxLayout()
    body.setContentsMargins(10, 4, 10, 6)
    body.addWidget(window.overflow)
    body.addWidget(window.compacting)
    body.addWidget(window.trim_marker)
    body.addWidget(window.skill_chips)
    body.addWidget(window.skill_suggestions)
    body.addWidget(window.composer)
    layout = QVBoxLayout(chat)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    layout.addWidget(window.top_bar)
    rule = QFrame()
    rule.setFrameShape(QFrame.Shape.HLine)
    rule.setFrameShadow(QFrame.Shadow.Sunken)
    layout.addWidget(rule)
    layout.addWidget(window.first_run_panel)
    problem_row = QVBoxLayout()
    problem_row.setContentsMargins(10, 6, 10, 0)
    problem_row.addWidget(window.problem_bar)
    problem_row.addWidget(window.temporary_bar)
    layout.addLayout(problem_row)
    layout.addWidget(window.messages, 1)
    layout.addLayout(body)

    splitter = QSplitter(Qt.Orientation.Horizontal)
    splitter.addWidget(window.sidebar)
    splitter.addWidget(chat)
    splitter.setCollapsible(1, False)
    chat.setMinimumWidth(600)  # room for the reply figures: the sidebar narrows first
    splitter.setStretchFactor(0, 0)
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([SIDEBAR_WIDTH, max(400, window.width() - SIDEBAR_WIDTH)])
    window.setCentralWidget(splitter)
    # The sidebar keeps its own margins inside the splitter handle's reach.
    sidebar_layout = window.sidebar.layout()
    if sidebar_layout is not None:
        sidebar_layout.setContentsMargins(8, 8, 4, 8)
    return splitter
