"""Replies read aloud from their ⋯ menu (llamachat/ui/voice/read_aloud.py), with a real voice."""

from __future__ import annotations

import wave
from pathlib import Path

import pytest

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import piper_test_voice
from llamachat.ui.views.more_actions import READ_ALOUD, READING_SPEED, STOP_READING
from llamachat.voice.playback import WavPlayer

ANSWER = "Paris is the capital of France. It lies on the Seine.\n```\nprint(1)\n```\nThat is all."


def replied(window, router, qtbot, content=ANSWER):
    router.script(Reply(content=content))
    window.composer.set_text("Where is Paris?")
    window.send()
    reply = window.messages.last_assistant()
    qtbot.waitUntil(lambda: not window.chat.is_streaming() and reply.content() == content)
    return reply


def test_read_aloud_reads_the_reply_sentence_by_sentence_and_stop_shows_meanwhile(
    chat_window, router, qtbot, tmp_path: Path
) -> None:
    window, _history = chat_window(voice_model=piper_test_voice())
    sink = tmp_path / "heard.wav"
    window.app.read_aloud.make_player = lambda: WavPlayer(sink)
    reply = replied(window, router, qtbot)
    assert READ_ALOUD in reply.more_actions()

    with qtbot.waitSignal(window.app.read_aloud.finished, timeout=60_000) as done:
        reply.trigger_more(READ_ALOUD)
        assert reply.more_actions()[-2:] == [STOP_READING, READING_SPEED]
        reader = window.app.read_aloud.reader
    assert done.args == [reply.message_id]
    assert reader.spoken == [
        "Paris is the capital of France.",
        "It lies on the Seine.",
        "Code block.",
        "That is all.",
    ]
    with wave.open(str(sink)) as wav:
        assert wav.getnframes() / wav.getframerate() > 2.0
    assert READ_ALOUD in reply.more_actions()


def test_stop_reading_stops_and_the_menu_offers_read_aloud_again(
    chat_window, router, qtbot, tmp_path: Path
) -> None:
    window, _history = chat_window(voice_model=piper_test_voice())
    window.app.read_aloud.make_player = lambda: WavPlayer(tmp_path / "heard.wav")
    reply = replied(window, router, qtbot, "One. " * 40)
    reply.trigger_more(READ_ALOUD)
    reader = window.app.read_aloud.reader
    reply.trigger_more(STOP_READING)
    assert reader.stopped and READ_ALOUD in reply.more_actions()
    assert window.app.read_aloud.reader is None


def test_the_speed_chosen_is_saved_and_shown_checked(chat_window, router, qtbot) -> None:
    window, _history = chat_window()
    reply = replied(window, router, qtbot, "Hello there.")
    assert ("1×", True) in reply.more_choices(READING_SPEED)
    reply.trigger_more("1.5×")
    assert window.app.config.read_aloud_speed == 1.5
    assert ("1.5×", True) in reply.more_choices(READING_SPEED)


def test_without_a_voice_the_window_says_what_to_point_to_or_install(
    chat_window, router, qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no espeak-ng on it
    window, _history = chat_window()
    window.app.read_aloud.make_player = lambda: WavPlayer(tmp_path / "heard.wav")
    reply = replied(window, router, qtbot, "Hello there.")
    reply.trigger_more(READ_ALOUD)
    qtbot.waitUntil(lambda: "No voice to read with" in window.problem_bar.text())
    assert "voice_model" in window.problem_bar.text()
    assert "espeak-ng" in window.problem_bar.text()
    assert READ_ALOUD in reply.more_actions()


def test_without_a_sound_device_the_window_says_so(chat_window, router, qtbot) -> None:
    pytest.importorskip("miniaudio", reason="the voice extra is not installed")
    window, _history = chat_window(voice_model=piper_test_voice())
    reply = replied(window, router, qtbot, "Hello there.")
    reply.trigger_more(READ_ALOUD)
    qtbot.waitUntil(lambda: window.app.read_aloud.reader is None, timeout=30_000)
    if not window.problem_bar.text():
        pytest.skip("this machine has a sound device: the no-device line cannot be shown")
    assert window.problem_bar.text().startswith("No sound output: the sound device")


def test_closing_stops_the_reading_and_waits_for_its_thread(
    chat_window, router, qtbot, tmp_path: Path
) -> None:
    """An interpreter that exits while a voice speaks on another thread aborts."""
    window, _history = chat_window(voice_model=piper_test_voice())
    window.app.read_aloud.make_player = lambda: WavPlayer(tmp_path / "heard.wav")
    reply = replied(window, router, qtbot, "A sentence to read. " * 30)
    reply.trigger_more(READ_ALOUD)
    reader = window.app.read_aloud.reader
    qtbot.waitUntil(lambda: len(reader.spoken) >= 1, timeout=30_000)
    window.app.read_aloud.close()
    assert reader.stopped and window.app.read_aloud.running == 0
