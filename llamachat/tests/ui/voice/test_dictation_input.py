"""The tests of `llamachat.ui.voice.dictation_input`: dictation in the real windows, with real speech."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import Qt

from llamachat.dev.scripted_router import Model
from llamachat.tests.voice.conftest import SPEECH, silence
from llamachat.voice.audio_files import decode, read_sound
from llamachat.voice.capture import Playback, microphones, seconds

HEARING = Model("voxtral-mini", "loaded", modalities=("text", "audio"))


def words_per_second(data: bytes) -> str:
    """A stand-in audio model: one word per second of the uploaded sound."""
    return " ".join(["word"] * round(seconds(decode(data))))


@pytest.fixture
def hearing_window(chat_window, router):
    """A chat window on a router that lists a model that hears audio."""
    router.models[HEARING.id] = HEARING
    router.hear = words_per_second
    window, _history = chat_window()
    return window


def status(window) -> str:
    return window.statusBar().currentMessage()


def chat_requests(router) -> list:
    return [r for r in router.requests if r.path == "/v1/chat/completions"]


def test_the_dictate_button_sits_beside_attach_and_says_who_transcribes(hearing_window) -> None:
    voice = hearing_window.voice

    assert voice.button.text() == "Dictate"
    assert voice.button.isVisibleTo(hearing_window)
    voice._describe()
    assert "the router's model voxtral-mini" in voice.button.toolTip()
    file_menu = hearing_window.menuBar().actions()[0].menu()
    assert "Transcribe audio file…" in [a.text() for a in file_menu.actions()]


def test_speech_appears_in_the_box_as_it_is_heard_after_what_was_typed_and_is_not_sent(
    qtbot, decoding, hearing_window, router
) -> None:
    voice = hearing_window.voice
    composer = hearing_window.composer
    composer.set_text("Note:")
    pcm = read_sound(SPEECH / "ten_seconds.ogg")
    voice.source_for = lambda: Playback(pcm, speed=4.0)
    shown: list[str] = []
    composer.editor.textChanged.connect(lambda: shown.append(composer.text()))

    qtbot.mouseClick(voice.button, Qt.MouseButton.LeftButton)
    assert voice.button.text() == "Stop dictating"
    qtbot.waitUntil(lambda: not voice.listening(), timeout=30_000)

    assert composer.text().startswith("Note: word word")
    assert composer.text().count("word") == pytest.approx(10, abs=2)
    growing = [t.count("word") for t in shown if t.startswith("Note: word")]
    assert len(set(growing)) > 1, "the text grew while the speech was heard"
    assert not chat_requests(router)
    assert voice.button.text() == "Dictate"


def test_with_send_when_i_stop_talking_the_pause_sends_the_message(
    qtbot, decoding, chat_window, router
) -> None:
    router.models[HEARING.id] = HEARING
    router.hear = words_per_second
    window, _history = chat_window(dictation_sends=True)
    pcm = read_sound(SPEECH / "dictation.wav") + silence(2.0)
    window.voice.source_for = lambda: Playback(pcm, speed=2.0)

    qtbot.mouseClick(window.voice.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(chat_requests(router)), timeout=30_000)

    sent = chat_requests(router)[-1].json["messages"][-1]["content"]
    assert "word word" in str(sent)
    qtbot.waitUntil(lambda: window.composer.text() == "", timeout=5000)


def test_holding_f9_dictates_and_releasing_it_stops(qtbot, decoding, hearing_window) -> None:
    voice = hearing_window.voice
    pcm = read_sound(SPEECH / "ten_seconds.ogg")
    voice.source_for = lambda: Playback(pcm, speed=1.0)
    editor = hearing_window.composer.editor

    qtbot.keyPress(editor, Qt.Key.Key_F9)
    assert voice.listening()
    qtbot.waitUntil(lambda: "word" in editor.toPlainText(), timeout=30_000)
    qtbot.keyRelease(editor, Qt.Key.Key_F9)
    qtbot.waitUntil(lambda: not voice.listening(), timeout=30_000)

    assert editor.toPlainText().count("word") < 9


def test_without_a_microphone_the_button_says_so_in_one_line(
    qtbot, decoding, hearing_window
) -> None:
    if microphones():
        pytest.skip(f"this machine has a microphone ({microphones()[0]})")
    voice = hearing_window.voice

    qtbot.mouseClick(voice.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not voice.listening(), timeout=10_000)

    assert status(hearing_window).startswith("No microphone found")
    assert voice.button.text() == "Dictate" and not voice.button.isChecked()


def test_without_the_voice_extra_the_button_gives_the_command(
    qtbot, hearing_window, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "miniaudio", None)
    voice = hearing_window.voice

    qtbot.mouseClick(voice.button, Qt.MouseButton.LeftButton)

    assert not voice.listening()
    assert status(hearing_window) == "Voice needs the voice extra: pip install 'llamachat[voice]'"
    voice._describe()
    assert "pip install 'llamachat[voice]'" in voice.button.toolTip()


def test_a_sound_file_is_transcribed_by_the_router_into_the_box(
    qtbot, decoding, hearing_window
) -> None:
    voice = hearing_window.voice

    with qtbot.waitSignal(voice.transcribed, timeout=30_000):
        voice.transcribe(SPEECH / "ten_seconds.ogg")

    assert hearing_window.composer.text().count("word") == 10
    assert status(hearing_window) == "Transcribed ten_seconds.ogg (10 s)"


def test_a_sound_file_is_transcribed_by_the_local_engine_without_an_audio_model(
    qtbot, local_engine, chat_window
) -> None:
    window, _history = chat_window()
    voice = window.voice
    assert "on this computer" in voice.transcriber().description

    with qtbot.waitSignal(voice.transcribed, timeout=60_000):
        voice.transcribe(SPEECH / "dictation.wav")

    assert "meeting notes from Tuesday" in window.composer.text()


def test_a_file_that_is_no_sound_is_one_line(qtbot, decoding, hearing_window, tmp_path) -> None:
    bad = tmp_path / "notes.wav"
    bad.write_text("hello\n" * 100)
    voice = hearing_window.voice

    future = voice.transcribe(bad)
    qtbot.waitUntil(lambda: future.done() and "notes.wav" in status(hearing_window), timeout=10_000)

    assert status(hearing_window).endswith(
        "notes.wav is not a sound llamachat can read (WAV, MP3, Ogg Vorbis or FLAC)"
    )


def test_the_quick_window_has_the_dictate_button(quick) -> None:
    window, _history = quick()

    assert window.voice.button.text() == "Dictate"
    assert window.voice.button.isVisibleTo(window)


def test_hiding_the_window_stops_the_dictation(qtbot, decoding, hearing_window) -> None:
    voice = hearing_window.voice
    voice.source_for = lambda: Playback(read_sound(SPEECH / "ten_seconds.ogg"), speed=1.0)
    voice.start()

    hearing_window.hide()
    qtbot.waitUntil(lambda: not voice.listening(), timeout=10_000)

    assert voice.button.text() == "Dictate"


def test_releasing_f9_sends_when_send_when_i_stop_talking_is_on(
    qtbot, decoding, chat_window, router
) -> None:
    router.models[HEARING.id] = HEARING
    router.hear = words_per_second
    window, _history = chat_window(dictation_sends=True)
    voice = window.voice
    voice.source_for = lambda: Playback(read_sound(SPEECH / "ten_seconds.ogg"), speed=1.0)
    editor = window.composer.editor

    qtbot.keyPress(editor, Qt.Key.Key_F9)
    qtbot.waitUntil(lambda: "word" in editor.toPlainText(), timeout=30_000)
    assert voice.listening(), "a held F9 does not end at a pause"
    qtbot.keyRelease(editor, Qt.Key.Key_F9)
    qtbot.waitUntil(lambda: bool(chat_requests(router)), timeout=30_000)

    assert "word" in str(chat_requests(router)[-1].json["messages"][-1]["content"])


def test_the_quick_window_dictates_while_f9_is_held(qtbot, decoding, quick, router) -> None:
    router.models[HEARING.id] = HEARING
    router.hear = words_per_second
    window, _history = quick()
    window.present()
    qtbot.waitUntil(lambda: bool(window.voice.missing() is None and window._models), timeout=5000)
    window.voice.source_for = lambda: Playback(read_sound(SPEECH / "short.mp3"), speed=2.0)
    editor = window.composer.editor

    qtbot.keyPress(editor, Qt.Key.Key_F9)
    qtbot.waitUntil(lambda: not window.voice.listening(), timeout=30_000)
    qtbot.keyRelease(editor, Qt.Key.Key_F9)

    assert editor.toPlainText() == "word word"
    assert "the router's model voxtral-mini" in window.voice.transcriber().description
