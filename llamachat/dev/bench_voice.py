"""Dictation's figure for the bench: end of speech to the words in the message box.

A 10 s utterance (the tests' `ten_seconds.ogg`, eSpeak NG speech) is played into a real
`ChatWindow`'s `DictationInput` at real-time rate, as a microphone would hear it, and
recognized by the local engine (Whisper tiny.en through CTranslate2, int8 on the CPU) through
the streaming `Dictation`. The figure is the time from the moment the last word ended (the
playback's clock at the last frame of speech) to the moment the message box showed text
recognized from all of the speech. The engine's model is loaded before the clock starts,
as it is after a window's first dictation.

Errors: none of its own; `run` raises VoiceMissing without the voice extra.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

SPEECH = Path(__file__).resolve().parents[1] / "tests" / "voice" / "speech" / "ten_seconds.ogg"


def run(window, wait: Callable[[Callable[[], object], float, str], None], utterances: int) -> dict:
    """Dictate the 10 s utterance `utterances` times into `window`; the latencies in ms."""
    from llamachat.voice.audio_files import read_sound
    from llamachat.voice.capture import Playback, seconds
    from llamachat.voice.transcribe import Heard, LocalTranscriber

    pcm = read_sound(SPEECH)
    voice = window.voice
    engine = voice.transcriber()
    if not isinstance(engine, LocalTranscriber):
        raise TypeError(f"the bench measures the local engine, not {engine.description}")
    engine.load()
    latencies = []
    for _ in range(utterances):
        window.composer.set_text("")
        playback = Playback(pcm, speed=1.0)
        shown: list[tuple[float, Heard]] = []
        connection = voice.shown.connect(
            lambda heard, shown=shown: shown.append((time.monotonic(), heard))
        )
        voice.source_for = lambda playback=playback: playback
        voice.start()
        wait(lambda: not voice.listening(), 60, "the dictation to end")
        voice.shown.disconnect(connection)
        final = shown[-1][1]
        if final.spoken_s is None or not final.text:
            raise RuntimeError("the dictation heard no speech in the utterance")
        spoken_at = playback.spoken_at(final.spoken_s)
        in_box = next(at for at, heard in shown if heard.heard_s >= final.spoken_s)
        latencies.append((in_box - spoken_at) * 1000)
    return {
        "median_ms": statistics.median(latencies),
        "max_ms": max(latencies),
        "utterances": utterances,
        "utterance_s": seconds(pcm),
        "engine": engine.description,
        "text": window.composer.text(),
    }
