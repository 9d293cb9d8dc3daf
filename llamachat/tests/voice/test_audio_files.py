"""The tests of `llamachat.voice.audio_files`."""

from __future__ import annotations

import os
import wave
from io import BytesIO

import pytest

from llamachat.tests.voice.conftest import SPEECH
from llamachat.voice import VoiceError
from llamachat.voice.audio_files import read_sound, wav_bytes
from llamachat.voice.capture import seconds


@pytest.mark.parametrize(
    ("name", "length"), [("dictation.wav", 5.12), ("ten_seconds.ogg", 10.0), ("short.mp3", 2.2)]
)
def test_sound_files_decode_to_16_khz_mono_of_their_length(decoding, name, length) -> None:
    pcm = read_sound(SPEECH / name)

    assert seconds(pcm) == pytest.approx(length, abs=0.1)
    assert any(pcm)


def test_a_file_that_is_no_sound_is_refused_naming_it(decoding, tmp_path) -> None:
    notes = tmp_path / "notes.mp3"
    notes.write_text("not a sound at all\n" * 50)

    with pytest.raises(VoiceError, match="notes.mp3 is not a sound"):
        read_sound(notes)


def test_a_pipe_is_refused_by_the_file_gate_without_blocking(decoding, tmp_path) -> None:
    fifo = tmp_path / "speech.wav"
    os.mkfifo(fifo)

    with pytest.raises(VoiceError, match="speech.wav is a pipe"):
        read_sound(fifo)


def test_wav_bytes_hold_the_sound_at_16_khz_mono(decoding) -> None:
    pcm = read_sound(SPEECH / "short.mp3")

    with wave.open(BytesIO(wav_bytes(pcm))) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
        assert wav.readframes(wav.getnframes()) == pcm
