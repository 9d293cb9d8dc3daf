"""Outside input through one gate: files from outside read one way, text bound for a terminal
neutralized one way.

    file_gate   open_regular (regular files only, never blocking), read_bytes / read_text
                (bounded by the bytes read, not by stat), walk (a folder, never left through
                a link inside it, each left-out entry with its reason), shown (a path's name
                for people, not UTF-8 bytes as replacement characters)
    terminal    terminal_safe (our messages), visible_controls (the model's text),
                configure_logging (stderr lines neutralized; file-only records such as an
                error page's body kept off the terminal)

Every surface that reads a file the person chose or a folder they named goes through
`file_gate`: skills, libraries, chat imports, attachments, prompt presets, the MCP servers
file, GGUF files added to the models folder. Everything llamachat writes to a terminal
goes through `terminal`.

Qt-free.

Errors: one tree, in `file_gate`:

    Refused(Exception)      a file not read; .reason is a phrase for the user ("is a pipe")
    ├── NotRegular          a FIFO, socket, device or folder (never opened blocking)
    ├── TooLarge            more bytes than the caller's limit (counted while reading)
    ├── NotText             NUL bytes or not UTF-8, where text was wanted
    └── Unreadable          the system's error (permissions, gone, I/O)
"""

from llamachat.outside.file_gate import (
    NotRegular,
    NotText,
    Refused,
    TooLarge,
    Unreadable,
    Walked,
    inside,
    kind,
    open_regular,
    read_bytes,
    read_head,
    read_text,
    shown,
    walk,
)
from llamachat.outside.terminal import configure_logging, say, terminal_safe, visible_controls

__all__ = [
    "NotRegular",
    "NotText",
    "Refused",
    "TooLarge",
    "Unreadable",
    "Walked",
    "configure_logging",
    "inside",
    "kind",
    "open_regular",
    "read_bytes",
    "read_head",
    "read_text",
    "say",
    "shown",
    "terminal_safe",
    "visible_controls",
    "walk",
]
