"""The tests of `llamachat.voice.capture`."""

from __future__ import annotations

import pytest

from llamachat.tests.voice.conftest import SPEECH
from llamachat.voice import VoiceError
from llamachat.voice.audio_files import read_sound
from llamachat.voice.capture import Microphone, Playback, microphones


def test_without_a_microphone_opening_one_says_so(decoding) -> None:
    if microphones():
        pytest.skip(f"this machine has a microphone ({microphones()[0]})")
    microphone = Microphone()

    with pytest.raises(VoiceError, match="No microphone found"):
        microphone.read()


def test_a_stopped_microphone_ends_without_opening_a_device(decoding) -> None:
    microphone = Microphone()
    microphone.stop()

    assert microphone.read() is None


def test_playback_hands_out_the_whole_sound_in_order_then_ends(decoding) -> None:
    pcm = read_sound(SPEECH / "short.mp3")
    playback = Playback(pcm, speed=20.0)

    pieces = []
    while (piece := playback.read()) is not None:
        pieces.append(piece)

    assert b"".join(pieces) == pcm
    assert len([p for p in pieces if p]) > 1


def test_stopping_a_playback_ends_it_at_the_next_read(decoding) -> None:
    playback = Playback(read_sound(SPEECH / "dictation.wav"), speed=1.0)
    playback.read()
    playback.stop()

    assert playback.read() is None
