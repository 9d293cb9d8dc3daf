"""Sound files (.wav, .mp3, .ogg, .flac) decoded to 16 kHz mono PCM, read through the file gate.

miniaudio decodes all four with no system library. A file is read whole through
`file_gate.read_bytes` (regular files only, at most `MAX_FILE_BYTES`), then decoded and
resampled in memory.

Qt-free.

Errors: `VoiceError` naming the file (not read by the gate, or not a sound miniaudio
decodes); `VoiceMissing` without the voice extra.
"""

from __future__ import annotations

import io
import wave

from llamachat.outside import file_gate
from llamachat.voice.availability import VoiceError, require_capture
from llamachat.voice.capture import SAMPLE_BYTES, SAMPLE_RATE

MAX_FILE_BYTES = 200 * 1024 * 1024
"""The largest sound file read: hours of compressed speech, minutes of WAV."""

SOUND_SUFFIXES = (".wav", ".mp3", ".ogg", ".flac")
"""What "Transcribe audio file…" offers."""


def decode(data: bytes, name: str = "the sound") -> bytes:
    """`data` (a whole .wav/.mp3/.ogg/.flac file) as 16 kHz mono 16-bit PCM."""
    require_capture()
    import miniaudio

    try:
        decoded = miniaudio.decode(
            data,
            output_format=miniaudio.SampleFormat.SIGNED16,
            nchannels=1,
            sample_rate=SAMPLE_RATE,
        )
    except miniaudio.DecodeError:
        raise VoiceError(
            f"{name} is not a sound llamachat can read (WAV, MP3, Ogg Vorbis or FLAC)"
        ) from None
    return bytes(decoded.samples.tobytes())


def read_sound(path: file_gate.StrPath) -> bytes:
    """The sound file at `path` as 16 kHz mono 16-bit PCM."""
    try:
        data, _more = file_gate.read_bytes(path, MAX_FILE_BYTES)
    except file_gate.Refused as exc:
        raise VoiceError(str(exc)) from None
    return decode(data, file_gate.shown(path))


def wav_bytes(pcm: bytes) -> bytes:
    """`pcm` (16 kHz mono 16-bit) as a WAV file's bytes, for a server that takes a file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(SAMPLE_BYTES)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm)
    return buffer.getvalue()
