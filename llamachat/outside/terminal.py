"""The one way out to a terminal: text llamachat writes there, log lines on stderr included.

A terminal acts on what it is sent: ESC starts OSC sequences (OSC 0 retitles the window,
OSC 52 writes the clipboard) and CSI ones (CSI 2J clears the screen), BEL rings, C1
controls act as ESC does on some terminals, and the bidirectional overrides (U+202E and
its kin) make the text that follows read in another order than it runs ("Trojan Source").
Outside text (a server's error, a file's name, a model's answer) may hold any of these:

- `terminal_safe` drops them: for llamachat's own messages and log lines;
- `visible_controls` shows each as a visible symbol, one for one: for the model's answer,
  which keeps every character it sent (a sequence cut between two pieces of the stream is
  neutralized too);
- `configure_logging` puts `terminal_safe` on the stderr handler, keeps records marked
  ``extra={FILE_ONLY: True}`` (an error page's body) off the terminal, and writes every
  record to llamachat's log file.

Qt-free.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from pathlib import Path
from typing import TextIO

FILE_ONLY = "file_only"
"""``log.warning(..., extra={FILE_ONLY: True})``: the record goes to the log file only."""

LOG_MAX_BYTES = 1024 * 1024
"""Where llamachat's log file rolls over (two old ones are kept)."""

# The bidirectional embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI
# PDI): they reorder what a terminal shows. The marks (LRM, RLM, ALM) do not, and stay.
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

# Escape sequences whole (OSC up to its BEL or ST, CSI up to its final byte, ESC and the
# next character), then any other control character but a line break, and the bidi ones.
_ESCAPES = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b\[[0-?]*[ -/]*[@-~]|\x1b.?")
_CONTROLS = re.compile(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")

_VISIBLE = {
    **{code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)},
    0x7F: "\u2421",
    **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)},
    **{ord(char): f"\\u{ord(char):04x}" for char in _BIDI},
}


def terminal_safe(text: str) -> str:
    """`text` with escape sequences, control characters (but line breaks) and bidi overrides removed."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def visible_controls(text: str) -> str:
    """`text` with control characters (but line breaks and tabs) and bidi overrides as visible symbols."""
    return text.translate(_VISIBLE)


class TerminalFormatter(logging.Formatter):
    """A formatter whose lines (tracebacks too) pass `terminal_safe`."""

    def format(self, record: logging.LogRecord) -> str:
        """The record's line, safe for a terminal."""
        return terminal_safe(super().format(record))


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, FILE_ONLY, False)


_OURS = "_llamachat_handler"


def configure_logging(
    level: int, *, log_path: Path | None = None, stream: TextIO | None = None
) -> list[logging.Handler]:
    """Log at `level` to `stream` (stderr) through `terminal_safe`, and everything to `log_path`.

    Records marked FILE_ONLY skip the terminal. Calling it again replaces the handlers an
    earlier call added; a process whose logging someone else set up (a test run) keeps it
    as it is, as `logging.basicConfig` would. The handlers added are returned.
    """
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, _OURS, False)]
    if len(ours) < len(root.handlers):
        return []
    for handler in ours:
        root.removeHandler(handler)
        handler.close()
    terminal = logging.StreamHandler(stream if stream is not None else sys.stderr)
    terminal.setFormatter(TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
    terminal.addFilter(_not_file_only)
    added: list[logging.Handler] = [terminal]
    if log_path is not None:
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            # Opened at the first record: a run that logs nothing leaves no file.
            file = logging.handlers.RotatingFileHandler(
                log_path,
                maxBytes=LOG_MAX_BYTES,
                backupCount=2,
                encoding="utf-8",
                errors="backslashreplace",
                delay=True,
            )
        except OSError as exc:
            logging.getLogger(__name__).info("no log file at %s: %s", log_path, exc)
        else:
            file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            added.append(file)
    for handler in added:
        setattr(handler, _OURS, True)
        root.addHandler(handler)
    root.setLevel(level)
    return added


def say(message: object, stream: TextIO | None = None) -> None:
    """Print a llamachat message (never the model's answer) on `stream` (stderr), terminal-safe."""
    print(
        f"llamachat: {terminal_safe(str(message))}",
        file=stream if stream is not None else sys.stderr,
    )
