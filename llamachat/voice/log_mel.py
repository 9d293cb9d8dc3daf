"""Whisper's input: the log-mel spectrogram of up to 30 s of 16 kHz sound, with numpy.

Whisper reads 80 (or 128) mel bands of 25 ms frames every 10 ms, 3000 frames (30 s) at a
time: a Hann-windowed 400-point FFT's power, through Slaney-style mel filters (triangles
normalized to equal area, as librosa makes them), log10, floored 8 below the loudest
value, scaled as `(log + 4) / 4`. The frames are computed over the sound itself and then
padded with zeros to 3000: this is how faster-whisper feeds CTranslate2, and on the tests'
speech it recognizes better than features computed over the sound padded with 30 s of
silence.

Qt-free; imports numpy (the voice extra).
"""

from __future__ import annotations

import functools
import math
from typing import Any

SAMPLE_RATE = 16_000
N_FFT = 400
HOP = 160
FRAMES = 3000
"""Frames Whisper reads at once: 30 s."""
SAMPLES = FRAMES * HOP


@functools.cache
def mel_filters(n_mels: int) -> Any:
    """The (n_mels, 201) matrix from FFT power to mel bands, Slaney scale and area norm."""
    import numpy as np

    # Linear below 1 kHz (200/3 Hz per mel), logarithmic above (27 mels per factor 6.4).
    f_sp = 200.0 / 3
    logstep = math.log(6.4) / 27.0

    def hz_to_mel(hz: float) -> float:
        return hz / f_sp if hz < 1000 else 15 + math.log(hz / 1000) / logstep

    mels = np.linspace(hz_to_mel(0.0), hz_to_mel(SAMPLE_RATE / 2), n_mels + 2)
    hz = np.where(mels < 15, f_sp * mels, 1000 * np.exp(logstep * (mels - 15)))
    freqs = np.linspace(0, SAMPLE_RATE / 2, N_FFT // 2 + 1)
    rising = (freqs[None, :] - hz[:-2, None]) / (hz[1:-1] - hz[:-2])[:, None]
    falling = (hz[2:, None] - freqs[None, :]) / (hz[2:] - hz[1:-1])[:, None]
    triangles = np.maximum(0, np.minimum(rising, falling))
    return (triangles * (2.0 / (hz[2:] - hz[:-2]))[:, None]).astype(np.float32)


def log_mel(audio: Any, n_mels: int = 80) -> Any:
    """Whisper's features (n_mels, 3000) for `audio`: float32 samples in [-1, 1], at most 30 s."""
    import numpy as np

    # One hop of silence after the sound, as faster-whisper adds; then centred frames.
    sound = np.pad(np.pad(audio[:SAMPLES], (0, HOP)), N_FFT // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    frames = np.lib.stride_tricks.sliding_window_view(sound, N_FFT)[::HOP]
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2
    bands = mel_filters(n_mels) @ power[:-1].T
    log = np.log10(np.maximum(bands, 1e-10))
    log = (np.maximum(log, log.max() - 8.0) + 4.0) / 4.0
    return np.pad(log, ((0, 0), (0, max(0, FRAMES - log.shape[1]))))[:, :FRAMES].astype(np.float32)
