"""Speech to text: the router's or the local engine, and the streaming `Dictation`.

Engines (each a `Transcriber`: 16 kHz mono PCM in, text out):

    RouterTranscriber   llama.cpp's `POST /v1/audio/transcriptions` (a multipart form:
                        `file`, `model`; answer `{"text": ..}`), for a model the router lists
                        with `audio` among its `architecture.input_modalities`
    LocalTranscriber    Whisper on the CPU through CTranslate2 (int8) with the packaged
                        tiny.en; its features are `log_mel`'s

`choose_transcriber` takes the router when a listed model hears audio, else the local engine.

`Dictation` is streaming recognition over any `AudioSource`: chunks arrive, and whenever
the engine is free and at least `STEP_S` of new sound came in, the open window (the sound
since the last pause) is transcribed again, so when the speaker stops only the last
fraction of a second is left to recognize. A pause of `PAUSE_S` after speech closes the
window: its text is kept and a new window starts (Whisper reads at most 30 s at a time,
and short windows keep each pass short). With `end_on_silence`, `END_SILENCE_S` of silence
after speech ends the dictation ("send when I stop talking"); otherwise it runs until the
source stops. Speech is told from silence by each 30 ms frame's loudness (`SPEECH_RMS`):
a window with no speech is never transcribed, so silence does not come back as Whisper's
"Thank you.".

Qt-free. The engines and `Dictation.run` block: call them on a worker thread.

Errors: `VoiceError` (the router's refusal with its message, the engine failing, the
source's own errors); `VoiceMissing` without the voice extra.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from llamachat.errors import BackendError
from llamachat.outside import file_gate
from llamachat.router.client import Client
from llamachat.router.models import ModelInfo
from llamachat.voice import log_mel
from llamachat.voice.audio_files import wav_bytes
from llamachat.voice.availability import VoiceError, local_model_dir
from llamachat.voice.capture import SAMPLE_BYTES, SAMPLE_RATE, AudioSource

log = logging.getLogger(__name__)

STEP_S = 0.2
"""New sound needed before the open window is transcribed again: small, so the pass that
follows the last word starts as soon as the one before it ends."""

FIRST_PASS_S = 1.0
"""Sound a window needs before its first partial pass (Whisper makes up words for less)."""

PAUSE_S = 0.4
"""Silence after speech that closes a window (its text kept, a new one started)."""

END_SILENCE_S = 0.8
"""Silence after speech that ends a dictation made to end when the speaker stops."""

MAX_WINDOW_S = 25.0
"""A window closed even without a pause: Whisper reads 30 s at most."""

SPEECH_RMS = 300.0
"""A 30 ms frame this loud (RMS of 16-bit samples, about -40 dBFS) holds speech."""

FRAME_BYTES = SAMPLE_RATE * SAMPLE_BYTES * 30 // 1000


class Transcriber(Protocol):
    """An engine: 16 kHz mono 16-bit PCM in, the words heard out."""

    @property
    def description(self) -> str:
        """Who transcribes, for a tooltip ("the router's model X", "Whisper tiny.en on this computer")."""
        ...

    def transcribe(self, pcm: bytes) -> str:
        """The text spoken in `pcm` (blocks)."""
        ...


class RouterTranscriber:
    """llama.cpp's `POST /v1/audio/transcriptions` with a model that hears audio."""

    def __init__(self, client: Client, model: str, *, timeout: float = 120.0) -> None:
        self._client = client
        self.model = model
        self._timeout = timeout

    @property
    def description(self) -> str:
        """The router's model that transcribes."""
        return f"the router's model {self.model}"

    def transcribe(self, pcm: bytes) -> str:
        """Send `pcm` as a WAV file; the server's refusal becomes a VoiceError with its message."""
        try:
            answer = self._client.request_json(
                "POST",
                "/audio/transcriptions",
                timeout=self._timeout,
                files={"file": ("speech.wav", wav_bytes(pcm), "audio/wav")},
                data={"model": self.model, "response_format": "json"},
            )
        except BackendError as exc:
            raise VoiceError(f"The router could not transcribe with {self.model}: {exc}") from None
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise VoiceError(f"The router answered a transcription of {self.model} without text")
        return text.strip()


def _byte_of_character() -> dict[str, int]:
    # GPT-2's byte-level BPE writes each byte as a printable character: the printable
    # Latin-1 bytes as themselves, the others as the characters from U+0100 on, in order.
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    pairs = [(chr(b), b) for b in printable]
    pairs += [(chr(0x100 + n), b) for n, b in enumerate(others)]
    return dict(pairs)


_BYTE_OF = _byte_of_character()


class Vocabulary:
    """Whisper's tokens (a CTranslate2 model's vocabulary.txt, one a line): ids and text."""

    def __init__(self, listing: str) -> None:
        self._tokens = listing.split("\n")
        self._ids = {token: i for i, token in enumerate(self._tokens)}
        self._end = self._ids["<|endoftext|>"]

    def id(self, token: str) -> int:
        """The id of a special token such as "<|notimestamps|>"."""
        return self._ids[token]

    def text(self, ids: Sequence[int]) -> str:
        """The words the ids spell (Whisper's special tokens, from <|endoftext|> on, left out)."""
        pieces = (self._tokens[i] for i in ids if i < self._end)
        spelled = bytes(_BYTE_OF.get(c, 0x3F) for piece in pieces for c in piece)
        return spelled.decode("utf-8", "replace")


_models: dict[Path, tuple[Any, Vocabulary]] = {}
_models_lock = threading.Lock()


class LocalTranscriber:
    """Whisper on the CPU through CTranslate2 (int8): the packaged tiny.en or $LLAMACHAT_SPEECH_MODEL.

    Greedy decoding (beam 1) of each 30 s piece, without timestamps: the fastest pass, re-run
    as the sound grows. An English-only model is prompted for English; a multilingual one
    detects the language of each piece first.
    """

    def __init__(self, model_dir: Path | None = None, *, threads: int | None = None) -> None:
        self._model_dir = model_dir
        # CTranslate2's default of 4 threads oversubscribes a 2-core machine.
        self._threads = threads or min(4, os.cpu_count() or 1)

    @property
    def description(self) -> str:
        """The local engine and its model."""
        return "Whisper tiny.en on this computer (CTranslate2)"

    def load(self) -> tuple[Any, Vocabulary]:
        """The model and its vocabulary, loaded once per process (under a second) and shared."""
        folder = self._model_dir or local_model_dir()
        with _models_lock:
            loaded = _models.get(folder)
            if loaded is None:
                import ctranslate2

                try:
                    vocabulary = Vocabulary(
                        file_gate.read_text(folder / "vocabulary.txt", 16 * 1024 * 1024)
                    )
                    model = ctranslate2.models.Whisper(
                        str(folder), device="cpu", compute_type="int8", intra_threads=self._threads
                    )
                except (file_gate.Refused, RuntimeError, ValueError) as exc:
                    raise VoiceError(
                        f"The speech model in {folder} could not be loaded: {exc}"
                    ) from None
                loaded = _models[folder] = (model, vocabulary)
        return loaded

    def transcribe(self, pcm: bytes) -> str:
        """The words in `pcm`, 30 s at a time."""
        import numpy

        audio = numpy.frombuffer(pcm, dtype="<i2").astype(numpy.float32) / 32768.0
        texts = [
            self._piece(audio[start : start + log_mel.SAMPLES])
            for start in range(0, max(1, len(audio)), log_mel.SAMPLES)
        ]
        return " ".join(text for text in texts if text)

    def _piece(self, audio: Any) -> str:
        import ctranslate2

        model, vocabulary = self.load()
        features = ctranslate2.StorageView.from_array(
            log_mel.log_mel(audio, model.n_mels)[None, :, :]
        )
        token = vocabulary.id
        prompt = [token("<|startoftranscript|>")]
        try:
            if model.is_multilingual:
                language = model.detect_language(features)[0][0][0]
                prompt += [token(language), token("<|transcribe|>")]
            prompt.append(token("<|notimestamps|>"))
            result = model.generate(
                features,
                [prompt],
                beam_size=1,
                suppress_blank=True,
                suppress_tokens=[-1],  # the model's own list (config.json)
                max_length=448,
            )[0]
        except (RuntimeError, ValueError) as exc:
            log.warning("local transcription failed", exc_info=True)
            raise VoiceError(f"The local speech engine failed: {exc}") from None
        return vocabulary.text(result.sequences_ids[0]).strip()


def audio_model(models: Sequence[ModelInfo]) -> ModelInfo | None:
    """The first listed model that hears audio (the loaded one first), or None."""
    hearing = [model for model in models if "audio" in model.modalities]
    hearing.sort(key=lambda model: model.status != "loaded")
    return hearing[0] if hearing else None


def choose_transcriber(client: Client | None, models: Sequence[ModelInfo]) -> Transcriber:
    """The router when it lists a model that hears audio, else the local engine."""
    model = audio_model(models)
    if client is not None and model is not None:
        return RouterTranscriber(client, model.id)
    return LocalTranscriber()


def transcribe_file(pcm: bytes, transcriber: Transcriber) -> str:
    """A whole decoded file's text, in windows the engine can read."""
    window = int(MAX_WINDOW_S * SAMPLE_RATE) * SAMPLE_BYTES
    parts = []
    for offset in range(0, len(pcm), window):
        piece = pcm[offset : offset + window]
        if _has_speech(piece):
            parts.append(transcriber.transcribe(piece))
    return " ".join(part for part in parts if part)


def _rms(frame: bytes) -> float:
    samples = array("h")
    samples.frombytes(frame[: len(frame) - len(frame) % 2])
    if sys.byteorder == "big":
        samples.byteswap()
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples))


def _has_speech(pcm: bytes) -> bool:
    return any(
        _rms(pcm[i : i + FRAME_BYTES]) >= SPEECH_RMS for i in range(0, len(pcm), FRAME_BYTES)
    )


@dataclass(frozen=True)
class Heard:
    """What the dictation has heard so far: the whole text, and whether it is the last."""

    text: str
    final: bool = False
    heard_s: float = 0.0
    """Seconds of sound (from the start) the text was recognized from."""
    spoken_s: float | None = None
    """Where in the sound the last speech heard so far ended (seconds); None: none yet."""


class Dictation:
    """Streaming recognition: a source's chunks in, growing text out through `on_heard`."""

    def __init__(
        self,
        transcriber: Transcriber,
        on_heard: Callable[[Heard], None],
        *,
        end_on_silence: bool = False,
    ) -> None:
        self._transcriber = transcriber
        self._on_heard = on_heard
        self._end_on_silence = end_on_silence
        self._source: AudioSource | None = None
        self._stopped = threading.Event()
        self._kept: list[str] = []
        self._window = bytearray()
        self._window_text = ""
        self._transcribed_bytes = 0
        self._speech_in_window = False
        self._speech_since_pass = False
        self._silent_s = 0.0
        self._spoke = False
        self._pending = b""
        self.heard_s = 0.0
        """Seconds of sound taken so far."""
        self.last_speech_s: float | None = None
        """Where in the sound the last frame of speech ended (seconds), for the bench."""

    def run(self, source: AudioSource) -> str:
        """Listen to `source` until it ends, `stop()`, or (with end_on_silence) a pause; the text."""
        self._source = source
        if self._stopped.is_set():
            source.stop()
        try:
            self._listen(source)
        finally:
            # The microphone is released whatever ended the dictation (an engine's error too).
            source.stop()
        self._close_window()
        text = self.text()
        self._on_heard(Heard(text, final=True, heard_s=self.heard_s, spoken_s=self.last_speech_s))
        return text

    def _listen(self, source: AudioSource) -> None:
        step = int(STEP_S * SAMPLE_RATE) * SAMPLE_BYTES
        first = int(FIRST_PASS_S * SAMPLE_RATE) * SAMPLE_BYTES
        longest = int(MAX_WINDOW_S * SAMPLE_RATE) * SAMPLE_BYTES
        while True:
            sound = source.read(0.1)
            if sound is None:
                return
            self._take(sound)
            if self._end_on_silence and self._spoke and self._silent_s >= END_SILENCE_S:
                return
            paused = self._speech_in_window and self._silent_s >= PAUSE_S
            if paused or len(self._window) >= longest:
                self._close_window()
            elif (
                self._speech_in_window
                and len(self._window) >= first
                and len(self._window) - self._transcribed_bytes >= step
            ):
                self._pass()

    def stop(self) -> None:
        """End the dictation: what is left is transcribed and the final text reported."""
        self._stopped.set()
        if self._source is not None:
            self._source.stop()

    def text(self) -> str:
        """The text heard so far: the closed windows' and the open one's."""
        return " ".join(part for part in (*self._kept, self._window_text) if part)

    def _take(self, chunk: bytes) -> None:
        data = self._pending + chunk
        whole = len(data) - len(data) % FRAME_BYTES
        self._pending = data[whole:]
        for i in range(0, whole, FRAME_BYTES):
            frame = data[i : i + FRAME_BYTES]
            if _rms(frame) >= SPEECH_RMS:
                self._speech_in_window = self._spoke = self._speech_since_pass = True
                self._silent_s = 0.0
                self.last_speech_s = self.heard_s + (i + FRAME_BYTES) / (SAMPLE_RATE * SAMPLE_BYTES)
            else:
                self._silent_s += FRAME_BYTES / (SAMPLE_RATE * SAMPLE_BYTES)
        self._window.extend(data[:whole])
        self.heard_s += whole / (SAMPLE_RATE * SAMPLE_BYTES)

    def _pass(self) -> None:
        self._transcribed_bytes = len(self._window)
        self._speech_since_pass = False
        self._window_text = self._transcriber.transcribe(bytes(self._window))
        self._on_heard(Heard(self.text(), heard_s=self.heard_s, spoken_s=self.last_speech_s))

    def _close_window(self) -> None:
        # Only silence since the last pass: its text stands (a pass over the same words
        # and more silence may spell them differently, and costs a pass).
        if self._speech_since_pass:
            self._pass()
        if self._window_text:
            self._kept.append(self._window_text)
        self._window = bytearray()
        self._window_text = ""
        self._transcribed_bytes = 0
        self._speech_in_window = False
