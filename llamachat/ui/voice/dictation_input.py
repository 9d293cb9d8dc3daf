"""The composer's microphone: a button, hold-to-talk, and "Transcribe audio file…".

What is heard appears in the message box as it is recognized, in place of what the same
dictation showed before, and stays editable; nothing is sent unless `dictation_sends` is
on, and then only when the speaker stops (a pause, or the hold-to-talk key released), never
when the button is clicked to stop. The router transcribes when it lists a model that
hears audio, else the local engine does; the button's tooltip says which, or, without the
voice extra, the one command that adds it.

Threads: the dictation and file transcriptions run as background tasks (`ui.tasks`); the
text they hear reaches the composer through the queued `_heard` signal.

Errors: a VoiceError (no microphone, access denied, unplugged, the extra missing, the
router's refusal) is one line through the composer's `notice`; anything else is a bug.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, Signal, Slot
from PySide6.QtGui import QAction, QKeyEvent, QTextCursor
from PySide6.QtWidgets import QFileDialog, QPushButton, QWidget

from llamachat.router.models import ModelInfo
from llamachat.ui import plain, tasks
from llamachat.ui.app import App
from llamachat.ui.views.composer import Composer
from llamachat.voice import VoiceError, VoiceMissing, availability
from llamachat.voice.audio_files import SOUND_SUFFIXES, read_sound
from llamachat.voice.capture import AudioSource, Microphone, seconds
from llamachat.voice.transcribe import (
    Dictation,
    Heard,
    Transcriber,
    audio_model,
    choose_transcriber,
    transcribe_file,
)

log = logging.getLogger(__name__)

HOLD_KEY = Qt.Key.Key_F9
"""Held down anywhere in the window: dictate while it is held (`shortcuts.SHORTCUTS`)."""


class DictationInput(QObject):
    """Dictation into one composer: the microphone button, hold-to-talk, files transcribed."""

    listening_changed = Signal(bool)
    shown = Signal(object)  # a Heard, just put in the message box
    transcribed = Signal(str)  # a file's text, put in the message box
    _heard = Signal(object)  # Heard, emitted on the dictation's thread

    def __init__(
        self,
        app: App,
        composer: Composer,
        *,
        models: Callable[[], list[ModelInfo]],
        window: QWidget,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent if parent is not None else window)
        self._app = app
        self._window = window
        self._composer = composer
        self._models = models
        self._dictation: Dictation | None = None
        self._sends = False
        self._start = 0
        self._length = 0
        self._separator = ""
        self.source_for: Callable[[], AudioSource] = Microphone
        """Where the sound comes from (the microphone; the tests play a file in)."""

        self.button = QPushButton("Dictate", composer)
        self.button.setAccessibleName("Dictate")
        self.button.setCheckable(True)
        self.button.clicked.connect(self._on_button_clicked)
        self.button.installEventFilter(self)
        composer.add_button(self.button)
        self._describe()

        self.transcribe_action = QAction("Transcribe audio file…", window)
        self.transcribe_action.triggered.connect(self.choose_file)

        self._heard.connect(self._on_heard, Qt.ConnectionType.QueuedConnection)
        window.installEventFilter(self)

    # ------------------------------------------------------------------ state

    def listening(self) -> bool:
        """Whether a dictation is running."""
        return self._dictation is not None

    def transcriber(self) -> Transcriber:
        """Who would transcribe now: the router with a model that hears, else the local engine."""
        return choose_transcriber(self._app.registry.router(), self._models())

    def missing(self) -> VoiceMissing | None:
        """What of the voice extra is missing for the transcriber chosen now (None: nothing)."""
        missing = availability.capture_missing()
        if audio_model(self._models()) is None:
            missing += availability.engine_missing()
        return VoiceMissing(missing) if missing else None

    def _describe(self) -> None:
        missing = self.missing()
        if missing is not None:
            tip = str(missing)
        else:
            tip = (
                "Dictate into the message box (or hold F9): transcribed by "
                f"{self.transcriber().description}"
            )
        self.button.setToolTip(plain.tooltip(tip))

    # ------------------------------------------------------------------ dictation

    def start(self, *, hold: bool = False) -> bool:
        """Listen and write what is heard into the message box; False (and a notice) if not.

        With `dictation_sends` on, a dictation started by the button ends at the first
        pause and is sent; one `hold`-to-talk ends (and is sent) when the key is released.
        """
        if self._dictation is not None:
            return True
        missing = self.missing()
        if missing is not None:
            self._say(str(missing))
            return False
        self._sends = self._app.config.dictation_sends
        dictation = Dictation(
            self.transcriber(), self._heard.emit, end_on_silence=self._sends and not hold
        )
        self._dictation = dictation
        self._begin_insertion()
        self._set_listening(True)
        source = self.source_for()
        tasks.run_in_background(
            lambda: dictation.run(source),
            lambda future: self._on_dictation_done(dictation, future),
            receiver=self.button,
            daemon=True,
        )
        return True

    def stop(self, *, send: bool = False) -> None:
        """Stop listening: what is left is recognized; sent only with `send` and the setting on."""
        if self._dictation is None:
            return
        self._sends = self._sends and send
        self._dictation.stop()

    @Slot(bool)
    def _on_button_clicked(self, _checked: bool) -> None:
        if self._dictation is None:
            self.start()
        else:
            self.stop(send=False)
        self.button.setChecked(self._dictation is not None)

    def _set_listening(self, listening: bool) -> None:
        self.button.setChecked(listening)
        self.button.setText("Stop dictating" if listening else "Dictate")
        self.listening_changed.emit(listening)

    def _begin_insertion(self) -> None:
        editor = self._composer.editor
        cursor = editor.textCursor()
        self._start = cursor.position()
        self._length = 0
        before = editor.toPlainText()[: self._start]
        self._separator = " " if before and not before[-1].isspace() else ""

    @Slot(object)
    def _on_heard(self, heard: Heard) -> None:
        if self._dictation is None:
            return
        text = self._separator + heard.text if heard.text else ""
        editor = self._composer.editor
        end = len(editor.toPlainText())
        cursor = QTextCursor(editor.document())
        cursor.setPosition(min(self._start, end))
        cursor.setPosition(min(self._start + self._length, end), QTextCursor.MoveMode.KeepAnchor)
        cursor.insertText(text)
        # Qt counts UTF-16 code units.
        self._length = len(text.encode("utf-16-le")) // 2
        editor.setTextCursor(cursor)
        self.shown.emit(heard)

    def _on_dictation_done(self, dictation: Dictation, future: Future) -> None:
        if dictation is not self._dictation:
            return
        self._dictation = None
        self._set_listening(False)
        try:
            text = future.result()
        except VoiceError as exc:
            self._say(str(exc))
            return
        if self._sends and text.strip():
            self._composer.submitted.emit()

    # ------------------------------------------------------------------ files

    @Slot()
    def choose_file(self) -> None:
        """Ask for a sound file and put its text into the message box."""
        suffixes = " ".join(f"*{suffix}" for suffix in SOUND_SUFFIXES)
        path, _ = QFileDialog.getOpenFileName(
            self._composer.window(), "Transcribe audio file", "", f"Sound ({suffixes})"
        )
        if path:
            self.transcribe(Path(path))

    def transcribe(self, path: Path) -> Future | None:
        """Transcribe the sound file at `path` in the background into the message box."""
        missing = self.missing()
        if missing is not None:
            self._say(str(missing))
            return None
        transcriber = self.transcriber()
        self._say(f"Transcribing {path.name} with {transcriber.description}…")

        def work() -> tuple[str, float]:
            pcm = read_sound(path)
            return transcribe_file(pcm, transcriber), seconds(pcm)

        return tasks.run_in_background(
            work, lambda future: self._on_file_done(path, future), receiver=self.button
        )

    def _on_file_done(self, path: Path, future: Future) -> None:
        try:
            text, length = future.result()
        except VoiceError as exc:
            self._say(str(exc))
            return
        if not text:
            self._say(f"No speech heard in {path.name}")
            return
        editor = self._composer.editor
        cursor = editor.textCursor()
        before = editor.toPlainText()[: cursor.position()]
        cursor.insertText((" " if before and not before[-1].isspace() else "") + text)
        editor.setTextCursor(cursor)
        self._say(f"Transcribed {path.name} ({length:.0f} s)")
        self.transcribed.emit(text)

    # ------------------------------------------------------------------ events

    def _say(self, text: str) -> None:
        self._composer.notice.emit(text)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Hold-to-talk on the window; the button's tooltip told afresh when shown."""
        kind = event.type()
        if watched is self.button and kind == QEvent.Type.ToolTip:
            self._describe()
        elif watched is self._window and kind == QEvent.Type.Hide:
            # A closed or hidden window (the quick window's Esc) stops hearing the room.
            self.stop()
        elif (
            kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease)
            and isinstance(event, QKeyEvent)
            and event.key() == HOLD_KEY
        ):
            if not event.isAutoRepeat():
                if kind == QEvent.Type.KeyPress:
                    self.start(hold=True)
                else:
                    self.stop(send=True)
            return True
        return False
