"""Where speech goes: the sound device, or a WAV file, through one `Player` interface.

`DevicePlayer` plays through the default output device with miniaudio (the voice
extra), from a buffer its own audio thread drains: `write` returns at once, so the
next sentence is synthesized while this one plays. `WavPlayer` writes the same PCM to
a WAV file (the tests' and the bench's sink). A player plays one format at a time; a
`write` at another rate reopens it at that rate.

`first_write` is the monotonic time the first PCM reached the player: the bench's
"first word spoken" mark.

Errors: `PlaybackError` (no output device, the device lost, the extra missing):
its message is a line for the person, and the reading stops.
"""

from __future__ import annotations

import threading
import time
import wave
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, Protocol

from llamachat.voice.availability import VoiceError, needs_extra


class PlaybackError(VoiceError):
    """Speech could not be played; the message says why, for the person."""


class Player(Protocol):
    """A sink for 16-bit mono PCM."""

    first_write: float | None

    def write(self, pcm: bytes, sample_rate: int) -> None:
        """Queue `pcm` to be heard after what was written before."""
        ...

    def drain(self, stop: threading.Event) -> None:
        """Wait until everything written was heard (or `stop` is set)."""
        ...

    def stop(self) -> None:
        """Drop what is still queued and stop at once."""
        ...


class WavPlayer:
    """Writes the PCM to a WAV file, as a device would play it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first_write: float | None = None
        self._wav: wave.Wave_write | None = None
        self._rate = 0
        self.frames = 0

    def write(self, pcm: bytes, sample_rate: int) -> None:
        """Append `pcm` to the file (opened at the first write's rate)."""
        if self.first_write is None:
            self.first_write = time.monotonic()
        if self._wav is None:
            # Open across writes, as a device is: closed by drain or stop.
            self._wav = wave.open(str(self.path), "wb")  # noqa: SIM115
            self._wav.setnchannels(1)
            self._wav.setsampwidth(2)
            self._wav.setframerate(sample_rate)
            self._rate = sample_rate
        elif sample_rate != self._rate:
            raise PlaybackError(f"{self.path.name} is at {self._rate} Hz, not {sample_rate} Hz.")
        self._wav.writeframes(pcm)
        self.frames += len(pcm) // 2

    def drain(self, stop: threading.Event) -> None:
        """Close the file: everything written is in it."""
        self.stop()

    def stop(self) -> None:
        """Close the file."""
        if self._wav is not None:
            self._wav.close()
            self._wav = None


# The sound systems tried, in miniaudio's order; never NULL, which "plays" into nothing
# and would hide a machine with no sound output.
SOUND_SYSTEMS = (
    "WASAPI", "DSOUND", "WINMM", "COREAUDIO", "PULSEAUDIO", "ALSA", "JACK", "SNDIO", "OSS"
)  # fmt: skip


class DevicePlayer:
    """The default sound output device, through miniaudio."""

    def __init__(self, *, systems: Sequence[str] = SOUND_SYSTEMS) -> None:
        try:
            import miniaudio
        except ImportError as exc:
            raise PlaybackError(needs_extra("Playing speech")) from exc
        self._miniaudio: Any = miniaudio
        known = miniaudio.Backend.__members__
        self._backends = [miniaudio.Backend[name] for name in systems if name in known]
        self.first_write: float | None = None
        self._device: Any = None
        self._rate = 0
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._played_all = threading.Event()
        self._played_all.set()

    def write(self, pcm: bytes, sample_rate: int) -> None:
        """Queue `pcm`; the device's thread plays it."""
        if self.first_write is None:
            self.first_write = time.monotonic()
        if self._device is None or sample_rate != self._rate:
            self.stop()
            self._open(sample_rate)
        with self._lock:
            self._buffer += pcm
            self._played_all.clear()

    def drain(self, stop: threading.Event) -> None:
        """Wait until the buffer is played out, or `stop` is set."""
        while not stop.is_set() and not self._played_all.wait(0.05):
            pass
        # The device's own buffer still holds the last few milliseconds.
        if not stop.is_set():
            stop.wait(0.1)
        self.stop()

    def stop(self) -> None:
        """Close the device, dropping what it had not played."""
        with self._lock:
            self._buffer.clear()
            self._played_all.set()
        if self._device is not None:
            device, self._device = self._device, None
            device.close()

    def _open(self, sample_rate: int) -> None:
        miniaudio = self._miniaudio
        try:
            device = miniaudio.PlaybackDevice(
                output_format=miniaudio.SampleFormat.SIGNED16,
                nchannels=1,
                sample_rate=sample_rate,
                buffersize_msec=100,
                backends=self._backends,
                app_name="llamachat",
            )
            stream = self._stream()
            next(stream)  # a miniaudio stream starts primed
            device.start(stream)
        except miniaudio.MiniaudioError as exc:
            raise PlaybackError(
                f"No sound output: the sound device could not be opened ({exc.args[0]}); "
                "check the system's sound settings."
            ) from exc
        self._device = device
        self._rate = sample_rate

    def _stream(self) -> Generator[bytes, int, None]:
        # miniaudio's thread sends the frames it wants and plays what comes back;
        # silence when the buffer is empty keeps the device open between sentences.
        frames = yield b""
        while True:
            want = frames * 2
            with self._lock:
                chunk = bytes(self._buffer[:want])
                del self._buffer[:want]
                if not self._buffer:
                    self._played_all.set()
            frames = yield chunk + b"\0" * (want - len(chunk))
