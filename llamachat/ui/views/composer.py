"""The message composer: a multi-line editor with attachments and `/skill` completion.

Enter sends, Shift+Enter starts a new line. `/` at the start of a word lists the
skills above the message box, as wide as it: Esc closes the list, and Enter on a `/name`
typed out in full sends at once (on a partial one it completes the name first).
Files come in by the attach button,
drag and drop, or paste: images become `image_url` data URIs (only for models
that read images), sounds (.wav, .mp3) `input_audio` parts (only for models that hear
audio, as the router lists them before a load), text files are inlined as fenced code
blocks, and a very long paste becomes an attachment instead of flooding the editor.

Errors: `AttachmentError` (a file that cannot be attached: too big, unreadable,
not text, an image for a model without vision, a sound for a model that does not
hear); the composer shows its message through the `notice` signal rather than raising.
"""

from __future__ import annotations

import base64
import logging
import mimetypes
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QEvent,
    QIODevice,
    QMimeData,
    QRect,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtGui import QImage, QKeyEvent, QResizeEvent, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QCompleter,
    QFileDialog,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from llamachat import outside
from llamachat.skills import SkillStore
from llamachat.sound import seconds as sound_seconds
from llamachat.turn import Attachment, audio_format
from llamachat.ui import plain
from llamachat.ui.views.chips import ChipRow
from llamachat.ui.views.popup import place_above

log = logging.getLogger(__name__)

LONG_PASTE_CHARS = 4000
MIN_LINES = 3
MAX_LINES = 12
MAX_TEXT_BYTES = 1_000_000
MAX_IMAGE_BYTES = 20_000_000
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp")
MAX_AUDIO_BYTES = 20_000_000
# The sounds llama.cpp's `input_audio` takes, by file name (systems name WAV's type variously).
SOUND_TYPES = {".wav": "audio/wav", ".mp3": "audio/mpeg"}

_SLASH_WORD = re.compile(r"(?:^|\s)/([\w.-]*)$")


class AttachmentError(Exception):
    """A file that cannot be attached; str() says why, for the user."""


def image_attachment(image: QImage, name: str = "pasted image.png") -> Attachment:
    """A pasted or dropped image, encoded as a PNG data URI."""
    array = QByteArray()
    buffer = QBuffer(array)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # The stubs type `format` as bytes; PySide6 accepts only str there.
    image.save(buffer, "PNG")  # type: ignore[call-overload]
    buffer.close()
    encoded = base64.b64encode(bytes(array.data())).decode("ascii")
    return Attachment("image", name, "image/png", f"data:image/png;base64,{encoded}")


def is_sound(path: Path) -> bool:
    """Whether `path` names a sound llama.cpp takes (.wav, .mp3), by its name."""
    return path.suffix.lower() in SOUND_TYPES


def audio_refusal(model: str, hearers: Sequence[str]) -> str:
    """What to say when a sound is attached for `model`, which does not hear audio."""
    others = [m for m in hearers if m != model]
    pick = f"e.g. {', '.join(others[:2])}" if others else "none of the models listed now does"
    return f"{model or 'This model'} does not take audio; pick a model that hears, {pick}."


def file_attachment(path: Path, *, images: bool, audio: bool = False) -> Attachment:
    """Read `path` as an attachment; raises AttachmentError with a reason the user can act on."""
    name = outside.shown(path.name)
    sound = is_sound(path)
    mime = SOUND_TYPES[path.suffix.lower()] if sound else mimetypes.guess_type(name)[0] or ""
    image = mime in IMAGE_TYPES
    if image and not images:
        raise AttachmentError(
            f"{name} is an image, and the current model does not read images. "
            "Pick a model with vision to attach it."
        )
    if sound and not audio:
        raise AttachmentError(f"{name} is a sound, and the current model does not hear audio.")
    try:
        data, _more = outside.read_bytes(
            path, MAX_IMAGE_BYTES if image else MAX_AUDIO_BYTES if sound else MAX_TEXT_BYTES
        )
    except outside.TooLarge:
        raise AttachmentError(
            f"{name} is too big to attach (over 20 MB)."
            if image or sound
            else f"{name} is too big to inline (over 1 MB)."
        ) from None
    except outside.NotRegular as exc:
        if "folder" in exc.reason:
            raise AttachmentError(f"{name} is a folder: attach the files in it instead.") from None
        raise AttachmentError(
            f"{name} is not a regular file (a pipe, socket or device), and only files attach."
        ) from None
    except outside.Refused as exc:
        raise AttachmentError(f"Cannot read {name}: {exc.reason}") from None
    if image:
        encoded = base64.b64encode(data).decode("ascii")
        return Attachment("image", name, mime, f"data:{mime};base64,{encoded}")
    if sound:
        encoded = base64.b64encode(data).decode("ascii")
        length = sound_seconds(data, audio_format(mime))
        return Attachment("audio", name, mime, f"data:{mime};base64,{encoded}", length)
    if b"\0" in data:
        raise AttachmentError(f"{name} is not a text file, and only text and images attach.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AttachmentError(f"{name} is not UTF-8 text.") from exc
    return Attachment("text", name, mime or "text/plain", text)


class MessageEdit(QPlainTextEdit):
    """The editor: Enter submits, Shift+Enter breaks the line, files and long pastes divert."""

    submit = Signal()
    files_received = Signal(list)
    folders_received = Signal(list)
    image_received = Signal(QImage)
    long_text_received = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Message")
        self.setTabChangesFocus(True)
        self.setPlaceholderText("Message  (Enter sends, Shift+Enter new line, / for skills)")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._completer: QCompleter | None = None
        self.document().contentsChanged.connect(self._fit_height)
        self._fit_height()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Re-fit the height: a narrower editor wraps into more lines."""
        super().resizeEvent(event)
        self._fit_height()

    def _fit_height(self) -> None:
        # Grow with the text from MIN_LINES to MAX_LINES, then scroll: the conversation
        # keeps the room a short message does not need.
        lines = int(self.document().size().height())  # QPlainTextEdit counts lines here
        shown = max(MIN_LINES, min(MAX_LINES, lines))
        margins = self.contentsMargins()
        height = (
            shown * self.fontMetrics().lineSpacing()
            + int(2 * self.document().documentMargin())
            + margins.top()
            + margins.bottom()
        )
        if height != self.height():
            self.setFixedHeight(height)

    def set_completer(self, completer: QCompleter) -> None:
        """Use `completer` for `/skill` names."""
        self._completer = completer
        completer.setWidget(self)
        # The stubs lack SignalInstance.__getitem__, which picks one of a signal's overloads.
        completer.activated[str].connect(self._insert_completion)  # type: ignore[index]

    def event(self, event: QEvent) -> bool:
        """Claim Esc while the skill list is open, so it closes the list, not stops a reply."""
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
            and self._popup_visible()
        ):
            event.accept()
            return True
        return super().event(event)

    def _popup_visible(self) -> bool:
        popup = self._completer.popup() if self._completer is not None else None
        return popup is not None and popup.isVisible()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Route Enter to submit; keep the skill completer in step with the text."""
        key = event.key()
        popup = self._completer.popup() if self._completer else None
        if popup is not None and popup.isVisible() and key == Qt.Key.Key_Escape:
            popup.hide()
            event.accept()
            return
        enter = key in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        plain_enter = enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        if popup is not None and popup.isVisible() and plain_enter and self._typed_whole_name():
            # `/name` typed out in full: Enter sends it at once, not first completes it.
            popup.hide()
            event.accept()
            self.submit.emit()
            return
        if (
            popup is not None
            and popup.isVisible()
            and key
            in (
                Qt.Key.Key_Enter,
                Qt.Key.Key_Return,
                Qt.Key.Key_Escape,
                Qt.Key.Key_Tab,
                Qt.Key.Key_Backtab,
            )
        ):
            # The completer's own event filter acts on these keys.
            event.ignore()
            return
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                # A real "\n" rather than Qt's line separator, so toPlainText() is what was typed.
                self.textCursor().insertText("\n")
            else:
                self.submit.emit()
            return
        super().keyPressEvent(event)
        self._update_completion()

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        """Accept files and images as well as text."""
        return source.hasUrls() or source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        """Paste and drop: files and images become attachments, a huge text too."""
        paths = [Path(url.toLocalFile()) for url in source.urls() if url.isLocalFile()]
        if paths:
            folders = [path for path in paths if path.is_dir()]
            if folders:
                self.folders_received.emit(folders)
            if len(folders) < len(paths):
                self.files_received.emit([path for path in paths if not path.is_dir()])
            return
        if source.hasImage():
            image = source.imageData()
            if isinstance(image, QImage) and not image.isNull():
                self.image_received.emit(image)
                return
        if source.hasText() and len(source.text()) > LONG_PASTE_CHARS:
            self.long_text_received.emit(source.text())
            return
        super().insertFromMimeData(source)

    def _slash_prefix(self) -> str | None:
        cursor = self.textCursor()
        before = cursor.block().text()[: cursor.positionInBlock()]
        match = _SLASH_WORD.search(before)
        return match.group(1) if match else None

    def _typed_whole_name(self) -> bool:
        """True when the `/word` before the cursor is a whole name the completer offers,
        and no other name was picked in the list (with the arrow keys)."""
        prefix = self._slash_prefix()
        if not prefix or self._completer is None:
            return False
        role = self._completer.completionRole()
        popup = self._completer.popup()
        current = popup.currentIndex() if popup is not None else None
        if current is not None and current.isValid() and current.data(role) != prefix:
            return False
        model = self._completer.model()
        return any(model.index(row, 0).data(role) == prefix for row in range(model.rowCount()))

    def _update_completion(self) -> None:
        if self._completer is None:
            return
        popup = self._completer.popup()
        if popup is None:
            return  # only an inline completer has none
        prefix = self._slash_prefix()
        if prefix is None or self._completer.model().rowCount() == 0:
            popup.hide()
            return
        if prefix != self._completer.completionPrefix():
            self._completer.setCompletionPrefix(prefix)
            popup.setCurrentIndex(self._completer.completionModel().index(0, 0))
        if self._completer.completionCount() == 0:
            popup.hide()
            return
        # As wide as the message box: the descriptions are cut there (whole in each row's
        # tooltip) rather than spread across the screen. Above the box, not below: the
        # box is at the bottom of the window and a list under it would spill past it.
        line = self.cursorRect()
        self._completer.complete(QRect(0, line.top(), self.width(), line.height()))
        place_above(popup, self)

    @Slot(str)
    def _insert_completion(self, name: str) -> None:
        prefix = self._slash_prefix()
        if prefix is None:
            return
        cursor = self.textCursor()
        cursor.movePosition(cursor.MoveOperation.Left, cursor.MoveMode.KeepAnchor, len(prefix))
        cursor.insertText(f"{name} ")
        self.setTextCursor(cursor)


class Composer(QWidget):
    """Editor, attachment chips, and the Attach / Send / Stop buttons."""

    submitted = Signal()
    stop_requested = Signal()
    stop_thinking_requested = Signal()  # end the model's thinking: it answers now
    notice = Signal(str)
    attachments_changed = Signal()
    # Folders dropped while `takes_folders` (the chat window attaches them as libraries).
    folders_dropped = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._attachments: list[Attachment] = []
        self._images = False
        self._audio = False
        self._hearers: tuple[str, ...] = ()
        self._model = ""
        self.takes_folders = False

        self.editor = MessageEdit(self)

        self._skill_model = QStandardItemModel(self)
        completer = QCompleter(self._skill_model, self)
        completer.setCompletionRole(Qt.ItemDataRole.UserRole)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        popup = completer.popup()  # made now: the mode is PopupCompletion
        if popup is not None:
            popup.setAccessibleName("Skills")
            popup.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.completer = completer
        self.editor.set_completer(completer)

        self.attachment_chips = ChipRow(
            label="Attached:",
            accessible_template="Remove attachment {name}",
            tooltip_template="Click to remove {name}",
            parent=self,
        )
        self.attachment_chips.setAccessibleName("Attachments")

        self.attach_button = QPushButton("Attach…", self)
        self.attach_button.setAccessibleName("Attach file")
        self.attach_button.setToolTip("Attach text files (or drop or paste them)")
        self.send_button = QPushButton("Send", self)
        self.send_button.setAccessibleName("Send")
        self.send_button.setDefault(False)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setAccessibleName("Stop")
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.stop_button.setVisible(False)
        self.stop_thinking_button = QPushButton("Stop thinking", self)
        self.stop_thinking_button.setAccessibleName("Stop thinking")
        self.stop_thinking_button.setToolTip("End the model's thinking: it answers now")
        self.stop_thinking_button.setVisible(False)
        # Beside Send only where the window offers comparing (`offer_compare`).
        self.compare_button = QPushButton("Compare…", self)
        self.compare_button.setAccessibleName("Compare models")
        self.compare_button.setToolTip("Ask 2-4 models this question side by side")
        self.compare_button.setVisible(False)
        self._compare_offered = False

        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.attach_button)
        buttons.addStretch(1)
        self._buttons = buttons
        buttons.addWidget(self.stop_thinking_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.compare_button)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.attachment_chips)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)

        self.editor.submit.connect(self.submitted)
        self.send_button.clicked.connect(self.submitted)
        self.stop_button.clicked.connect(self.stop_requested)
        self.stop_thinking_button.clicked.connect(self.stop_thinking_requested)
        self.attach_button.clicked.connect(self.choose_files)
        self.editor.files_received.connect(self.add_files)
        self.editor.folders_received.connect(self._on_folders_received)
        self.editor.image_received.connect(self._on_image_received)
        self.editor.long_text_received.connect(self._on_long_text_received)
        self.attachment_chips.remove_requested.connect(self._on_remove_attachment)

    def add_button(self, button: QPushButton) -> None:
        """Put another part's button (the microphone) beside Attach."""
        self._buttons.insertWidget(1, button)

    def text(self) -> str:
        """The text typed, exactly."""
        return self.editor.toPlainText()

    def set_text(self, text: str) -> None:
        """Replace the editor's text and put the cursor at its end."""
        self.editor.setPlainText(text)
        self.editor.moveCursor(self.editor.textCursor().MoveOperation.End)

    def attachments(self) -> list[Attachment]:
        """The attachments waiting to be sent."""
        return list(self._attachments)

    def set_attachments(self, attachments: list[Attachment]) -> None:
        """Replace the pending attachments."""
        self._attachments = list(attachments)
        self._refresh_chips()

    def add_attachment(self, attachment: Attachment) -> None:
        """Add one pending attachment."""
        self._attachments.append(attachment)
        self._refresh_chips()

    def clear(self) -> None:
        """Empty the editor and drop the attachments (after a send)."""
        self.editor.clear()
        self.set_attachments([])

    def remove_attachment(self, name: str) -> bool:
        """Take the first attachment called `name` off the message; True when there was one."""
        for index, item in enumerate(self._attachments):
            if item.name == name:
                del self._attachments[index]
                self._refresh_chips()
                return True
        return False

    def is_empty(self) -> bool:
        """True when there is neither text nor an attachment."""
        return not self.text().strip() and not self._attachments

    def set_model(
        self, model: str, *, images: bool, audio: bool = False, hearers: Sequence[str] = ()
    ) -> None:
        """Tell the composer which model it writes to, whether that model reads images and
        hears audio, and which listed models hear (named when a sound is refused)."""
        self._model = model
        self._images = images
        self._audio = audio
        self._hearers = tuple(hearers)
        takes = ["text files"] + ["images"] * images + ["sounds (.wav, .mp3)"] * audio
        self.attach_button.setToolTip(
            f"Attach {', '.join(takes[:-1])} or {takes[-1]} (or drop or paste them)"
            if len(takes) > 1
            else "Attach text files (or drop or paste them)"
        )

    def refused(self) -> bool:
        """True, saying why through `notice`, when the message cannot go to the model as it
        is: a sound attached for a model that does not hear (chosen after the sound was
        attached). Checked at Send: the server would refuse the whole request."""
        if not self._audio and any(item.kind == "audio" for item in self._attachments):
            self.notice.emit(audio_refusal(self._model, self._hearers))
            return True
        return False

    def offer_skills(self, store: SkillStore, *, panel: bool = False) -> None:
        """Offer the store's user-invocable skills after `/`, re-reading its folders first.

        `panel` offers `/skills` too (the chat window opens the Skills panel for it),
        unless a skill has that name.
        """
        store.refresh()
        descriptions = store.descriptions()
        offered = [(name, descriptions.get(name, "")) for name in store.user_names()]
        if panel and "skills" not in descriptions:
            offered = sorted([*offered, ("skills", "Open the Skills panel")])
        self._skill_model.clear()
        for name, description in offered:
            # One line per skill: a description's line breaks would make rows of it that
            # read as more skills, and rows of unequal height that the list cuts in half.
            line = " ".join(description.split())
            item = QStandardItem(f"/{name}  —  {line}" if line else f"/{name}")
            item.setData(name, Qt.ItemDataRole.UserRole)
            item.setToolTip(plain.tooltip(description))
            self._skill_model.appendRow(item)

    def set_streaming(self, streaming: bool) -> None:
        """Swap Send (and Compare) for Stop while a reply streams."""
        self.stop_button.setVisible(streaming)
        self.send_button.setVisible(not streaming)
        self.compare_button.setVisible(not streaming and self._compare_offered)
        if not streaming:
            self.stop_thinking_button.setVisible(False)

    def set_thinking(self, thinking: bool) -> None:
        """Offer "Stop thinking" while the model of the streaming reply thinks."""
        self.stop_thinking_button.setVisible(thinking)

    def offer_compare(self, compare: Callable[[], object]) -> None:
        """Show Compare… beside Send, calling `compare` (the chat window's; not the quick one's)."""
        self._compare_offered = True
        self.compare_button.clicked.connect(lambda: compare())
        self.compare_button.setVisible(self.send_button.isVisibleTo(self))

    @Slot(list)
    def add_files(self, paths: list) -> None:
        """Attach files (from the dialog, a drop or a paste); refusals go to `notice`."""
        for path in paths:
            if is_sound(Path(path)) and not self._audio:
                self.notice.emit(audio_refusal(self._model, self._hearers))
                continue
            try:
                self.add_attachment(
                    file_attachment(Path(path), images=self._images, audio=self._audio)
                )
            except AttachmentError as exc:
                self.notice.emit(str(exc))

    def _refresh_chips(self) -> None:
        self.attachments_changed.emit()
        self.attachment_chips.set_items(
            [(str(i), item.label()) for i, item in enumerate(self._attachments)]
        )

    @Slot()
    def choose_files(self) -> None:
        """Ask for files to attach."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", str(Path.home()))
        self.add_files([Path(p) for p in paths])

    @Slot(list)
    def _on_folders_received(self, folders: list) -> None:
        if self.takes_folders:
            self.folders_dropped.emit(folders)
        else:
            self.add_files(folders)  # each is refused, saying it is a folder

    @Slot(QImage)
    def _on_image_received(self, image: QImage) -> None:
        if not self._images:
            self.notice.emit(
                f"{self._model or 'This model'} does not read images, so the image was not "
                "attached. Pick a model with vision to send images."
            )
            return
        self.add_attachment(image_attachment(image))

    @Slot(str)
    def _on_long_text_received(self, text: str) -> None:
        self.add_attachment(Attachment("text", "pasted text", "text/plain", text))
        self.notice.emit(f"Long paste ({len(text):,} characters) attached as a file.")

    @Slot(str)
    def _on_remove_attachment(self, key: str) -> None:
        index = int(key)
        if 0 <= index < len(self._attachments):
            del self._attachments[index]
            self._refresh_chips()
