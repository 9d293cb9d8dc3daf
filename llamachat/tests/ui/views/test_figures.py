"""The tests of `llamachat.ui.views.figures`."""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel

from llamachat.tests.support import visible_widget_named
from llamachat.ui import theme
from llamachat.ui.views.figures import ReadingProgress


class TestFigures:
    """A reply's figures: the reading bar while the prompt is read, and what it says."""

    def test_conversation_reading_progress_moves_by_the_estimate_between_reports(
        self, qtbot
    ) -> None:
        """The server reports once a batch: between reports the bar moves at the reading speed
        (earlier replies', then this reading's), never past one batch on, never back; the
        time taken and the time left show beside the server's count (issue 30, item 4)."""

        now = [100.0]
        reading = ReadingProgress(speed=100.0, clock=lambda: now[0])
        qtbot.addWidget(reading)
        reading.show_progress({"total": 5000, "cache": 0, "processed": 0, "time_ms": 0})
        assert reading.bar.value() == 0 and reading.timing.text() == "0 s · about 50 s left"
        now[0] = 102.0
        reading.refresh()
        assert reading.bar.value() == 200 and reading.label.text() == "Reading 0 of 5,000 tokens"
        assert reading.timing.text() == "2 s · about 48 s left"
        now[0] = 104.0
        reading.show_progress({"total": 5000, "cache": 0, "processed": 512, "time_ms": 4000})
        assert reading.bar.value() == 512 and reading.speed() == 128.0
        now[0] = 114.0
        reading.refresh()
        assert reading.bar.value() == 1024  # 512 + 1,280 estimated, held at one batch on
        assert reading.timing.text() == "14 s · about 31 s left"
        reading.show_progress({"total": 5000, "cache": 0, "processed": 1000, "time_ms": 15000})
        assert (
            reading.bar.value() == 1024 and reading.label.text() == "Reading 1,000 of 5,000 tokens"
        )
        now[0] = 130.0
        reading.show_progress({"total": 5000, "cache": 0, "processed": 5000, "time_ms": 30000})
        assert reading.bar.value() == 5000 and reading.timing.text() == "30 s"

        live = ReadingProgress(speed=1_000_000.0)
        qtbot.addWidget(live)
        live.show_progress({"total": 100_000, "cache": 0, "processed": 0, "time_ms": 0})
        # The timer moves it; past the time estimated it nears 95%: the end is the server's.
        qtbot.waitUntil(lambda: live.bar.value() >= 90_000)
        assert live.bar.value() < 95_000

    def test_conversation_reading_bar_shows_empty_in_the_dark_theme(
        self, messages_view, qtbot
    ) -> None:
        """At 0% the bar's groove stands out from the conversation's dark background."""

        messages_view.setPalette(theme.palette_for("dark"))
        reply = messages_view.append_message({"id": 1, "role": "assistant", "status": "streaming"})
        reply.set_progress({"total": 5694, "cache": 0, "processed": 0, "time_ms": 0})
        reading = reply.findChild(ReadingProgress)
        qtbot.waitUntil(reading.isVisible)
        image = reading.bar.grab().toImage()
        groove = image.pixelColor(image.width() // 2, image.height() // 2)
        base = messages_view.palette().color(QPalette.ColorRole.Base)
        assert reading.bar.value() == 0 and groove.lightness() - base.lightness() >= 20

    def test_conversation_reply_stopped_while_reading_says_what_was_read(
        self, messages_view
    ) -> None:
        """Stop before the prompt was read: the reply says so, with the server's last count
        (or the server's own figures when it sent some)."""

        reply = messages_view.append_message({"id": 1, "role": "assistant", "status": "streaming"})
        reply.set_progress({"total": 5694, "cache": 52, "processed": 2100, "time_ms": 9000})
        reply.finish()
        reply.set_progress(None)
        reply.set_status("stopped")
        assert reply._status.text() == "Stopped while reading the prompt"
        assert (
            visible_widget_named(reply, QLabel, "Reply statistics")
            .text()
            .startswith("2,100 of 5,694 prompt tokens read · ")
        )

        told = messages_view.append_message({"id": 2, "role": "assistant", "status": "streaming"})
        told.set_progress({"total": 5694, "cache": 52, "processed": 2100, "time_ms": 9000})
        told.finish()
        told.set_progress(None)
        told.set_stats({}, {"prompt_n": 2048, "cache_n": 52, "prompt_ms": 9000.0})
        told.set_status("stopped")
        assert told._status.text() == "Stopped while reading the prompt"
        assert (
            visible_widget_named(told, QLabel, "Reply statistics").text()
            == "2,100 prompt, 52 cached"
        )

    def test_a_reading_reported_only_at_its_start_never_shows_full_at_zero(self, qtbot) -> None:
        """llama.cpp may report only the first and the last batch: past the time estimated
        from earlier replies the bar slows down short of the end and no time left is said
        (issue 38, item 9)."""
        now = [100.0]
        reading = ReadingProgress(speed=100.0, clock=lambda: now[0])
        qtbot.addWidget(reading)
        reading.show_progress({"total": 1256, "cache": 0, "processed": 0, "time_ms": 0})
        now[0] = 105.0
        reading.refresh()
        assert reading.bar.value() == 500 and reading.timing.text() == "5 s · about 8 s left"
        now[0] = 116.0
        reading.refresh()
        assert 1130 < reading.bar.value() < 1256 and reading.timing.text() == "16 s"
        now[0] = 160.0
        reading.refresh()
        assert reading.bar.value() < 0.95 * 1256
        reading.show_progress({"total": 1256, "cache": 0, "processed": 1256, "time_ms": 60000})
        assert reading.bar.value() == 1256
