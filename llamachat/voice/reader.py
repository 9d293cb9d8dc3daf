"""Reading aloud: sentences in, speech out, in order, the next one made while one plays.

A `Reader` takes sentences (`say`, from any thread) while its `run` loop, on a thread
the caller gives it, synthesizes each with a `speech.Speaker` and hands the PCM to a
`playback.Player`. Both are made by `run` itself (loading a voice takes half a second,
opening a device may fail): sentences said meanwhile wait in the queue. The player plays from its own buffer, so sentence N+1 is synthesized
while sentence N is heard: once the first sentence is out, the rest follow without a
gap. `end()` says no sentence will follow (`run` returns once all were heard); `stop()`
drops what is queued and silences the player at once. `speed` may change between
sentences.

`delays` holds, for each sentence spoken, the seconds from `say` to its first PCM in
the player: the bench's "first word spoken after the first sentence".

Errors: `run` raises what the engine or the player raised (`speech.SpeechError`,
`playback.PlaybackError`): the reading ends there, with that line for the person.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from llamachat.voice.playback import Player
from llamachat.voice.speech import Speaker

_END = None


class Reader:
    """Speaks queued sentences in order through one engine and one player."""

    def __init__(
        self,
        make_speaker: Callable[[], Speaker],
        make_player: Callable[[], Player],
        *,
        speed: float = 1.0,
    ) -> None:
        self._make_speaker = make_speaker
        self._make_player = make_player
        self.speaker: Speaker | None = None
        self.player: Player | None = None
        self.speed = speed
        self.delays: list[float] = []
        self.spoken: list[str] = []
        self._queue: queue.Queue[tuple[str, float] | None] = queue.Queue()
        self._stop = threading.Event()

    def say(self, sentence: str) -> None:
        """Queue `sentence` to be read after those before it."""
        if sentence.strip() and not self._stop.is_set():
            self._queue.put((sentence, time.monotonic()))

    def end(self) -> None:
        """No more sentences: `run` returns once the queued ones were heard."""
        self._queue.put(_END)

    def stop(self) -> None:
        """Stop reading now: the queue is dropped and the player silenced."""
        self._stop.set()
        self._queue.put(_END)
        if self.player is not None:
            self.player.stop()

    @property
    def stopped(self) -> bool:
        """Whether `stop` was called."""
        return self._stop.is_set()

    def run(self) -> None:
        """Read until `end` (after the last sentence is heard) or `stop`; on a worker thread."""
        if self._stop.is_set():
            return
        speaker = self.speaker = self._make_speaker()
        player = self.player = self._make_player()
        try:
            while not self._stop.is_set():
                item = self._queue.get()
                if item is _END:
                    player.drain(self._stop)
                    return
                self._speak(speaker, player, *item)
        finally:
            if self._stop.is_set():
                player.stop()

    def _speak(self, speaker: Speaker, player: Player, sentence: str, queued_at: float) -> None:
        first = True
        for pcm in speaker.synthesize(sentence, self.speed):
            if self._stop.is_set():
                return
            player.write(pcm, speaker.sample_rate)
            if first:
                self.delays.append(time.monotonic() - queued_at)
                self.spoken.append(sentence)
                first = False
