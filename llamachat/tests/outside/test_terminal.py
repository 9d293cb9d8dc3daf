"""The tests of `llamachat.outside.terminal`: the one way out to a terminal."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from llamachat import outside
from llamachat.outside.terminal import FILE_ONLY


class TestTerminal:
    """Escape sequences, control characters and bidi overrides never reach a terminal."""

    def test_escape_sequences_controls_and_bidi_overrides_are_neutralized(self) -> None:
        """OSC 0/52, CSI 2J, BEL, C1 and U+202E: dropped from our messages, shown as
        symbols in the model's text."""
        hostile = "a\x1b]0;title\x07b\x1b]52;c;Zm9v\x07c\x1b[2Jd\x9be\u202ef\u2066g\n"
        assert outside.terminal_safe(hostile) == "abcdefg\n"
        shown = outside.visible_controls(hostile)
        assert "\x1b" not in shown and "\u202e" not in shown and "\u2066" not in shown
        assert "\\u202e" in shown and "\u241b]0;title" in shown

    def test_log_lines_on_stderr_are_neutralized_and_file_only_records_stay_off_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A warning holding escapes reaches stderr clean; a FILE_ONLY record (an error
        page's body) reaches the log file only."""
        monkeypatch.setattr(logging.getLogger(), "handlers", [])
        err = io.StringIO()
        handlers = outside.configure_logging(
            logging.WARNING, log_path=tmp_path / "l.log", stream=err
        )
        try:
            log = logging.getLogger("llamachat.test")
            log.warning("name \x1b]0;pwned\x07 \u202eevil")
            log.warning("the page:\n%s", "<html>BODY</html>", extra={FILE_ONLY: True})
        finally:
            for handler in handlers:
                handler.close()
        assert err.getvalue() == "WARNING llamachat.test: name  evil\n"
        logged = (tmp_path / "l.log").read_text()
        assert "BODY" in logged and "pwned" in logged
