"""The tests of `llamachat.ui.views.composer`."""

from __future__ import annotations

import base64
import os
import threading

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QPushButton

from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.tests.support import (
    mp3_bytes,
    offscreen_popup,
    send_and_wait,
    type_message,
    visible_widget_named,
    write_png,
    write_wav,
)
from llamachat.ui.views.composer import AttachmentError, file_attachment


class TestComposer:
    """The message composer: a multi-line editor with attachments and `/skill` completion."""

    @offscreen_popup
    def test_first_time_completer_is_as_wide_as_the_box_and_esc_closes_it(
        self, chat_window, router, qtbot
    ) -> None:

        window, _history = chat_window()
        # Narrower than the offscreen screen (800 px), which caps a popup's width.
        window.resize(700, 600)
        editor = visible_widget_named(window, QPlainTextEdit, "Message")
        popup = window.composer.completer.popup()
        qtbot.keyClicks(editor, "/")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        assert popup.width() == editor.width()
        assert (
            popup.mapToGlobal(popup.rect().topLeft()).x()
            == editor.mapToGlobal(editor.rect().topLeft()).x()
        )
        qtbot.keyClick(editor, Qt.Key.Key_Escape)
        assert not popup.isVisible()
        assert window.composer.text() == "/"

    def test_window_text_file_attachment_is_inlined_as_fenced_block(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """An attached text file is sent inside a fence long enough for its own backticks."""

        window, history = chat_window()
        source = tmp_path / "notes.md"
        source.write_text("Use ```code``` here\n", encoding="utf-8")
        window.composer.add_files([source])
        assert visible_widget_named(window, QPushButton, "Remove attachment notes.md")
        send_and_wait(qtbot, window, "Summarise")
        content = router.chat_requests()[-1].json["messages"][-1]["content"]
        assert content == "Summarise\n\nnotes.md:\n````md\nUse ```code``` here\n````"
        assert history.messages(window.session_id)[0]["attachments"][0]["name"] == "notes.md"
        assert window.composer.attachments() == []

    def test_composer_refuses_image_for_text_only_model(self, chat_window, qtbot, tmp_path) -> None:
        """An image for a model without vision is not attached, and the status bar says why."""
        window, _history = chat_window()
        window.composer.add_files([write_png(tmp_path / "red.png")])
        assert window.composer.attachments() == []
        assert "does not read images" in window.statusBar().currentMessage()

    def test_composer_refuses_a_fifo_or_a_folder_at_once_saying_why(
        self, chat_window, tmp_path
    ) -> None:
        """A FIFO (or a folder) is refused with a message; opening it no longer blocks the window."""

        fifo = tmp_path / "notes.txt"
        os.mkfifo(fifo)
        outcome: list = []

        def attach() -> None:
            try:
                file_attachment(fifo, images=False)
            except AttachmentError as exc:
                outcome.append(str(exc))

        # On a thread, so that a blocking open fails this test instead of hanging it.
        thread = threading.Thread(target=attach, daemon=True)
        thread.start()
        thread.join(timeout=10)
        if thread.is_alive():
            with open(fifo, "wb"):  # a writer unblocks the stuck open, and the thread ends
                pass
            pytest.fail("attaching a FIFO blocked")
        assert outcome == [
            "notes.txt is not a regular file (a pipe, socket or device), and only files attach."
        ]

        window, _history = chat_window()
        (tmp_path / "folder").mkdir()
        window.composer.add_files([str(fifo), str(tmp_path / "folder")])
        assert window.composer.attachments() == []
        assert "folder is a folder" in window.statusBar().currentMessage()

    def test_composer_sends_image_as_data_uri_to_vision_model(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """A vision model gets the image as an image_url data URI part next to the text."""

        with ScriptedRouter([Model("eyes", "loaded", modalities=("text", "image"))]) as vision:
            window, _history = chat_window(url=vision.url, default_model="eyes")
            window.composer.add_files([write_png(tmp_path / "red.png")])
            send_and_wait(qtbot, window, "What colour?")
            text, image = vision.chat_requests()[-1].json["messages"][-1]["content"]
            assert text == {"type": "text", "text": "What colour?"}
            assert image["type"] == "image_url"
            assert image["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
            window.close()

    def test_composer_long_paste_becomes_attachment(self, chat_window, qtbot) -> None:
        """Pasting over 4,000 characters makes an attachment chip, not a wall of text; its
        label counts lines in words ("1 line", "600 lines")."""

        window, _history = chat_window()
        long_text = "log line\n" * 600
        mime = QMimeData()
        mime.setText(long_text)
        QApplication.clipboard().setMimeData(mime)
        window.composer.editor.paste()
        assert window.composer.text() == ""
        [attachment] = window.composer.attachments()
        assert attachment.data == long_text
        assert window.composer.attachment_chips.isVisible()
        assert visible_widget_named(
            window, QPushButton, "Remove attachment pasted text (600 lines)"
        )

        window.composer.set_attachments([])
        one_line = QMimeData()
        one_line.setText("x" * 5000)
        QApplication.clipboard().setMimeData(one_line)
        window.composer.editor.paste()
        assert visible_widget_named(window, QPushButton, "Remove attachment pasted text (1 line)")
        window.composer.set_attachments([])

        short = QMimeData()
        short.setText("short one")
        QApplication.clipboard().setMimeData(short)
        window.composer.editor.paste()
        # The clipboard owns a QMimeData made here: Qt would delete it at exit, after
        # Python is gone, and its wrapper's clean-up would crash the test run.
        QApplication.clipboard().clear()
        assert window.composer.text() == "short one"

    def test_composer_drop_of_file_attaches_it(self, chat_window, qtbot, tmp_path) -> None:
        """Dropping a file on the message box attaches it."""

        window, _history = chat_window()
        source = tmp_path / "data.csv"
        source.write_text("a,b\n1,2\n", encoding="utf-8")
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(str(source))])
        viewport = window.composer.editor.viewport()
        enter = QDragEnterEvent(
            QPoint(5, 5),
            Qt.DropAction.CopyAction,
            mime,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(viewport, enter)
        assert enter.isAccepted()
        drop = QDropEvent(
            QPointF(5, 5),
            Qt.DropAction.CopyAction,
            mime,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(viewport, drop)
        assert [a.name for a in window.composer.attachments()] == ["data.csv"]
        assert window.composer.text() == ""

    @offscreen_popup
    def test_composer_slash_completes_user_skill_names_with_descriptions(
        self, chat_window, router, qtbot
    ) -> None:
        """Typing `/` at a word start offers skills with descriptions; Enter picks one, not sends."""

        window, _history = chat_window()
        editor = window.composer.editor
        qtbot.keyClicks(editor, "please /wea")
        popup = window.composer.completer.popup()
        qtbot.waitUntil(popup.isVisible)
        shown = popup.model().index(0, 0).data()
        assert shown.startswith("/weather") and "Forecasts from the weather service." in shown
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert editor.toPlainText() == "please /weather "
        assert not popup.isVisible()
        assert router.chat_requests() == []

        qtbot.keyClicks(editor, "a/b")
        assert not popup.isVisible()

    def test_composer_grows_with_its_text_then_scrolls(self, chat_window, qtbot) -> None:
        """The message box starts at three lines, grows with the text, and stops at twelve."""
        window, _history = chat_window()
        editor = window.composer.editor
        start = editor.height()
        window.composer.set_text("\n".join(["line"] * 6))
        six = editor.height()
        window.composer.set_text("\n".join(["line"] * 40))
        capped = editor.height()
        window.composer.set_text("\n".join(["line"] * 80))
        assert start < six < capped == editor.height()
        assert editor.verticalScrollBar().maximum() > 0

    def test_slash_list_shows_a_skill_with_line_breaks_on_one_row(self, qtbot, tmp_path) -> None:
        """A description written over several lines is one row of the `/` list (the whole
        text in its tooltip), so the list has one row per skill."""
        from llamachat.skills import SkillStore
        from llamachat.ui.views.composer import Composer

        folder = tmp_path / "skills" / "claude-api"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            "---\nname: claude-api\ndescription: |\n  Build apps with the Claude API.\n"
            "  TRIGGER when code imports anthropic.\n---\nbody\n"
        )
        composer = Composer()
        qtbot.addWidget(composer)
        composer.offer_skills(SkillStore(tmp_path / "skills"))
        model = composer.completer.model()
        rows = [model.index(r, 0).data() for r in range(model.rowCount())]
        assert rows == [
            "/claude-api  —  Build apps with the Claude API. TRIGGER when code imports anthropic."
        ]
        assert "\n" in model.index(0, 0).data(0x03)  # the tooltip keeps the lines


class TestAudio:
    """Sounds (.wav, .mp3) go to a model that hears audio, as `input_audio` parts; a model
    that does not hear is refused them before anything is sent (issue 40)."""

    def test_a_model_that_hears_gets_the_sound_and_later_turns_and_a_retry_send_it_again(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """The attach offer names sounds, a pasted sound file attaches, its chip names the
        file and its length, the request carries `{"type": "input_audio", "input_audio":
        {"data", "format": "wav"}}`, the history keeps it, and the next turn and a retry
        replay it."""
        sound = write_wav(tmp_path / "greeting.wav", seconds=2.0)
        listed = [Model("ears", "loaded", modalities=("text", "audio")), Model("plain", "loaded")]
        with ScriptedRouter(listed) as ears:
            window, history = chat_window(url=ears.url, default_model="ears")
            assert "sounds (.wav, .mp3)" in window.composer.attach_button.toolTip()
            copied = QMimeData()
            copied.setUrls([QUrl.fromLocalFile(str(sound))])
            QApplication.clipboard().setMimeData(copied)
            window.composer.editor.paste()  # a file copied in a file manager
            QApplication.clipboard().clear()
            assert visible_widget_named(
                window, QPushButton, "Remove attachment greeting.wav (0:02)"
            )
            send_and_wait(qtbot, window, "What is said?")
            part = {
                "type": "input_audio",
                "input_audio": {
                    "data": base64.b64encode(sound.read_bytes()).decode("ascii"),
                    "format": "wav",
                },
            }
            text, sent = ears.chat_requests()[-1].json["messages"][-1]["content"]
            assert (text, sent) == ({"type": "text", "text": "What is said?"}, part)
            question, reply = history.messages(window.session_id)
            [stored] = question["attachments"]
            assert (stored["kind"], stored["name"], stored["seconds"]) == (
                "audio",
                "greeting.wav",
                2.0,
            )

            send_and_wait(qtbot, window, "And then?")
            replayed = ears.chat_requests()[-1].json["messages"]
            assert replayed[1]["content"][1] == part and replayed[1]["role"] == "user"

            window.retry(reply["id"])
            qtbot.waitUntil(lambda: len(ears.chat_requests()) == 3, timeout=10_000)
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
            assert ears.chat_requests()[-1].json["messages"][-1]["content"][1] == part
            window.close()

    def test_a_model_that_does_not_hear_is_refused_the_sound_before_anything_is_sent(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """Attaching a sound for a model without audio says so and names one that hears;
        a sound attached before switching to such a model stops Send with the same line:
        no request goes (the server would refuse it: 500 "audio input is not supported")."""
        sound = write_wav(tmp_path / "greeting.wav")
        listed = [Model("plain", "loaded"), Model("ears", "loaded", modalities=("text", "audio"))]
        with ScriptedRouter(listed) as both:
            window, _history = chat_window(url=both.url, default_model="plain")
            line = "plain does not take audio; pick a model that hears, e.g. ears."
            assert "sounds" not in window.composer.attach_button.toolTip()
            window.composer.add_files([sound])
            assert window.composer.attachments() == []
            assert window.statusBar().currentMessage() == line

            window.model_choice.set_model("ears")
            window.composer.add_files([sound])
            window.model_choice.set_model("plain")
            type_message(qtbot, window, "What is said?")
            qtbot.keyClick(
                visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return
            )
            assert window.statusBar().currentMessage() == line
            assert not window.is_streaming() and both.chat_requests() == []
            assert [a.name for a in window.composer.attachments()] == ["greeting.wav"]
            window.close()

    def test_an_mp3_attaches_with_its_length_and_goes_as_mp3(self, tmp_path) -> None:
        """An MP3 is read through the file gate into an audio attachment: its chip says how
        long it lasts (from its frame header), its part says "mp3"."""
        song = tmp_path / "Song.MP3"
        song.write_bytes(mp3_bytes(1000))
        attached = file_attachment(song, images=False, audio=True)
        assert (attached.kind, attached.mime, attached.label()) == (
            "audio",
            "audio/mpeg",
            "Song.MP3 (0:26)",
        )
        assert attached.audio_part()["input_audio"] == {
            "data": base64.b64encode(song.read_bytes()).decode("ascii"),
            "format": "mp3",
        }
        with pytest.raises(AttachmentError, match="does not hear audio"):
            file_attachment(song, images=True, audio=False)
