"""The chat window's parts, made, connected to one another and laid out (`build`).

`build(app, chat, window, ...)` makes the chat window's widgets (but the model and prompt
pickers, which the window makes before its conversation, since the conversation asks them)
and the owners of its jobs (sessions, drafts, skills, libraries, memories, the model
choice, the router guide, temporary chats, the overflow guide), connects them to one another (the meter
follows the chat's context, the warm-up follows the typing, the sidebar shows drafts),
puts the widgets in their places in `window`, and returns them as `WindowParts`. What the
user does and what the window shows (send, stop, status and problems, dialogs) is the
window's: `window.ChatWindow` connects the parts to its own slots once they are made.

Errors: none; it only makes and places widgets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QLayout,
    QMainWindow,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from llamachat.ui import first_run, plain
from llamachat.ui.app import App
from llamachat.ui.chat.composer_drafts import Drafts
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat_sessions import ChatSessions
from llamachat.ui.library.chat_libraries import ChatLibraries
from llamachat.ui.memory.chat_memories import ChatMemories
from llamachat.ui.models.choice import ModelChoice
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.models.warm_start import WarmStart
from llamachat.ui.router_guide import RouterGuide
from llamachat.ui.skills.chat_skills import ChatSkills
from llamachat.ui.views.chips import SkillChips, SkillSuggestions
from llamachat.ui.views.composer import Composer
from llamachat.ui.views.messages import MessagesView
from llamachat.ui.views.meter import ContextMeter
from llamachat.ui.views.notice import NoticeBar
from llamachat.ui.views.overflow import OverflowGuide, OverflowPanel
from llamachat.ui.views.params_panel import ChatParams
from llamachat.ui.views.presets import PresetPicker
from llamachat.ui.views.project_menus import ProjectChoices
from llamachat.ui.views.search_toggle import SearchToggle
from llamachat.ui.views.sidebar import SessionSidebar
from llamachat.ui.views.summary import CompactingView, TrimMarker
from llamachat.ui.views.temporary_bar import TemporaryBar, TemporaryChats
from llamachat.ui.views.top_bar import TopBar
from llamachat.ui.voice.dictation_input import DictationInput

SIDEBAR_WIDTH = 260


@dataclass
class WindowParts:
    """What `build` made: the chat window's widgets and the owners of its jobs, in order."""

    web_search: SearchToggle
    chat_params: ChatParams
    top_bar: TopBar
    messages: MessagesView
    first_run_panel: first_run.FirstRunPanel
    problem_bar: NoticeBar
    skill_chips: SkillChips
    skill_suggestions: SkillSuggestions
    composer: Composer
    voice: DictationInput
    libraries: ChatLibraries
    memories: ChatMemories
    skills: ChatSkills
    meter: ContextMeter
    model_choice: ModelChoice
    overflow: OverflowPanel
    overflow_guide: OverflowGuide
    trim_marker: TrimMarker
    compacting: CompactingView
    router_guide: RouterGuide
    sidebar: SessionSidebar
    drafts: Drafts
    sessions: ChatSessions
    temporary_bar: TemporaryBar
    temporary: TemporaryChats
    splitter: QSplitter


def build(
    app: App,
    chat: Conversation,
    window: QMainWindow,
    *,
    model_picker: ModelPicker,
    preset_picker: PresetPicker,
    stop: Callable[[], None],
) -> WindowParts:
    """Make the chat window's parts for `chat`, connect them to one another and to the pickers
    the window made (the conversation asks them first), lay them out in `window` (their
    parent), and return them; `stop` is the window's Stop (for leaving a chat)."""
    cfg = chat.cfg
    window.setWindowTitle("llamachat")
    window.resize(1180, 800)
    # A fixed floor instead of one that follows the content: chips and attachments
    # coming and going would otherwise resize the window's limits on every change.
    main_layout = window.layout()  # a QMainWindow always has its own
    if main_layout is not None:
        main_layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
    window.setMinimumSize(800, 480)

    web_search = SearchToggle(app, chat, parent=window)
    chat_params = ChatParams(chat, parent=window)
    top_bar = TopBar(model_picker, preset_picker, web_search.button)

    messages = MessagesView(forks=True)
    messages.setAccessibleName("Conversation")
    messages.set_font_size(cfg.font_size)

    first_run_panel = first_run.FirstRunPanel()
    problem_bar = NoticeBar()

    skill_chips = SkillChips()
    skill_suggestions = SkillSuggestions()

    composer = Composer()
    voice = DictationInput(app, composer, models=model_picker.models, window=window, parent=window)
    libraries = ChatLibraries(
        app, chat, composer=composer, status_bar=window.statusBar(), parent=window
    )
    memories = ChatMemories(app, chat, messages, window.statusBar(), parent=window)
    skills = ChatSkills(
        app,
        chat,
        chips=skill_chips,
        suggestions=skill_suggestions,
        composer=composer,
        top_bar=top_bar,
        parent=window,
    )
    top_bar.skills_requested.connect(skills.open_panel)

    meter = ContextMeter(app.registry)
    # Only as wide as its bar and figures, so it sits at the status bar's right end.
    meter.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
    meter.follow(chat.context)
    meter.follow_cache(chat.warmer)
    # The cache warm-up follows the typing and the model's loads.
    warmer = chat.warmer
    composer.editor.textChanged.connect(lambda: warmer.draft_changed(composer.text()))
    model_picker.model_event.connect(warmer.statuses_changed)
    model_picker.models_listed.connect(warmer.statuses_changed)
    # At start, the shown chat's model is loaded on llamachat's own server, then warmed.
    warm_start = WarmStart(app, chat, model_picker, parent=window)
    warm_start.status.connect(window.statusBar().showMessage)
    # The picker's choice goes to the chat, the composer and the meter.
    model_choice = ModelChoice(
        app,
        chat,
        picker=model_picker,
        composer=composer,
        meter=meter,
        parent=window,
    )
    # After the choice is applied: the panel shows the defaults of the model now chosen.
    model_picker.model_changed.connect(chat_params.refresh)
    overflow = OverflowPanel()
    overflow_guide = OverflowGuide(app, chat, composer=composer, panel=overflow, parent=window)
    trim_marker = TrimMarker()
    compacting = CompactingView()
    compaction = chat.compaction
    compaction.started.connect(lambda: compacting.start(messages.reading_speed(chat.model)))
    compaction.progress.connect(compacting.set_title)
    compaction.written.connect(compacting.show_written)
    compaction.ended.connect(lambda _status, _error: compacting.hide())
    chat.compaction.trimmed.connect(trim_marker.set_count)
    # Beside the meter: the top bar has no room left at 900 px for a long model name.
    status_bar = window.statusBar()
    status_bar.addPermanentWidget(chat_params.button)
    status_bar.addPermanentWidget(meter)
    # A message longer than the bar is cut at its edge: hovering shows it whole.
    status_bar.messageChanged.connect(lambda text: status_bar.setToolTip(plain.tooltip(text)))

    router_guide = RouterGuide(
        app,
        panel=first_run_panel,
        picker=model_picker,
        meter=meter,
        parent=window,
    )
    model_choice.listed.connect(router_guide.show_listing)

    sidebar = SessionSidebar(chat.history, mode="chat")
    sidebar.libraries = app.libraries
    sidebar.deletions.slot_files = lambda: (
        server.slot_files if (server := app.managed_server()) is not None else None
    )
    sidebar.project_choices = lambda: ProjectChoices(
        preset_picker.names(),
        [info.id for info in model_picker.models()],
        chat.store.names() if chat.store else [],
    )
    sidebar.setMinimumWidth(180)
    sidebar.list_view.setStyleSheet("QListView::item { padding: 5px 6px; }")

    drafts = Drafts(composer, chat, parent=window)
    drafts.drafted.connect(sidebar.show_draft)
    sessions = ChatSessions(
        chat,
        view=messages,
        drafts=drafts,
        presets=preset_picker,
        meter=meter,
        choice=model_choice,
        sidebar=sidebar,
        stop=stop,
        parent=window,
    )
    temporary_bar = TemporaryBar()
    temporary = TemporaryChats(
        chat,
        temporary_bar,
        open_chat=sessions.open,
        new_chat=sessions.new,
        save_draft=drafts.save,
        parent=window,
    )
    sessions.may_leave = temporary.may_leave

    parts = WindowParts(
        web_search=web_search,
        chat_params=chat_params,
        top_bar=top_bar,
        messages=messages,
        first_run_panel=first_run_panel,
        problem_bar=problem_bar,
        skill_chips=skill_chips,
        skill_suggestions=skill_suggestions,
        composer=composer,
        voice=voice,
        libraries=libraries,
        memories=memories,
        skills=skills,
        meter=meter,
        model_choice=model_choice,
        overflow=overflow,
        overflow_guide=overflow_guide,
        trim_marker=trim_marker,
        compacting=compacting,
        router_guide=router_guide,
        sidebar=sidebar,
        drafts=drafts,
        sessions=sessions,
        temporary_bar=temporary_bar,
        temporary=temporary,
        splitter=QSplitter(Qt.Orientation.Horizontal),
    )
    _lay_out(window, parts)
    return parts


def _lay_out(window: QMainWindow, parts: WindowParts) -> None:
    """Put the window's widgets in their places: the sessions sidebar beside the chat (the top
    bar, the getting-started panel, problems, the conversation, then the composer with its
    notices and chips); the splitter between them."""
    chat = QWidget()
    body = QVBoxLayout()
    body.setContentsMargins(10, 4, 10, 6)
    body.addWidget(parts.overflow)
    body.addWidget(parts.compacting)
    body.addWidget(parts.trim_marker)
    body.addWidget(parts.skill_chips)
    body.addWidget(parts.skill_suggestions)
    body.addWidget(parts.composer)
    layout = QVBoxLayout(chat)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    layout.addWidget(parts.top_bar)
    rule = QFrame()
    rule.setFrameShape(QFrame.Shape.HLine)
    rule.setFrameShadow(QFrame.Shadow.Sunken)
    layout.addWidget(rule)
    layout.addWidget(parts.first_run_panel)
    problem_row = QVBoxLayout()
    problem_row.setContentsMargins(10, 6, 10, 0)
    problem_row.addWidget(parts.problem_bar)
    problem_row.addWidget(parts.temporary_bar)
    layout.addLayout(problem_row)
    layout.addWidget(parts.messages, 1)
    layout.addLayout(body)

    splitter = parts.splitter
    splitter.addWidget(parts.sidebar)
    splitter.addWidget(chat)
    splitter.setCollapsible(1, False)
    chat.setMinimumWidth(600)  # room for the reply figures: the sidebar narrows first
    splitter.setStretchFactor(0, 0)
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([SIDEBAR_WIDTH, max(400, window.width() - SIDEBAR_WIDTH)])
    window.setCentralWidget(splitter)
    # The sidebar keeps its own margins inside the splitter handle's reach.
    sidebar_layout = parts.sidebar.layout()
    if sidebar_layout is not None:
        sidebar_layout.setContentsMargins(8, 8, 4, 8)
