"""Reading sentences aloud in order (llamachat/voice/reader.py), with a real voice."""

from __future__ import annotations

import threading
import wave
from pathlib import Path

import pytest

from llamachat.voice.playback import PlaybackError, WavPlayer
from llamachat.voice.reader import Reader
from llamachat.voice.speech import find_speaker


def test_sentences_are_read_in_order_into_the_player(piper_voice: Path, tmp_path: Path) -> None:
    speaker = find_speaker(piper_voice)
    player = WavPlayer(tmp_path / "reply.wav")
    reader = Reader(lambda: speaker, lambda: player)
    thread = threading.Thread(target=reader.run)
    thread.start()
    reader.say("Hello there.")
    reader.say("This is the second sentence.")
    reader.end()
    thread.join(60)
    assert not thread.is_alive()
    assert reader.spoken == ["Hello there.", "This is the second sentence."]
    assert len(reader.delays) == 2
    # Both sentences are in the file: longer than the first alone, at the voice's rate.
    one = b"".join(speaker.synthesize("Hello there."))
    with wave.open(str(player.path)) as wav:
        assert wav.getframerate() == speaker.sample_rate
        assert wav.getnframes() > 2 * len(one) // 2


def test_stop_drops_what_was_queued(piper_voice: Path, tmp_path: Path) -> None:
    speaker = find_speaker(piper_voice)
    reader = Reader(lambda: speaker, lambda: WavPlayer(tmp_path / "reply.wav"))
    for n in range(20):
        reader.say(f"Sentence number {n}.")
    reader.stop()
    reader.run()  # returns at once: stopped, nothing loaded
    assert reader.player is None
    reader.say("Never read.")
    assert len(reader.spoken) <= 1
    assert "Never read." not in reader.spoken


def test_a_player_that_cannot_open_ends_the_reading_with_its_line(
    piper_voice: Path, tmp_path: Path
) -> None:
    def no_device() -> WavPlayer:
        raise PlaybackError("No sound output: the sound device could not be opened (-401).")

    speaker = find_speaker(piper_voice)
    reader = Reader(lambda: speaker, no_device)
    reader.say("Hello.")
    reader.end()
    with pytest.raises(PlaybackError, match="No sound output"):
        reader.run()
