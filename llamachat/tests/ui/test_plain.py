"""The tests of `llamachat.ui.plain`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocumentFragment
from PySide6.QtWidgets import QLabel, QMessageBox

from llamachat.config import ProviderConfig
from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History, HistoryError
from llamachat.tests.support import (
    HOSTILE,
    offscreen_dialogs,
    outside_text_places,
    quick_ask,
    quick_offscreen,
    send_and_wait,
    write_skill,
)
from llamachat.ui.app import ExceptionHook


class TestPlain:
    """Outside text on screen, shown as text: the one way llamachat puts it into Qt."""

    @offscreen_dialogs
    def test_plain_helpers_keep_outside_text_from_being_read_as_rich_text(self, qtbot) -> None:
        """The one way outside text reaches Qt: plain labels, escaped tooltips, plain message boxes."""

        from llamachat.ui import plain

        label = plain.Label(HOSTILE)
        qtbot.addWidget(label)
        assert label.textFormat() == Qt.TextFormat.PlainText and label.text() == HOSTILE
        other = QLabel()
        qtbot.addWidget(other)
        plain.set_text(other, HOSTILE)
        assert other.textFormat() == Qt.TextFormat.PlainText
        for text in (HOSTILE, f"Error: {HOSTILE}\n  two  spaces", "&lt;b&gt; is a tag"):
            tip = plain.tooltip(text)
            assert QTextDocumentFragment.fromHtml(tip).toPlainText() == text
        assert plain.tooltip("Context of qwen: 1 of 2 tokens") == "Context of qwen: 1 of 2 tokens"
        assert plain.tooltip("") == ""
        box = plain.message_box(None, QMessageBox.Icon.Critical, "llamachat", HOSTILE)
        qtbot.addWidget(box)
        assert box.textFormat() == Qt.TextFormat.PlainText and box.text() == HOSTILE
        assert outside_text_places()

        hook = ExceptionHook()  # a bug's message, and an environment fault's, are outside text
        for exc in (RuntimeError(HOSTILE), HistoryError(HOSTILE)):
            hook.handle(type(exc), exc, None)
        try:
            assert len(hook.dialogs) == 2
            shown = [where for where in outside_text_places() if "qt_msgbox_label" in where]
            assert len(shown) == 3  # the helper's box and the two hook dialogs
        finally:
            for dialog in hook.dialogs:
                dialog.close()

    def test_outside_text_router_provider_and_start_up_errors_show_as_text(
        self, chat_window, router, hostile_server, qtbot
    ) -> None:
        """An HTML error page from the router or a provider shows as text, at start-up, unasked."""

        window, _history = chat_window(url=hostile_server.url, listed=False)
        label = window.model_picker.status_label
        qtbot.waitUntil(lambda: HOSTILE in label.text(), timeout=10_000)
        assert "Model status" in " ".join(outside_text_places())
        window.close()

        window, _history = chat_window(providers=(ProviderConfig("evil", hostile_server.url, ""),))
        label = window.model_picker.status_label
        qtbot.waitUntil(lambda: "evil" in label.text() and HOSTILE in label.text(), timeout=10_000)
        assert "Model status" in " ".join(outside_text_places())

        window.app.router_failed(f"llama-server said: {HOSTILE}")
        places = " ".join(outside_text_places())
        assert "Getting started" in places

    @offscreen_dialogs
    def test_outside_text_in_replies_skills_titles_and_file_names_shows_as_text(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Reply errors (live and reopened), skill descriptions, chat titles, file names: text."""

        write_skill(
            tmp_path / "skills",
            "evil",
            f"---\nname: evil\ndescription: '{HOSTILE}'\n---\nBe evil.\n",
        )
        attachment = tmp_path / HOSTILE
        attachment.write_text("hello", encoding="utf-8")
        window, history = chat_window()
        window.composer.add_files([str(attachment)])
        router.script(Reply(status=500, error={"message": HOSTILE}))
        send_and_wait(qtbot, window, "/evil hello")
        assert HOSTILE in history.messages(window.session_id)[-1]["error"]
        session_id = window.session_id
        history.rename_session(session_id, HOSTILE)
        window.sidebar.refresh()
        qtbot.keyClicks(window.composer.editor, " /ev")
        qtbot.waitUntil(window.composer.completer.popup().isVisible)
        assert window.skills.open_panel() is not None
        places = " ".join(outside_text_places())
        for where in ("Status", "Attachments", "Skill list", "Sessions", "QListView"):
            assert where in places, (where, places)
        window.close()

        again, _ = chat_window(history=History(history.path))
        assert again.open_session(session_id)  # the saved error is shown again, as text
        assert "Status" in " ".join(outside_text_places())
        assert again.windowTitle().startswith(HOSTILE)  # window titles are plain text in Qt
        again.sidebar.delete_session(session_id)
        assert "Sessions notice" in " ".join(outside_text_places())

    @quick_offscreen
    def test_outside_text_in_the_quick_window_shows_as_text(self, quick, router, qtbot) -> None:
        """A failed quick answer shows the server's hostile message as text."""

        window, _history = quick()
        window.show()
        router.script(Reply(status=500, error={"message": HOSTILE}))
        quick_ask(qtbot, window, "hello")
        window.show_notice(f"Not sent: {HOSTILE}")
        places = " ".join(outside_text_places())
        assert "Status" in places and "Notice" in places
