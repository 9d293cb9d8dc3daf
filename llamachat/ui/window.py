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

`views.window_parts.build` makes these parts, connects them to one another and lays them
out; the window connects them to its commands. Its other jobs have their own owners: starting, opening
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
    QMainWindow,
    QWidget,
)

from llamachat import prompts
from llamachat.config import Config
from llamachat.router.models import ModelInfo
from llamachat.ui import menus, shortcuts, tasks
from llamachat.ui.app import App
from llamachat.ui.chat import conversation, send_check
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.chat.seams import ConversationSeams
from llamachat.ui.chat.worker import collect_garbage_on_gui_thread
from llamachat.ui.mcp.mcp_panel import McpPanel, choose_and_import
from llamachat.ui.models.in_use import UnloadGuard
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.settings import SettingsDialog
from llamachat.ui.views import compare_view, markdown, window_parts
from llamachat.ui.views.notice import STATUS_MS
from llamachat.ui.views.presets import PresetPicker
from llamachat.ui.voice.voice_mode import voice_mode_for

log = logging.getLogger(__name__)


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
        # The pickers before the conversation: it asks them for the prompt and the model's state.
        self.model_picker = ModelPicker(
            app.registry, current=cfg.default_model, default_model=cfg.default_model
        )
        self.preset_picker = PresetPicker(self._prompts)
        # The conversation: session, skills, edit state, the reply and its requests.
        self.chat = Conversation(
            app,
            model=cfg.default_model,
            preset=lambda: self.preset_picker.system_text(),
            prompt=lambda: (self.preset_picker.current_name(), self.preset_picker.custom_text()),
            images=lambda model: self.model_choice.reads_images(model),
            hears=lambda model: self.model_choice.hears_audio(model),
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
        parts = window_parts.build(
            self.app,
            self.chat,
            self,
            model_picker=self.model_picker,
            preset_picker=self.preset_picker,
            stop=self.stop,
        )
        self.web_search = parts.web_search
        self.chat_params = parts.chat_params
        self.top_bar = parts.top_bar
        self.messages = parts.messages
        self.first_run_panel = parts.first_run_panel
        self.problem_bar = parts.problem_bar
        self.skill_chips = parts.skill_chips
        self.skill_suggestions = parts.skill_suggestions
        self.composer = parts.composer
        self.voice = parts.voice
        self.libraries = parts.libraries
        self.memories = parts.memories
        self.skills = parts.skills
        self.meter = parts.meter
        self.model_choice = parts.model_choice
        self.overflow = parts.overflow
        self.overflow_guide = parts.overflow_guide
        self.trim_marker = parts.trim_marker
        self.compacting = parts.compacting
        self.router_guide = parts.router_guide
        self.sidebar = parts.sidebar
        self.drafts = parts.drafts
        self.sessions = parts.sessions
        self.temporary_bar = parts.temporary_bar
        self.temporary = parts.temporary
        self.splitter = parts.splitter
        # Chat > Compare with… and /compare: one question to 2-4 models side by side.
        self.compare = compare_view.Compare(
            self.chat,
            infos=lambda: self.model_picker.models(),
            sent=self.composer.clear,
            say=self.show_status,
            parent=self,
        )
        self.composer.offer_compare(lambda: self.compare.open(self.composer.text().strip()))
        # A send whose model's load may unload one another window uses says so first.
        app = self.app
        self.unload_guard = UnloadGuard(
            app.models_in_use, self.chat, self.model_picker.models, lambda: app.registry, self
        )
        app.router_changed.connect(self.unload_guard.router_changed)
        self._connect_parts()

        self.web_search.offer()
        self._shortcuts = _install_menus(self)
        self.composer.editor.setFocus()

    def _connect_parts(self) -> None:
        """Connect what the parts ask for and say to the window's commands and its status bar."""
        self.preset_picker.system_text_changed.connect(self._on_system_text_changed)
        self.web_search.status.connect(self.show_status)
        self.top_bar.settings_requested.connect(self.open_settings)
        self.messages.retry_requested.connect(self.retry)
        self.messages.regenerate_requested.connect(self.retry)
        self.messages.continue_requested.connect(self.chat.continue_reply)
        self.messages.edit_requested.connect(self.edit_message)
        self.messages.version_requested.connect(self.chat.show_version)
        self.messages.fork_requested.connect(self.fork)
        status = self.statusBar().showMessage
        self.voice_mode = voice_mode_for(self, status=status, problem=self.show_problem)
        self.first_run_panel.settings_requested.connect(self.open_settings)
        self.composer.submitted.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.stop_thinking_requested.connect(self._on_stop_thinking)
        self.composer.notice.connect(self.show_status)
        self.libraries.status.connect(self.show_status)
        self.memories.status.connect(self.show_status)
        self.skills.status.connect(self.show_status)
        self.model_choice.changed.connect(self.model_changed)
        self.model_choice.status.connect(self.show_status)
        self.model_choice.problem.connect(self.show_problem)
        # The message goes along to the new chat, still there to send.
        self.overflow.new_chat.connect(self._new_chat_with_message)
        self.overflow_guide.status.connect(self.show_status)
        self.overflow_guide.problem.connect(self.show_problem)
        self.overflow_guide.send_requested.connect(self.send)
        self.router_guide.status.connect(self.show_status)
        self.router_guide.problem.connect(self.show_problem)
        self.router_guide.router_replaced.connect(self.stop)
        self.model_choice.listed.connect(self.models_listed)
        self.sidebar.new_chat_requested.connect(self.new_session)
        self.sidebar.problem.connect(self.show_problem)
        # A temporary chat is none of the list's: its ids are those of its memory database.
        self.session_changed.connect(
            lambda sid: self.sidebar.set_current(None if self.chat.scratch else sid)
        )
        self.drafts.status.connect(self.show_status)
        self.sessions.status.connect(self.show_status)
        self.sessions.problem.connect(self.show_problem)
        self.sessions.title_changed.connect(
            lambda title: self.setWindowTitle(f"{title} — llamachat")
        )

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
        if self.composer.is_empty() or self.composer.refused():
            return
        typed = self.composer.text()
        attachments = self.composer.attachments()
        command, _, question = typed.strip().partition(" ")
        if command == compare_view.COMMAND and not attachments:
            self.compare.open(question.strip())
            return
        if (
            typed.strip() == "/skills"
            and not attachments
            and not self.skills.is_user_skill("skills")
        ):
            self.composer.clear()
            self.skills.open_panel()
            return
        notice = self.unload_guard.check(self.chat.model)
        if notice:
            self.show_status(f"{notice} Send again to send anyway.")
            return
        outcome = self._submit_draft()
        if outcome == conversation.NO_MODEL:
            self.show_status("No model to answer: pick one in the Model list.")
        elif outcome in (conversation.SENT, conversation.HELD, send_check.COUNTING):
            self.overflow.hide()

    @Slot()
    def stop(self) -> None:
        """Stop the reply now, keeping what arrived (saved as "stopped"); else leave editing.

        Reading aloud stops too (voice mode takes Esc itself while it is on)."""
        self.app.read_aloud.stop()
        if self.chat.stop():
            self.show_status("Stopped.")

    @Slot(object)
    def retry(self, message_id: object) -> None:
        """Ask for a reply again; the earlier one (and what followed) stays until it has text."""
        if self.chat.is_streaming():
            self.stop()
        if isinstance(message_id, int) and self.compare.offer_again(message_id):
            return  # a compared reply: the same models are offered again
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
        chat.comparer.started.connect(lambda _comparison: self.composer.set_streaming(True))
        chat.comparer.ended.connect(lambda: self.composer.set_streaming(False))
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

    @Slot()
    def _on_stop_thinking(self) -> None:
        reply = self.chat.outbox.reply
        if reply is not None:
            reply.end_thinking()

    @Slot(object)
    def _on_reply_started(self, reply: ReplyStream) -> None:
        reply.thinking.connect(self.composer.set_thinking)
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
        compare=window.compare.open,
        compare_wins=window.compare.show_wins,
    )
    actions = menus.Actions(
        import_chats=window.sidebar.import_action,
        transcribe_file=window.voice.transcribe_action,
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
