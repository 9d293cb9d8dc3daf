"""Voice mode: listen, send on a pause, read the reply aloud as it streams, listen again.

`VoiceMode` is one window's: `start()` listens (a `voice.transcribe.Dictation` that ends
when the speaker pauses, on a daemon task), shows what it hears in the message box
(`heard`), and sends it; the reply that this send starts is read aloud sentence by
sentence while it streams (`ReplyStream.text_added` into the app's `ReadAloud`), and
once its last sentence was heard it listens again. `stop()` (the button again, or Esc)
ends it wherever it is: listening, waiting, or reading. `state` says where it is
(`LISTENING`, `WAITING`, `SPEAKING`, or "" when off), through `state_changed`.

`make_source` makes each listening's sound source (the microphone; in the tests a
file played in at real-time rate) and `make_transcriber` the engine (the router's when
it lists a model that hears audio, else Whisper tiny.en here).

`VoiceButton` puts a "Voice" button for it beside the composer's Attach: it starts and
ends voice mode, says the state and the line that stopped it, and takes Esc in the window
while voice mode is on (ending it, and nothing else). `voice_mode_for(window)` makes both,
and ties the window's ⋯ menus to the app's `ReadAloud` (`read_aloud.MenuLink`).

Errors: no voice extra, no microphone, access denied, the device unplugged, no voice
to read with, no sound output: `failed` says it in one line and voice mode ends. The
window shows it; nothing is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPushButton, QWidget

from llamachat.ui import plain, tasks
from llamachat.ui.voice.read_aloud import MenuLink, ReadAloud
from llamachat.voice.availability import VoiceError, require_capture
from llamachat.voice.capture import AudioSource, Microphone
from llamachat.voice.transcribe import Dictation, Heard, LocalTranscriber, Transcriber

if TYPE_CHECKING:
    from llamachat.ui.chat.conversation import Conversation
    from llamachat.ui.chat.reply import ReplyStream
    from llamachat.ui.views.composer import Composer
    from llamachat.ui.views.messages import MessagesView
    from llamachat.ui.voice.dictation_input import DictationInput

log = logging.getLogger(__name__)

LISTENING = "listening"
WAITING = "waiting"  # sent; the reply has not begun
SPEAKING = "speaking"

VOICE = "Voice"
END_VOICE = "End voice"

# Nothing while waiting: the message and its reply (or the window's reason it was not
# sent) speak for themselves, and voice mode's own line must not hide that reason.
_STATUS = {
    LISTENING: "Listening…",
    WAITING: "",
    SPEAKING: "Reading the reply aloud…",
}


class VoiceMode(QObject):
    """One window's voice mode: a loop of listening, sending and reading the reply aloud."""

    state_changed = Signal(str)  # LISTENING, WAITING, SPEAKING, or "" (off)
    heard = Signal(str)  # what was heard so far, while listening
    failed = Signal(str)  # why voice mode ended, in one line

    def __init__(
        self,
        chat: Conversation,
        read_aloud: ReadAloud,
        send: Callable[[str], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._read_aloud = read_aloud
        self._send = send
        self.make_source: Callable[[], AudioSource] = Microphone
        self.make_transcriber: Callable[[], Transcriber] = LocalTranscriber
        self.button: QPushButton | None = None  # the window's button for it (`VoiceButton`)
        self._chat = chat
        self._dictation: Dictation | None = None
        self._reply: ReplyStream | None = None
        self.state = ""
        chat.reply_started.connect(self._on_reply_started)
        # A question held for compacting and put back was not sent after all.
        chat.returned.connect(lambda _question: self._not_sent())
        read_aloud.finished.connect(self._on_read)
        read_aloud.failed.connect(self._on_read_failed)
        read_aloud.reading_changed.connect(self._on_reading_changed)

    @property
    def active(self) -> bool:
        """Whether voice mode is on."""
        return bool(self.state)

    def start(self) -> None:
        """Begin voice mode: listen now."""
        if self.active:
            return
        try:
            require_capture()
        except VoiceError as exc:
            self.failed.emit(str(exc))
            return
        # While the person speaks: the reply's first sentence need not wait for it.
        self._read_aloud.prepare()
        self._listen()

    def stop(self) -> None:
        """End voice mode wherever it is (the listening and the reading stop)."""
        if not self.active:
            return
        dictation, self._dictation = self._dictation, None
        if dictation is not None:
            dictation.stop()
        if self._reply is not None and self._read_aloud.key is self._reply:
            self._read_aloud.stop()
        self._reply = None
        self._set_state("")

    def _listen(self) -> None:
        # Chosen at each listening: the router may have loaded a model that hears since.
        source = self.make_source()
        dictation = self._dictation = Dictation(
            self.make_transcriber(),
            # On the dictation's thread: handed to this one.
            lambda heard: tasks.run_on_main(lambda: self._on_heard(dictation, heard)),
            end_on_silence=True,
        )
        self._set_state(LISTENING)
        tasks.run_in_background(
            lambda: dictation.run(source),
            lambda done: self._on_listened(dictation, done),
            receiver=self,
            daemon=True,
        )

    def _on_heard(self, dictation: Dictation, heard: Heard) -> None:
        if dictation is self._dictation and not heard.final:
            self.heard.emit(heard.text)

    def _on_listened(self, dictation: Dictation, done: Future) -> None:
        if dictation is not self._dictation:
            return  # ended (stop) or replaced
        self._dictation = None
        try:
            text = str(done.result()).strip()
        except VoiceError as exc:
            self._fail(str(exc))
            return
        if not text:
            # The source ended with nothing said (a file played in, a closed device).
            self.stop()
            return
        self._set_state(WAITING)
        self.heard.emit(text)
        self._send(text)
        if self.state == WAITING and not self._chat.busy():
            self._not_sent()

    def _not_sent(self) -> None:
        """The message did not leave (no model, too long, held once): the window says why,
        and listening again would only hear the person ask again into the same refusal."""
        if self.state != WAITING:
            return
        self.stop()

    def _on_reply_started(self, reply: ReplyStream) -> None:
        if self.state != WAITING:
            return
        self._reply = reply
        self._read_aloud.start(reply)
        reply.text_added.connect(self._on_text_added)
        reply.ended.connect(self._on_reply_ended)
        self._set_state(SPEAKING)

    def _on_text_added(self, text: str) -> None:
        if self._reply is not None and self._read_aloud.key is self._reply:
            self._read_aloud.say(text)

    def _on_reply_ended(self, _status: str, _error: str) -> None:
        if self._reply is not None and self._read_aloud.key is self._reply:
            self._read_aloud.end()

    def _on_read(self, key: object) -> None:
        if self.state == SPEAKING and key is self._reply:
            self._reply = None
            self._listen()

    def _on_reading_changed(self, key: object) -> None:
        # Another reading (a reply's Read aloud) took the voice: voice mode gives way.
        if self.state == SPEAKING and key is not None and key is not self._reply:
            self.stop()

    def _on_read_failed(self, text: str) -> None:
        if self.state == SPEAKING:
            self._fail(text)

    def _fail(self, text: str) -> None:
        log.info("voice mode ended: %s", text)
        self.stop()
        self.failed.emit(text)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)


class VoiceButton(QObject):
    """The composer's "Voice" button driving one window's `VoiceMode`; Esc in the window ends it."""

    def __init__(
        self,
        voice: VoiceMode,
        composer: Composer,
        window: QWidget,
        *,
        status: Callable[[str], None],
        problem: Callable[[str], None],
    ) -> None:
        # A child of the composer: its connections end with the window.
        super().__init__(composer)
        self._voice = voice
        self._status = status
        self._said = ""  # the line this button last put up
        # Esc comes to the window as a shortcut override first: taken here while voice mode
        # is on, it ends voice mode and nothing else (the window's own Esc stops or hides).
        window.installEventFilter(self)
        button = voice.button = self._button = QPushButton(VOICE, composer)
        button.setAccessibleName("Voice mode")
        composer.add_button(button)
        button.clicked.connect(self._on_clicked)
        voice.state_changed.connect(self._on_state_changed)
        voice.heard.connect(composer.set_text)
        voice.failed.connect(problem)
        missing = voice_missing()
        button.setToolTip(
            plain.tooltip(
                missing
                or "Talk: it listens, sends when you pause, reads the reply aloud and listens "
                "again (Esc ends it)"
            )
        )

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Esc while voice mode is on ends it, before the window's own Esc."""
        if (
            self._voice.active
            and event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
        ):
            event.accept()
            self._voice.stop()
            return True
        return super().eventFilter(watched, event)

    def _on_clicked(self) -> None:
        if self._voice.active:
            self._voice.stop()
        else:
            self._voice.start()

    def _on_state_changed(self, state: str) -> None:
        self._button.setText(END_VOICE if state else VOICE)
        self._button.setAccessibleName("End voice mode" if state else "Voice mode")
        # Said only when it changes: waiting says nothing, so a send refused meanwhile
        # keeps the window's reason when voice mode then ends (also saying nothing).
        text = _STATUS.get(state, "")
        if text != self._said:
            self._said = text
            self._status(text)


def voice_missing() -> str:
    """The one command that adds voice, when it is not installed ('' when it is)."""
    try:
        require_capture()
    except VoiceError as exc:
        return str(exc)
    return ""


class ReadsAloud(Protocol):
    """The App, as voice mode sees it: its one reader."""

    @property
    def read_aloud(self) -> ReadAloud: ...


class Talking(Protocol):
    """A window voice mode works in (the chat window, the quick window)."""

    # Read-only here (properties): a window's own attributes are of narrower types.
    @property
    def app(self) -> ReadsAloud: ...

    @property
    def chat(self) -> Conversation: ...

    @property
    def messages(self) -> MessagesView: ...

    @property
    def composer(self) -> Composer: ...

    @property
    def voice(self) -> DictationInput:
        """Dictation: voice mode listens with the engine it would use."""
        ...

    def send(self) -> None:
        """Send the composer's text."""
        ...

    def window(self) -> QWidget:
        """The top-level window (Esc is taken there)."""
        ...


def voice_mode_for(
    window: Talking,
    *,
    status: Callable[[str], None],
    problem: Callable[[str], None] | None = None,
) -> VoiceMode:
    """Read aloud in `window`'s ⋯ menus, and its voice mode with the Voice button; `status`
    shows voice mode's state, `problem` (else `status`) why reading or voice mode ended."""
    problem = problem or status
    read_aloud = window.app.read_aloud
    MenuLink(read_aloud, window.messages, problem)

    def send_text(text: str) -> None:
        window.composer.set_text(text)
        window.send()

    voice = VoiceMode(window.chat, read_aloud, send_text, parent=window.composer)
    voice.make_transcriber = window.voice.transcriber
    VoiceButton(voice, window.composer, window.window(), status=status, problem=problem)
    return voice
