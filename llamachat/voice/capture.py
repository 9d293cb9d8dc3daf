"""Sound as a stream of 16 kHz mono PCM chunks: from the microphone, or a file played in.

Every source hands out ``bytes`` of signed 16-bit little-endian samples at `SAMPLE_RATE`,
one channel: `read()` returns all the sound that arrived since the last call (waiting a
little for some), so a reader busy recognizing never falls behind by a backlog of chunks. `Microphone`
captures with miniaudio (no system library, no sound server needed to import it);
`Playback` feeds a decoded file through the same pipeline at real-time rate (or faster),
which is how the tests and the bench speak to the dictation with no microphone.

Threads: `read()` blocks (briefly); it runs on a worker thread, never the GUI thread.
`stop()` may be called from any thread.

Errors: `VoiceError` with a sentence for each failure (no microphone, access denied, the
device gone quiet or unplugged); `VoiceMissing` when miniaudio is not installed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Protocol

from llamachat.voice.availability import VoiceError, require_capture

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
"""Samples per second of every chunk (what Whisper and llama.cpp's audio models take)."""

SAMPLE_BYTES = 2
"""Bytes per sample: signed 16-bit little-endian, one channel."""

CHUNK_MS = 100
"""About how much sound one chunk holds."""

SILENT_DEVICE_S = 3.0
"""A capture that delivers nothing for this long has lost its device (unplugged)."""

# ALSA's "null" PCM is listed as a capture device and records zeros forever: it is no
# microphone, and a machine with only that one has none.
_NOT_A_MICROPHONE = ("generate zero samples", "Discard all samples")

# miniaudio's result codes worth a sentence of their own (miniaudio.h, ma_result).
_ACCESS_DENIED = -6
_NO_DEVICE = (-7, -204, -401)


class AudioSource(Protocol):
    """Something that hands out 16 kHz mono PCM as it arrives, until stopped or done."""

    def read(self, timeout: float = 0.1) -> bytes | None:
        """All the sound that arrived since the last read (b"" when none came within
        `timeout`); None once the source has ended or was stopped."""
        ...

    def stop(self) -> None:
        """End the source: the next `read()` returns None (callable from any thread)."""
        ...


def seconds(pcm: bytes) -> float:
    """How long `pcm` (16 kHz mono 16-bit) lasts."""
    return len(pcm) / (SAMPLE_RATE * SAMPLE_BYTES)


def _backends() -> list[Any]:
    import miniaudio

    # Never NULL: it "captures" silence, and a dictation of silence is no answer to a
    # machine without a microphone.
    names = ("WASAPI", "DSOUND", "COREAUDIO", "PULSEAUDIO", "ALSA", "JACK", "SNDIO", "OSS")
    return [miniaudio.Backend[name] for name in names if name in miniaudio.Backend.__members__]


def microphones() -> list[str]:
    """The names of the capture devices present (ALSA's null device left out)."""
    require_capture()
    import miniaudio

    try:
        devices = miniaudio.Devices(backends=_backends())
        captures = devices.get_captures()
    except miniaudio.MiniaudioError as exc:
        log.info("no audio backend: %s", exc)
        return []
    names = [str(device.get("name", "")) for device in captures]
    return [name for name in names if not any(part in name for part in _NOT_A_MICROPHONE)]


class Microphone:
    """The default microphone as 16 kHz mono chunks, through miniaudio."""

    def __init__(self) -> None:
        self._chunks: queue.Queue[bytes] = queue.Queue()
        self._stopped = threading.Event()
        self._device: Any = None
        self._last = 0.0
        # stop() may come from another thread than read()'s: the device is closed once.
        self._lock = threading.Lock()

    def open(self) -> None:
        """Start capturing; raise VoiceError saying why when it cannot."""
        require_capture()
        import miniaudio

        if not microphones():
            raise VoiceError(
                "No microphone found: connect one, or check the system's sound settings"
            )
        try:
            device = miniaudio.CaptureDevice(
                input_format=miniaudio.SampleFormat.SIGNED16,
                nchannels=1,
                sample_rate=SAMPLE_RATE,
                buffersize_msec=CHUNK_MS,
                backends=_backends(),
                app_name="llamachat",
            )
            receiver = self._receiver()
            next(receiver)
            device.start(receiver)
        except miniaudio.MiniaudioError as exc:
            raise VoiceError(_sentence(exc)) from None
        self._device = device

    def _receiver(self) -> Any:
        # miniaudio's audio thread sends each buffer into this generator: keep it short.
        while True:
            data = yield
            if data:
                self._chunks.put(bytes(data))

    def read(self, timeout: float = 0.1) -> bytes | None:
        """The sound captured since the last read; VoiceError when the device falls silent."""
        if self._stopped.is_set():
            self._close()
            return None
        if self._device is None:
            self.open()
            self._last = time.monotonic()
            if self._stopped.is_set():  # stopped while it opened
                self._close()
                return None
        parts = []
        try:
            parts.append(self._chunks.get(timeout=timeout))
        except queue.Empty:
            if time.monotonic() - self._last > SILENT_DEVICE_S:
                self._close()
                raise VoiceError(
                    "The microphone stopped sending sound: was it unplugged?"
                ) from None
            return b""
        while True:
            try:
                parts.append(self._chunks.get_nowait())
            except queue.Empty:
                break
        self._last = time.monotonic()
        return b"".join(parts)

    def stop(self) -> None:
        """End the capture and release the device (miniaudio's uninit waits for its callback)."""
        self._stopped.set()
        self._close()

    def _close(self) -> None:
        with self._lock:
            device, self._device = self._device, None
        if device is not None:
            try:
                device.close()
            except Exception:  # a device gone mid-close is already closed
                log.debug("closing the capture device failed", exc_info=True)


def _sentence(exc: Exception) -> str:
    code = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], int) else None
    if code == _ACCESS_DENIED:
        return (
            "The microphone is not allowed: grant llamachat access in the system's privacy settings"
        )
    if code in _NO_DEVICE:
        return "No microphone could be opened: connect one, or check the system's sound settings"
    return f"The microphone could not be opened ({exc.args[0] if exc.args else exc})"


class Playback:
    """Decoded sound played into the pipeline as a microphone would hear it, in `CHUNK_MS` steps.

    `speed` 1.0 is real time (a chunk is handed out once its last sample has been "spoken");
    0 hands out the whole sound at the first read.
    """

    def __init__(self, pcm: bytes, *, speed: float = 1.0) -> None:
        self._pcm = pcm
        self._speed = speed
        self._stopped = threading.Event()
        self._offset = 0
        self.started_at: float | None = None
        """When the first read started the clock (time.monotonic)."""

    def spoken_at(self, offset_s: float) -> float:
        """When the sound `offset_s` into the file was heard (time.monotonic), once started."""
        start = self.started_at if self.started_at is not None else time.monotonic()
        return start + offset_s / self._speed if self._speed > 0 else start

    def read(self, timeout: float = 0.1) -> bytes | None:
        """The chunks whose time has come since the last read; None at the end."""
        if self.started_at is None:
            self.started_at = time.monotonic()
        if self._stopped.is_set() or self._offset >= len(self._pcm):
            return None
        if self._speed <= 0:
            self._offset = len(self._pcm)
            return self._pcm
        chunk = SAMPLE_RATE * SAMPLE_BYTES * CHUNK_MS // 1000
        per_second = SAMPLE_RATE * SAMPLE_BYTES * self._speed
        next_end = min(self._offset + chunk, len(self._pcm))
        wait = self.started_at + next_end / per_second - time.monotonic()
        if wait > timeout:
            self._stopped.wait(timeout)
            return b""
        if wait > 0 and self._stopped.wait(wait):
            return None
        # Paced from the start, not chunk by chunk: a slow reader gets all that is due.
        heard = int((time.monotonic() - self.started_at) * per_second)
        end = min(len(self._pcm), max(next_end, heard - heard % chunk))
        data = self._pcm[self._offset : end]
        self._offset = end
        return data

    def stop(self) -> None:
        """End the playback: the next read returns None."""
        self._stopped.set()
