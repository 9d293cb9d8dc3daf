"""The tests of `llamachat.voice.log_mel`."""

from __future__ import annotations

import pytest

from llamachat.tests.voice.conftest import SPEECH
from llamachat.voice.audio_files import read_sound


def test_speech_fills_its_frames_and_the_rest_of_30_s_is_zero(local_engine) -> None:
    import numpy

    from llamachat.voice.log_mel import FRAMES, log_mel, mel_filters

    pcm = read_sound(SPEECH / "dictation.wav")
    audio = numpy.frombuffer(pcm, dtype="<i2").astype(numpy.float32) / 32768.0

    features = log_mel(audio)

    assert features.shape == (80, FRAMES)
    spoken = len(audio) // 160 + 1
    assert not features[:, spoken:].any()
    # Floored 8 (log10) below the loudest value, scaled by 1/4: a range of exactly 2.
    assert features[:, :spoken].max() - features[:, :spoken].min() == pytest.approx(2.0)
    assert mel_filters(80).shape == (80, 201)
