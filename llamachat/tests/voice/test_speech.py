"""Speech engines (llamachat/voice/speech.py), with a real Piper voice."""

from __future__ import annotations

import array
import os
import shutil
from pathlib import Path

import pytest

from llamachat.voice.speech import (
    EspeakSpeaker,
    PiperSpeaker,
    SpeechUnavailable,
    find_speaker,
)


def test_a_piper_voice_speaks_a_sentence_and_faster_is_shorter(piper_voice: Path) -> None:
    speaker = find_speaker(piper_voice)
    assert isinstance(speaker, PiperSpeaker)
    assert speaker.sample_rate == 22050
    normal = b"".join(speaker.synthesize("The capital of France is Paris.", 1.0))
    fast = b"".join(speaker.synthesize("The capital of France is Paris.", 2.0))
    seconds = len(normal) / 2 / speaker.sample_rate
    assert 1.0 < seconds < 5.0
    assert len(fast) < len(normal) * 0.7
    assert max(map(abs, array.array("h", normal))) > 1000  # speech, not silence


def test_a_voice_model_that_is_missing_or_alone_or_not_a_model_says_so(
    piper_voice: Path, tmp_path: Path
) -> None:
    with pytest.raises(SpeechUnavailable, match="does not exist"):
        find_speaker(tmp_path / "nope.onnx")
    alone = tmp_path / "alone.onnx"
    shutil.copyfile(piper_voice, alone)
    with pytest.raises(SpeechUnavailable, match="alone.onnx.json"):
        find_speaker(alone)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    shutil.copyfile(piper_voice.with_name(piper_voice.name + ".json"), tmp_path / "bad.onnx.json")
    with pytest.raises(SpeechUnavailable, match="could not be loaded as a Piper voice"):
        find_speaker(bad)
    # Outside files through the one gate: a FIFO as the model, a device as its settings.
    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)
    shutil.copyfile(piper_voice.with_name(piper_voice.name + ".json"), tmp_path / "fifo.onnx.json")
    with pytest.raises(SpeechUnavailable, match="is a pipe"):
        find_speaker(fifo)
    zero = tmp_path / "zero.onnx"
    shutil.copyfile(piper_voice, zero)
    (tmp_path / "zero.onnx.json").symlink_to("/dev/zero")
    with pytest.raises(SpeechUnavailable, match="is a device"):
        find_speaker(zero)


def test_without_a_voice_model_or_espeak_the_line_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no espeak-ng on it
    with pytest.raises(SpeechUnavailable, match="voice_model.*or install espeak-ng"):
        find_speaker(None)


def test_the_system_espeak_speaks_where_installed() -> None:
    command = shutil.which("espeak-ng") or shutil.which("espeak")
    if command is None:
        pytest.skip("espeak-ng is not installed on this machine (apt-get install espeak-ng)")
    speaker = find_speaker(None)
    assert isinstance(speaker, EspeakSpeaker)
    pcm = b"".join(speaker.synthesize("Hello there.", 1.0))
    assert len(pcm) / 2 / speaker.sample_rate > 0.3
