"""The tests of `llamachat.voice.availability`."""

from __future__ import annotations

import pytest

from llamachat.voice import INSTALL_COMMAND, VoiceError, VoiceMissing
from llamachat.voice.availability import MODEL_DIR_ENV, local_model_dir


def test_the_missing_extra_says_the_one_command_that_adds_it() -> None:
    error = VoiceMissing(("miniaudio",))

    assert str(error) == "Voice needs the voice extra: pip install 'llamachat[voice]'"
    assert INSTALL_COMMAND in str(error)


def test_in_the_one_folder_build_the_missing_extra_says_voice_is_a_pip_installs(
    monkeypatch,
) -> None:
    """pip cannot add to the one-folder build (PyInstaller sets sys.frozen): the line says
    voice comes with a pip install instead of a command that would not help."""
    import sys

    monkeypatch.setattr(sys, "frozen", True, raising=False)

    assert str(VoiceMissing(("miniaudio",))) == (
        "Voice is not in the one-folder build: install llamachat with pip, then "
        "pip install 'llamachat[voice]'"
    )


def test_a_named_model_folder_without_a_model_is_refused_naming_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))

    with pytest.raises(VoiceError, match="holds no model.bin and vocabulary.txt"):
        local_model_dir()
