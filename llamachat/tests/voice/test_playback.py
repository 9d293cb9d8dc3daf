"""Where speech goes (llamachat/voice/playback.py): a WAV file, the sound device."""

from __future__ import annotations

import threading
import wave
from pathlib import Path

import pytest

from llamachat.voice.playback import DevicePlayer, PlaybackError, WavPlayer


def test_the_wav_player_writes_what_it_is_given(tmp_path: Path) -> None:
    player = WavPlayer(tmp_path / "out.wav")
    player.write(b"\x01\x00" * 1000, 16000)
    player.write(b"\x02\x00" * 500, 16000)
    player.drain(threading.Event())
    with wave.open(str(tmp_path / "out.wav")) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getnframes()) == (16000, 1, 1500)
    assert player.first_write is not None


def test_without_a_sound_device_playing_says_so_in_one_line() -> None:
    pytest.importorskip("miniaudio", reason="the voice extra is not installed")
    player = DevicePlayer()
    try:
        player.write(b"\0\0" * 2205, 22050)
    except PlaybackError as exc:
        assert str(exc).startswith("No sound output: the sound device could not be opened")
        assert "\n" not in str(exc)
    else:
        player.stop()
        pytest.skip("this machine has a sound device: the no-device line cannot be shown")


def test_the_device_player_plays_through_miniaudio_and_stops_at_once() -> None:
    """miniaudio's null device: a real output device that plays into nothing, in real time."""
    pytest.importorskip("miniaudio", reason="the voice extra is not installed")
    player = DevicePlayer(systems=("NULL",))
    half_second = b"\x10\x00" * 11025
    player.write(half_second, 22050)
    # Returns once the device's own thread has taken every frame (it would hang, and the
    # test time out, if the stream handed to miniaudio did not play).
    player.drain(threading.Event())
    player.write(half_second * 20, 22050)  # ten seconds
    stop = threading.Event()
    stop.set()
    player.stop()
    player.drain(stop)  # returns at once: nothing queued any more
    assert player.first_write is not None
