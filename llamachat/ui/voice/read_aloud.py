"""Replies read aloud: one voice for the app, fed a whole reply or a streaming one.

`ReadAloud` (the App's `read_aloud`) reads one thing at a time: `read(key, text)` a
reply's whole text (its ⋯ menu's Read aloud), or `start(key)`, `say(delta)`... `end()`
a reply as it streams (voice mode). The text is cut into sentences
(`voice.sentences.SentenceSplitter`) on the GUI thread, and a `voice.reader.Reader`
speaks them on a daemon task: the voice is loaded and the next sentence made there
while one plays, so the GUI never waits for speech. Starting a reading stops the one
before; the speed follows `read_aloud_speed` as it changes, from the next sentence.

`MenuLink` ties a window's ⋯ menus to it: Read aloud, Stop reading, the speed, and
the line shown in the window that asked when reading fails.

`make_player` makes the player of each reading: the sound device (`DevicePlayer`), or
in the tests a WAV file through the same interface.

Errors: a missing voice extra, no voice to read with, a voice model that does not
load, no sound device: `failed` says it in one line for the window to show; the
reading ends. Any other exception is a bug for the excepthook.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from llamachat.config import Config, ConfigError
from llamachat.ui import tasks
from llamachat.voice.availability import VoiceError
from llamachat.voice.playback import DevicePlayer, Player
from llamachat.voice.reader import Reader
from llamachat.voice.sentences import SentenceSplitter
from llamachat.voice.speech import Speaker, find_speaker

if TYPE_CHECKING:
    from llamachat.ui.views.messages import MessagesView

log = logging.getLogger(__name__)


class Settings(Protocol):
    """What reading needs of the App: the config, its changes, and a way to save one."""

    @property
    def config(self) -> Config: ...

    @property
    def config_changed(self) -> SignalInstance: ...

    def save_settings(self, values: dict[str, object]) -> Config: ...


class ReadAloud(QObject):
    """Reads replies aloud, one at a time, off the GUI thread."""

    reading_changed = Signal(object)  # the key (a reply's id) read now; None: nothing
    finished = Signal(object)  # a reading's key, once its last sentence was heard
    failed = Signal(str)  # why reading stopped, in one line for the person
    speed_changed = Signal(float)  # read_aloud_speed changed (in any window, or the file)

    def __init__(self, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self.make_player: Callable[[], Player] = DevicePlayer
        self._reader: Reader | None = None
        self._running: set[Future] = set()  # the readings' tasks not ended yet
        self._splitter = SentenceSplitter()
        self._key: object = None
        # Loaded voices by model path (None: espeak-ng); filled on reading threads.
        self._speakers: dict[Path | None, Speaker] = {}
        self._lock = threading.Lock()
        settings.config_changed.connect(self._on_config_changed)

    @property
    def key(self) -> object:
        """What is read now (a reply's id), or None."""
        return self._key if self._reader is not None else None

    @property
    def running(self) -> int:
        """How many readings' threads have not ended (a stopped one ends after its sentence)."""
        # A future is done before its done-callbacks have dropped it from the set.
        return sum(not running.done() for running in list(self._running))

    @property
    def speed(self) -> float:
        """The reading speed now (read_aloud_speed)."""
        return self._settings.config.read_aloud_speed

    @property
    def reader(self) -> Reader | None:
        """The reading now (its sentences spoken and their delays), or None."""
        return self._reader

    def prepare(self) -> None:
        """Load the voice (and warm it up) in the background: a reading soon to come starts
        at once."""
        voice_model = self._settings.config.voice_model

        def load() -> None:
            try:
                # A first sentence costs a neural voice twice the next ones (its runtime
                # warms up): said to no one here, not at the reply's first sentence.
                for _pcm in self._speaker(voice_model).synthesize("Ready."):
                    pass
            except VoiceError as exc:
                log.info("the voice was not loaded ahead: %s", exc)  # said when reading

        tasks.run_in_background(load, daemon=True)

    def read(self, key: object, text: str) -> None:
        """Read a whole reply's `text` (markdown) aloud, stopping any reading before."""
        self.start(key)
        self.say(text)
        self.end()

    def start(self, key: object) -> None:
        """Begin reading a reply that streams: `say` its text as it comes, then `end`."""
        self.stop()
        cfg = self._settings.config
        voice_model = cfg.voice_model
        reader = Reader(
            lambda: self._speaker(voice_model), self.make_player, speed=cfg.read_aloud_speed
        )
        self._reader, self._key = reader, key
        self._splitter = SentenceSplitter()
        running = tasks.run_in_background(
            reader.run, lambda done: self._on_done(reader, key, done), receiver=self, daemon=True
        )
        self._running.add(running)
        running.add_done_callback(self._running.discard)
        self.reading_changed.emit(key)

    def say(self, text: str) -> None:
        """The next piece of the reply being read: its complete sentences are queued."""
        if self._reader is not None:
            for sentence in self._splitter.feed(text):
                self._reader.say(sentence)

    def end(self) -> None:
        """The reply is complete: read what is left, then the reading ends."""
        if self._reader is not None:
            for sentence in self._splitter.finish():
                self._reader.say(sentence)
            self._reader.end()

    def stop(self) -> None:
        """Stop reading now."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.stop()
            self.reading_changed.emit(None)

    def close(self, timeout_s: float = 3.0) -> None:
        """Stop reading and wait for the reading threads to end (quitting).

        A voice in the middle of a sentence finishes it first; an interpreter that exits
        under onnxruntime's running threads aborts.
        """
        self.stop()
        for running in list(self._running):
            try:
                running.exception(timeout=timeout_s)
            except TimeoutError:
                log.warning("a reading did not end within %.0f s of quitting", timeout_s)

    def set_speed(self, speed: float) -> None:
        """Read at `speed` from now on (saved as read_aloud_speed)."""
        try:
            self._settings.save_settings({"read_aloud_speed": speed})
        except ConfigError as exc:
            self.failed.emit(f"The reading speed could not be saved: {exc}")

    def _speaker(self, voice_model: Path | None) -> Speaker:
        # On a reading thread: a voice loads once (half a second for Piper) and is kept.
        with self._lock:
            speaker = self._speakers.get(voice_model)
            if speaker is None:
                speaker = self._speakers[voice_model] = find_speaker(voice_model)
            return speaker

    def _on_done(self, reader: Reader, key: object, done: Future) -> None:
        current = reader is self._reader
        if current:
            self._reader = None
            self.reading_changed.emit(None)
        try:
            done.result()
        except VoiceError as exc:
            log.info("reading aloud stopped: %s", exc)
            if current:
                self.failed.emit(str(exc))
            return
        if current and not reader.stopped:
            self.finished.emit(key)

    def _on_config_changed(self, cfg: Config) -> None:
        if self._reader is not None:
            self._reader.speed = cfg.read_aloud_speed
        self.speed_changed.emit(cfg.read_aloud_speed)


class MenuLink(QObject):
    """Ties one window's messages' ⋯ menus to the app's `ReadAloud` (gone with the window)."""

    def __init__(
        self, read_aloud: ReadAloud, messages: MessagesView, show: Callable[[str], None]
    ) -> None:
        # A child of the messages view: its connections end when the window closes.
        super().__init__(messages)
        self._read_aloud = read_aloud
        self._messages = messages
        self._show = show
        self._asked = False  # this window asked for the reading now
        messages.read_aloud_requested.connect(self._on_read_aloud_requested)
        messages.stop_reading_requested.connect(read_aloud.stop)
        messages.read_speed_chosen.connect(read_aloud.set_speed)
        read_aloud.reading_changed.connect(self._on_reading_changed)
        read_aloud.failed.connect(self._on_failed)
        read_aloud.speed_changed.connect(messages.set_read_speed)
        messages.set_read_speed(read_aloud.speed)

    def _on_read_aloud_requested(self, message_id: object, text: str) -> None:
        self._read_aloud.read(message_id, text)
        self._asked = True

    def _on_reading_changed(self, key: object) -> None:
        self._messages.set_reading(key)
        if key is None:
            return
        self._asked = False

    def _on_failed(self, text: str) -> None:
        if self._asked:
            self._show(text)
