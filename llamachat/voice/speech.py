"""Speech engines: text in, 16-bit mono PCM out, all on this machine.

`find_speaker(voice_model)` gives the engine to read with: a Piper voice model the
person points to (`voice_model`, an `.onnx` file with its `.onnx.json` beside it; the
`piper-tts` package of the voice extra runs it, on the CPU, with the espeak-ng it
bundles for phonemes), else the system's espeak-ng (or espeak) where it is installed.
Piper sounds natural and speaks a short sentence in about a tenth of a second; espeak-ng
is robotic but needs no model. An engine's `synthesize(text, speed)` yields PCM chunks
at its `sample_rate`; `speed` 1.0 is the voice's own pace, 2.0 twice as fast.

Errors: `SpeechUnavailable` (no engine: its message says what to install or point
to); `SpeechError` (an engine that failed on a sentence: a voice file that is not a
Piper model, espeak-ng that exited with an error). Both are the environment's fault
and carry a line for the person.
"""

from __future__ import annotations

import io
import logging
import shutil
import subprocess
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from llamachat.outside import file_gate
from llamachat.voice.availability import VoiceError, needs_extra

log = logging.getLogger(__name__)

# espeak-ng's words per minute at speed 1.0 (its own default).
_ESPEAK_WPM = 175
# A Piper voice's .onnx.json is a few KB of settings and phoneme ids.
VOICE_CONFIG_BYTES = 1024 * 1024


class SpeechUnavailable(VoiceError):
    """No speech engine here; the message says what to install or point to."""


class SpeechError(VoiceError):
    """A speech engine failed on a sentence; the message says how."""


class Speaker(Protocol):
    """A speech engine: text to 16-bit mono PCM."""

    name: str
    sample_rate: int

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[bytes]:
        """The speech for `text` as PCM chunks, in order."""
        ...


class PiperSpeaker:
    """A Piper voice model (an .onnx and its .onnx.json) run by piper-tts on the CPU."""

    def __init__(self, model: Path) -> None:
        try:
            from piper import PiperVoice
        except ImportError as exc:
            raise SpeechUnavailable(needs_extra("A Piper voice")) from exc
        if not model.exists():
            raise SpeechUnavailable(f"The voice model {model} does not exist (voice_model).")
        config = model.with_name(model.name + ".json")
        if not config.exists():
            raise SpeechUnavailable(
                f"The voice model {model.name} has no {config.name} beside it; "
                "a Piper voice comes as both files."
            )
        try:
            # Through the one gate before Piper opens them: a FIFO, a device or a link to
            # one is refused with its reason instead of blocking or reading for ever.
            file_gate.open_regular(model).close()
            file_gate.read_text(config, VOICE_CONFIG_BYTES)
        except file_gate.Refused as exc:
            raise SpeechUnavailable(f"Not a Piper voice (voice_model): {exc}.") from exc
        try:
            self._voice: Any = PiperVoice.load(model, config)
        except Exception as exc:  # onnxruntime and json raise many kinds for a bad file
            raise SpeechUnavailable(
                f"{model.name} could not be loaded as a Piper voice: {exc}"
            ) from exc
        self.name = f"Piper ({model.stem})"
        self.sample_rate = int(self._voice.config.sample_rate)

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[bytes]:
        """The speech for `text`, one chunk per sentence Piper finds in it."""
        from piper.config import SynthesisConfig

        config = SynthesisConfig(length_scale=1.0 / max(speed, 0.1))
        try:
            for chunk in self._voice.synthesize(text, config):
                yield chunk.audio_int16_bytes
        except Exception as exc:  # onnxruntime's errors have no common base
            raise SpeechError(f"The voice could not read a sentence: {exc}") from exc


class EspeakSpeaker:
    """The system's espeak-ng (or espeak) command: no model, a robotic voice."""

    def __init__(self, command: str) -> None:
        self._command = command
        self.name = Path(command).name
        self.sample_rate = 22050  # espeak-ng's output rate; checked on each WAV it writes

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[bytes]:
        """The speech for `text` as one chunk."""
        wpm = str(max(80, min(450, round(_ESPEAK_WPM * speed))))
        try:
            # "--" so a sentence starting with "-" is text, not an option.
            done = subprocess.run(
                [self._command, "--stdout", "-s", wpm, "--", text],
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SpeechError(f"{self.name} could not be run: {exc}") from exc
        if done.returncode != 0:
            raise SpeechError(f"{self.name} failed: {done.stderr.decode(errors='replace')[:200]}")
        with wave.open(io.BytesIO(done.stdout)) as wav:
            self.sample_rate = wav.getframerate()
            yield wav.readframes(wav.getnframes())


def resampled(pcm: bytes, rate: int, to: int) -> bytes:
    """16-bit mono `pcm` at `rate` Hz at `to` Hz instead (linear: enough for speech).

    Speech made at a voice's rate (22,050 Hz for most Piper voices) is heard by the
    speech engines at 16,000 Hz. Needs numpy (the voice extra brings it).
    """
    import numpy as np

    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    count = int(len(samples) * to / rate)
    where = np.linspace(0, len(samples) - 1, count)
    return np.interp(where, np.arange(len(samples)), samples).astype("<i2").tobytes()


def find_speaker(voice_model: Path | None) -> Speaker:
    """The engine to read with: the Piper voice `voice_model`, else espeak-ng."""
    if voice_model is not None:
        return PiperSpeaker(voice_model)
    for command in ("espeak-ng", "espeak"):
        found = shutil.which(command)
        if found:
            return EspeakSpeaker(found)
    raise SpeechUnavailable(
        "No voice to read with: set Read-aloud voice in Settings (voice_model) to a "
        "Piper voice (.onnx with its .onnx.json), or install espeak-ng."
    )
