"""How long a sound attached to a message lasts, read from its header (WAV, MP3).

Shown on the attachment's chip ("greeting.wav (0:03)"). Only the header is read, never the
sound decoded: a WAV says its frames and rate; an MP3 its frame count in a Xing/Info or
VBRI header (variable bit rate), else its length follows from the first frame's bit rate
(constant bit rate). Qt-free.

Errors: none raised; `seconds` answers None for a file it cannot tell.
"""

from __future__ import annotations

import io
import wave

# MPEG audio Layer III bit rates (kbit/s) by index, for MPEG-1 and for MPEG-2/2.5.
_BITRATES = {
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_RATES = (44100, 48000, 32000)
# How far into a file the first MP3 frame is looked for (after any ID3v2 tag).
_SYNC_SEARCH = 64 * 1024


def seconds(data: bytes, audio_format: str) -> float | None:
    """How long the sound in `data` ("wav" or "mp3", llama.cpp's formats) lasts; None: unknown."""
    if audio_format == "wav":
        return wav_seconds(data)
    if audio_format == "mp3":
        return mp3_seconds(data)
    return None


def wav_seconds(data: bytes) -> float | None:
    """How long a WAV file lasts, from its header (None when it cannot tell)."""
    try:
        with wave.open(io.BytesIO(data)) as sound:
            rate = sound.getframerate()
            return sound.getnframes() / rate if rate else None
    except (wave.Error, EOFError, ValueError):
        return None


def mp3_seconds(data: bytes) -> float | None:
    """How long an MP3 file lasts, from its first frame's header (None when it cannot tell)."""
    start = _after_id3(data)
    end = len(data) - (128 if data[-128:-125] == b"TAG" else 0)
    for at in range(start, min(end - 4, start + _SYNC_SEARCH)):
        if data[at] != 0xFF or data[at + 1] & 0xE0 != 0xE0:
            continue
        frame = _frame(int.from_bytes(data[at : at + 4], "big"))
        if frame is None:
            continue
        mpeg1, rate, bitrate, mono = frame
        per_frame = 1152 if mpeg1 else 576
        side = (17 if mono else 32) if mpeg1 else (9 if mono else 17)
        xing = at + 4 + side
        tagged = data[xing : xing + 4] in (b"Xing", b"Info") and len(data) >= xing + 12
        if tagged and data[xing + 7] & 1:  # its flags say a frame count follows
            return int.from_bytes(data[xing + 8 : xing + 12], "big") * per_frame / rate
        if data[at + 36 : at + 40] == b"VBRI":
            return int.from_bytes(data[at + 50 : at + 54], "big") * per_frame / rate
        return (end - at) * 8 / (bitrate * 1000)
    return None


def _after_id3(data: bytes) -> int:
    """Where the audio starts: after an ID3v2 tag (its size is "syncsafe", 7 bits a byte)."""
    if data[:3] != b"ID3" or len(data) < 10:
        return 0
    size = 0
    for byte in data[6:10]:
        size = (size << 7) | (byte & 0x7F)
    return 10 + size + (10 if data[5] & 0x10 else 0)


def _frame(header: int) -> tuple[bool, int, int, bool] | None:
    """(MPEG-1, sample rate, bit rate in kbit/s, mono) of a Layer III frame header; None if
    it is not one (or a free-format one, whose bit rate the header does not say)."""
    version = (header >> 19) & 3  # 0: MPEG-2.5, 2: MPEG-2, 3: MPEG-1
    layer = (header >> 17) & 3  # 1: Layer III
    bitrate_index = (header >> 12) & 0xF
    rate_index = (header >> 10) & 3
    if version == 1 or layer != 1 or bitrate_index in (0, 15) or rate_index == 3:
        return None
    mpeg1 = version == 3
    rate = _RATES[rate_index] // (1 if mpeg1 else 2 if version == 2 else 4)
    bitrate = _BITRATES[1 if mpeg1 else 2][bitrate_index]
    return mpeg1, rate, bitrate, (header >> 6) & 3 == 3
