"""One message of the conversation: its text, reasoning, tool calls, status, figures and actions.

`MessageView` shows a question (a tinted card) or a reply. A streamed reply arrives in
bursts and each burst is rendered at once through its `document.DocumentWriter`. The
reasoning shows in a panel of its own, open while the model thinks and folded once the
answer starts. Searches and tool calls show above the text (`_Activity`). Under the text,
the status line, the figures, the actions and a message's versions (`‹ 2/3 ›`, Alt+Left
and Alt+Right) are the footer's (`message_footer.MessageFooter`). The view only asks
(`version_requested` with the id to show, `fork_requested`): the conversation
controller switches the path and hands back the rows to show.

Errors: this module raises no exceptions of its own; a failure here is a bug.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QEvent, Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QGuiApplication,
    QPainter,
    QPalette,
    QPen,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.ui import plain
from llamachat.ui.library.sources import open_source, source_link
from llamachat.ui.views.document import DocumentWriter, TextView
from llamachat.ui.views.figures import ReadingProgress, figures, reading_speed, stopped_figures
from llamachat.ui.views.markdown import (
    COPY_SCHEME,
    LIGHT,
    Palette,
    StreamingMarkdown,
    Update,
    break_text_runs,
)
from llamachat.ui.views.message_footer import MessageFooter
from llamachat.ui.views.message_footer import set_quiet as _set_quiet
from llamachat.ui.views.more_actions import FORK, REMEMBER, Entry, ReadAloudEntries
from llamachat.ui.views.tool_call import ToolCallView

log = logging.getLogger(__name__)

EDIT_OUTLINE = 2  # px: the outline of the message being edited
CUT_TEXT = "Cut at the length limit"


def is_dark(palette: QPalette) -> bool:
    """True for a dark palette (its Base colour is dark)."""
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def _blend(a: QColor, b: QColor, amount: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


def open_link(url: QUrl, *, local: bool = False) -> bool:
    """Open a link from model text in the browser, but only http and https ones; a `local`
    one (a document search's source, which llamachat made) opens its file (at its page)."""
    if local and url.isLocalFile():
        open_source(url)
        return True
    if url.scheme() in ("http", "https"):
        return QDesktopServices.openUrl(url)
    log.info("ignored link with scheme %r", url.scheme())
    return False


def _mute(body: TextView, palette: Palette) -> None:
    """Give `body` the palette's muted colour for its text (the reasoning)."""
    # Only Text is set: every other role still follows the theme.
    muted = QPalette()
    muted.setColor(QPalette.ColorRole.Text, QColor(palette.muted))
    body.setPalette(muted)


def _search_label(
    parent: QWidget, query: str, results: list[dict], error: str, title: str
) -> QLabel:
    """A tool call's line: the query, then the results as links or the error in red."""
    lines = [f"<b>{plain.markup(title)}:</b> {plain.markup(query)}"]
    if error:
        lines.append(f'<span style="color:#d1242f">{plain.markup(error)}</span>')
    # The sources of a document search are files of the user's, as the results say.
    files: set[str] = set()
    for number, result in enumerate(results, 1):
        url = str(result.get("url", ""))
        name = str(result.get("title") or url)
        if result.get("path"):
            url = source_link(url, result.get("page"))
            files.add(url)
        lines.append(f'{number}. <a href="{plain.markup(url)}">{plain.markup(name)}</a>')
    label = QLabel("<br>".join(lines), parent)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    label.setAccessibleName("Search results" if title == "Searched" else title)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    label.setOpenExternalLinks(False)
    label.linkActivated.connect(lambda link: open_link(QUrl(link), local=link in files))
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


def _fresh_render(
    text: str, body: TextView, palette: Palette
) -> tuple[StreamingMarkdown, DocumentWriter]:
    """`text` parsed anew for `palette`, and a writer on `body`'s emptied document."""
    markdown = StreamingMarkdown(palette=palette)
    markdown.append(text)
    body.document().clear()
    return markdown, DocumentWriter(body.document())


def _paint_card(view: QWidget, editing: bool) -> None:
    """A tinted rounded bubble (a question's card), outlined in the highlight colour while
    the message is being edited."""
    palette = view.palette()
    painter = QPainter(view)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    if editing:
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight), EDIT_OUTLINE))
    else:
        painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(
        _blend(
            palette.color(QPalette.ColorRole.Base),
            palette.color(QPalette.ColorRole.Highlight),
            0.16 if is_dark(palette) else 0.10,
        )
    )
    inset = EDIT_OUTLINE // 2 if editing else 0
    painter.drawRoundedRect(view.rect().adjusted(inset, inset, -1 - inset, -1 - inset), 12, 12)
    painter.end()


class MessageView(QFrame):
    """One message: its text, reasoning, searches, status, stats and actions."""

    retry_requested = Signal(object)
    regenerate_requested = Signal(object)
    continue_requested = Signal(object)  # go on with this reply, cut at the length limit
    edit_requested = Signal(object)
    version_requested = Signal(object)  # the id of the version of this message to show
    fork_requested = Signal(object)  # "New chat from here" on this message
    remember_requested = Signal(object, str)  # "Remember this": the message's id and text
    read_aloud_requested = Signal(object, str)  # "Read aloud": the reply's id and text
    stop_reading_requested = Signal()
    read_speed_chosen = Signal(float)
    rendered = Signal()
    relaid_out = Signal(object)

    def __init__(
        self, message: Mapping[str, Any], *, palette: Palette = LIGHT, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.message_id: int | None = message.get("id")
        self.role: str = message.get("role", "assistant")
        self.model = str(message.get("model") or "")
        # Prompt tokens a second: what earlier replies measured (for the reading's estimate),
        # and what this one's figures say.
        self.reading_speed: float | None = None
        self.measured_speed: float | None = None
        self._palette = palette
        self._markdown = StreamingMarkdown(palette=palette)
        self._streaming = False
        self._regenerate_allowed = False
        self._fork_allowed = False
        self._editing = False
        self._answer_started = False
        self._final_status = ""
        # Cut at the length limit (max tokens or a full context): its figures say so.
        self._cut = False
        # When a reply began streaming: a stopped one shows how long it ran.
        self._began = time.monotonic() if message.get("status") == "streaming" else None
        self.render_count = 0

        mine = self.role == "user"
        self.setAccessibleName("Message from you" if mine else "Reply")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 8)
        layout.setSpacing(4)

        self._reasoning: _Reasoning | None = None
        self._reasoning_body: TextView | None = None  # the panel's text, once there is one
        self._layout = layout

        self._body = TextView(
            self, accessible_name="Message text" if mine else "Reply text", on_card=mine
        )
        self._body.anchorClicked.connect(self._on_anchor)
        self._writer = DocumentWriter(self._body.document())
        layout.addWidget(self._body)
        self._activity = _Activity(self, layout, self._body)

        attachments = [str(a.get("name") or "") for a in message.get("attachments") or ()]
        if any(attachments):
            note = plain.Label("Attached: " + ", ".join(a for a in attachments if a), self)
            note.setAccessibleName("Attachments")
            note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            layout.addWidget(note)
        forks = lambda: self._fork_allowed
        # Set by the messages view: whether this reply is read now, at what speed.
        self.read_aloud = ReadAloudEntries(
            read=lambda: self.read_aloud_requested.emit(self.message_id, self.content()),
            stop=self.stop_reading_requested.emit,
            choose_speed=self.read_speed_chosen.emit,
            shown=lambda: self.role == "assistant",
        )
        self._footer = MessageFooter(
            self,
            layout,
            mine=mine,
            current=lambda: self.message_id,
            busy=self.is_streaming,
            more=[
                Entry(lambda: FORK, lambda: self.fork_requested.emit(self.message_id), forks),
                Entry(lambda: REMEMBER, self._on_remember, forks),
                *self.read_aloud.entries(),
            ],
        )
        # The footer lays the status line out; the view says what it reads.
        self._status = self._footer.status
        self._footer.retry_requested.connect(self.retry_requested)
        self._footer.continue_requested.connect(self.continue_requested)
        self._footer.edit_requested.connect(self.edit_requested)
        self._footer.regenerate_requested.connect(self.regenerate_requested)
        self._footer.version_requested.connect(self.version_requested)
        self._footer.copy_requested.connect(self._on_copy_reply)
        self.set_versions(message.get("versions") or [])

        if message.get("reasoning"):
            self._add_reasoning(message["reasoning"])
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and "result" in call:
                self.add_tool_call(call)
        status = message.get("status", "complete")
        content = message.get("content") or ""
        if status == "streaming":
            self._streaming = True
            self.append_content(content)
            self._update_actions()
        else:
            if content:
                self._answer_started = True
                self._markdown.append(content)
                self._write(self._markdown.finish(), final=True)
            if self._reasoning is not None:
                self._reasoning.set_expanded(False)
            self.set_status(status, message.get("error") or "")
            if message.get("usage") or message.get("timings"):
                self.set_stats(message.get("usage") or {}, message.get("timings") or {})

    # ------------------------------------------------------------ public API

    def append_content(self, text: str) -> None:
        """Add streamed reply text and render it now (the caller batches: one call per frame)."""
        if not text:
            return
        if self._reasoning is not None:
            self._reasoning.stop_clock()
        self._streaming = True
        self._body.set_growing(True)
        first = not self._answer_started
        self._answer_started = True
        self._markdown.append(text)
        self._write(self._markdown.flush())
        if first:
            self._update_actions()
            if self._reasoning is not None:
                # The answer has started: the thinking is done, fold it away.
                self._reasoning.set_expanded(False)

    def append_reasoning(self, text: str) -> None:
        """Add streamed reasoning to the panel shown apart (expanded while thinking)."""
        if not text:
            return
        self._streaming = True
        self._add_reasoning(text).start_clock()

    def add_tool_call(self, call: dict) -> ToolCallView:
        """Show an MCP tool call inline, collapsed (`reply.stored_call`'s shape)."""
        view = ToolCallView(call, self)
        self._activity.add(view)
        return view

    def tool_calls(self) -> list[ToolCallView]:
        """The tool calls shown, in order."""
        return self.findChildren(ToolCallView)

    def add_search(
        self, query: str, results: list[dict], error: str = "", *, title: str = "Searched"
    ) -> None:
        """Show a tool call inline: a web search's query and its results as links, or its
        error; another tool's call (`title`, e.g. "Read skill file") and short result."""
        self._activity.add(_search_label(self, query, results, error, title))

    def set_stats(self, usage: dict, timings: dict) -> None:
        """Show the reply's figures: "38.2 tok/s · 412 tokens · 1.2 s · 1,024 prompt, 900 cached"
        (the prompt's, the speeds and the time to the first token in the tooltip)."""
        text, tip = figures(usage or {}, timings or {})
        self.measured_speed = reading_speed(timings or {})
        self._footer.show_figures(text, tip)
        self._cut = (timings or {}).get("finish_reason") == "length"
        self._show_cut()

    def is_cut(self) -> bool:
        """True for a whole reply the length limit cut (it shows "Cut at the length limit")."""
        return self._cut and self._final_status == "complete"

    def set_progress(self, progress: dict | None) -> None:
        """Show llama.cpp's prompt progress under the reply (None: the reading is over)."""
        self._activity.show_progress(progress, self.reading_speed, self._answer_started)

    def set_loading(self, model: str, progress: float | None) -> None:
        """Show the router's load of the reply's model (0-1, None: unknown), before the reading."""
        self._activity.show_loading(model, progress, self.reading_speed, self._answer_started)

    def set_status(self, status: str, error: str = "") -> None:
        """Mark the reply: "stopped" (partial reply kept) or "error" (message in red + Retry)."""
        if status in ("stopped", "error"):
            self._write(self._markdown.finish(), final=True)
            self._set_ended()
        if status == "stopped":
            reading = self._activity.reading
            if reading is not None and (self._answer_started or reading.read_all()):
                reading = None
            _set_quiet(self._status, "Stopped while reading the prompt" if reading else "Stopped")
            if not self._footer.figures():
                # The server sends its figures at the end, which a stopped reply never reaches:
                # what it last reported of the reading, or what came of the reply.
                figures_now = reading.stopped_text() if reading else None
                self._footer.show_quiet_figures(
                    figures_now or stopped_figures(self.content(), self._began)
                )
        elif status == "error":
            plain.set_text(self._status, error or "The reply failed.")
            self._status.setStyleSheet("color: #d1242f;")
        self._final_status = status
        self._status.setVisible(status in ("stopped", "error"))
        # One way to ask again: Retry beside an error, Regenerate under any other reply.
        self._footer.offer_retry(status == "error" and self.role == "assistant")
        self._show_cut()
        self._update_actions()

    def _show_cut(self) -> None:
        if self._final_status != "complete":
            return
        if self._cut:
            _set_quiet(self._status, CUT_TEXT)
        self._status.setVisible(self._cut)
        self._update_actions()

    def set_unsaved(self, error: str) -> None:
        """Mark the reply as not saved because of `error` ('' once it is saved)."""
        self._footer.set_unsaved(error)

    def unsaved_text(self) -> str:
        """What the "not saved" mark says ('' when the reply is saved)."""
        return self._footer.unsaved_text()

    def finish(self) -> None:
        """Render the open tail as finished, highlight any unclosed code block, end streaming."""
        self._write(self._markdown.finish(), final=True)
        self._set_ended()
        self._update_actions()

    def _set_ended(self) -> None:
        self._streaming = False
        self._body.set_growing(False)
        if self._reasoning_body is not None:
            self._reasoning_body.set_growing(False)

    def _on_remember(self) -> None:
        self.remember_requested.emit(self.message_id, self.content())

    def content(self) -> str:
        """The reply text received so far."""
        return self._markdown.text()

    def reasoning(self) -> str:
        """The reasoning text received so far."""
        return self._reasoning.text() if self._reasoning is not None else ""

    def set_message_id(self, message_id: int) -> None:
        """Attach the database id (signals carry it)."""
        self.message_id = message_id

    def code(self, index: int) -> str:
        """The raw code of code block `index`, as its "Copy code" link copies it."""
        return self._markdown.code(index)

    def copy_code(self, index: int) -> None:
        """Put code block `index` on the clipboard."""
        QGuiApplication.clipboard().setText(self.code(index))

    def is_streaming(self) -> bool:
        """True between the first streamed text and finish()/a final status."""
        return self._streaming

    def reasoning_expanded(self) -> bool | None:
        """Whether the reasoning panel is open; None when there is no reasoning."""
        return None if self._reasoning_body is None else not self._reasoning_body.isHidden()

    def text_document(self) -> QTextDocument:
        """The rendered reply document (for copying as rich text and for tests)."""
        return self._body.document()

    def palette_name(self) -> str:
        """The markdown palette the text is rendered in ("light" or "dark")."""
        return self._palette.name

    def set_palette(self, palette: Palette) -> None:
        """Render the text again in `palette` (the theme changed); a streaming reply goes on."""
        if palette == self._palette:
            return
        self._palette = palette
        if self._reasoning_body is not None:
            _mute(self._reasoning_body, palette)
        self._markdown, self._writer = _fresh_render(self._markdown.text(), self._body, palette)
        # Finished text renders as finished; a reply still streaming keeps an open tail.
        if self._streaming:
            self._write(self._markdown.flush())
        else:
            self._write(self._markdown.finish(), final=True)

    def set_versions(self, versions: Sequence[int]) -> None:
        """Show `‹ n/N ›` for a message with other versions (`versions`: every version's id)."""
        self._footer.set_versions(versions)

    def version_text(self) -> str:
        """ "2/3" for the second of three versions; "" for a message with one version."""
        return self._footer.version_text()

    def set_fork_allowed(self, allowed: bool) -> None:
        """Offer "New chat from here" (in the chat window; a quick answer has no chat to fork)."""
        self._fork_allowed = allowed
        self._update_actions()

    def more_actions(self) -> list[str]:
        """The texts of the "More actions" menu ([] when it is not offered)."""
        return self._footer.more_actions()

    def more_choices(self, title: str) -> list[tuple[str, bool]]:
        """The ⋯ submenu `title`'s choices, each with whether it is checked."""
        return self._footer.more_choices(title)

    def trigger_more(self, text: str) -> None:
        """Run the "More actions" entry reading `text` (as a click on it would)."""
        self._footer.trigger_more(text)

    def set_editing(self, editing: bool) -> None:
        """Mark the message as the one being edited (a highlighted outline)."""
        if editing != self._editing:
            self._editing = editing
            self.setAccessibleDescription("Being edited" if editing else "")
            self.update()

    def is_editing(self) -> bool:
        """True while the message is marked as being edited."""
        return self._editing

    def set_regenerate_allowed(self, allowed: bool) -> None:
        """Offer "Regenerate" (the conversation allows it on its last reply only)."""
        self._regenerate_allowed = allowed
        self._update_actions()

    # ------------------------------------------------------------ internals

    def _update_actions(self) -> None:
        # A reply offers its actions once it has text: none while the prompt is read.
        has_text = self.role == "user" or self._answer_started
        # The chat window's entries, and a reply's Read aloud in any window.
        self._footer.offer_more(has_text and (self._fork_allowed or self.role == "assistant"))
        if self.role == "assistant":
            self._footer.offer_reply_actions(
                copy=has_text,
                regenerate=(
                    self._regenerate_allowed
                    and not self._streaming
                    and self._final_status != "error"
                ),
                # Continue goes on with a chat's last reply only (the request ends with it): in
                # the chat window, which forks too; a quick answer is asked again instead.
                continue_=self._regenerate_allowed and self._fork_allowed and self.is_cut(),
            )

    def _add_reasoning(self, text: str) -> _Reasoning:
        if self._reasoning is None:
            self._reasoning = _Reasoning(self, self._layout, self._palette)
            self._reasoning_body = self._reasoning.body
        self._reasoning.add(text, growing=self._streaming)
        return self._reasoning

    def _write(self, update: Update, *, final: bool = False) -> None:
        if self._writer.write(update, final=final):
            self.render_count += 1
            self.rendered.emit()

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            try:
                self.copy_code(int(url.path()))
            except ValueError:
                log.warning("bad copy link %r", url.toString())
                return
            self._body.show_copied(url.toString())
            return
        open_link(url)

    def _on_copy_reply(self) -> None:
        QGuiApplication.clipboard().setText(self.content())

    def changeEvent(self, event: QEvent) -> None:
        """Pass a new font (the conversation's font size) on to the text views."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and hasattr(self, "_body"):
            for body in (self._body, self._reasoning_body):
                if body is not None:
                    body.follow_font(self.font())

    def event(self, event: QEvent) -> bool:
        """After the view's own layout settles, tell the conversation its height may differ."""
        handled = super().event(event)
        if event.type() == QEvent.Type.LayoutRequest:
            self.relaid_out.emit(self)
        return handled

    def paintEvent(self, event) -> None:
        """Draw the card of the user's messages."""
        if self.role == "user":
            _paint_card(self, self._editing)
        super().paintEvent(event)


class _Activity:
    """What a reply shows of its work around its text: the searches and tool calls above it,
    the model's load and the prompt's reading just below it; each made when first needed."""

    def __init__(self, view: QWidget, layout: QVBoxLayout, body: TextView) -> None:
        self._view = view
        self._layout = layout
        self._body = body
        self._rows: QVBoxLayout | None = None
        self.reading: ReadingProgress | None = None

    def add(self, widget: QWidget) -> None:
        """Show `widget` in the layout above the text (searches and tool calls)."""
        if self._rows is None:
            self._rows = QVBoxLayout()
            self._rows.setSpacing(2)
            self._layout.insertLayout(self._layout.indexOf(self._body), self._rows)
        self._rows.addWidget(widget)
        # Now, not at the event loop's next turn (what a layout does for a child added to
        # a shown widget): a click on it right away must reach it.
        widget.show()

    def show_progress(self, progress: dict | None, speed: float | None, answering: bool) -> None:
        """Show the prompt's reading (None: it is over); hidden once the answer started."""
        if progress is None:
            if self.reading is not None:
                self.reading.stop()
                self.reading.hide()
            return
        reading = self._reading_bar(speed)
        reading.show_progress(progress)
        reading.setVisible(not answering)

    def show_loading(
        self, model: str, progress: float | None, speed: float | None, answering: bool
    ) -> None:
        """Show the model's load (0-1, None: unknown); hidden once the answer started."""
        reading = self._reading_bar(speed)
        reading.show_loading(model, progress)
        reading.setVisible(not answering)

    def _reading_bar(self, speed: float | None) -> ReadingProgress:
        if self.reading is None:
            self.reading = ReadingProgress(self._view, speed=speed)
            # Just above the status row: where the answer will start.
            self._layout.insertWidget(self._layout.indexOf(self._body) + 1, self.reading)
        return self.reading


class _Reasoning:
    """The reasoning panel above a reply's text: open while the model thinks, folded after."""

    def __init__(self, view: MessageView, layout: QVBoxLayout, palette: Palette) -> None:
        self._view = view
        self._parts: list[str] = []
        self._run = 0  # the unbroken run the text shown ends with
        self._started: float | None = None
        self._seconds: float | None = None
        self.button = QToolButton(view)
        self.button.setAccessibleName("Show reasoning")
        self.button.setAutoRaise(True)
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.body = TextView(view, accessible_name="Reasoning")
        self.button.clicked.connect(lambda: self.set_expanded(self.body.isHidden()))
        _mute(self.body, palette)
        frame = self.body.document().rootFrame().frameFormat()
        frame.setLeftMargin(12)
        self.body.document().rootFrame().setFrameFormat(frame)
        layout.insertWidget(0, self.button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.insertWidget(1, self.body)
        self.set_expanded(True)

    def add(self, text: str, *, growing: bool) -> None:
        """Show more reasoning (`growing`: more is streaming in)."""
        self._parts.append(text)
        self.body.set_growing(growing)
        text, self._run = break_text_runs(text, self._run)
        cursor = QTextCursor(self.body.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)

    def text(self) -> str:
        """The reasoning so far."""
        return "".join(self._parts)

    def start_clock(self) -> None:
        """The model is thinking (streamed reasoning): time it from its first words."""
        if self._started is None:
            self._started = time.monotonic()

    def stop_clock(self) -> None:
        """The answer started: the thinking took until now."""
        if self._started is not None and self._seconds is None:
            self._seconds = time.monotonic() - self._started

    def set_expanded(self, expanded: bool) -> None:
        """Open or fold the panel."""
        self.button.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.body.setVisible(expanded)
        if self._seconds is not None:
            self.button.setText(f"Thought for {max(1, round(self._seconds))} s")
        elif self._view.is_streaming() and not self._view.content():
            self.button.setText("Thinking…")
        else:
            self.button.setText("Reasoning")
