"""Opening a document search's source: the file, a PDF at its page where a viewer takes one.

A source's link is its file's URL, with `#page=N` for a PDF's page (what browsers read).
`open_source(url)` asks `library.open_at_page` for a viewer's command off the GUI thread
(it runs xdg-mime) and starts it detached; without one, or when it does not start, the
desktop opens the file (at its first page). When nothing can open it, a tooltip at the
pointer says so and the file's path is copied, so the click is never silent.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Future
from pathlib import Path

from PySide6.QtCore import QProcess, QUrl
from PySide6.QtGui import QCursor, QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QToolTip

from llamachat.library.open_at_page import viewer_command
from llamachat.ui import plain, tasks

log = logging.getLogger(__name__)

_PAGE = re.compile(r"page=(\d+)")


def source_link(url: str, page: object) -> str:
    """A source's link: its file URL, with #page=N when it is a page of a PDF."""
    return f"{url}#page={page}" if isinstance(page, int) and page > 0 else url


def open_source(url: QUrl) -> None:
    """Open a source's file (a local URL), at the page its #page=N names where possible."""
    path = Path(url.toLocalFile())
    whole = QUrl.fromLocalFile(str(path))  # without the #page, which xdg-open would drop
    match = _PAGE.fullmatch(url.fragment())
    if match is None:
        _open_whole(whole)
        return
    page = int(match.group(1))

    def start(future: Future) -> None:
        command = future.result()
        if command is not None:
            started, _pid = QProcess.startDetached(command[0], command[1:])
            if started:
                return
            log.info("could not start %s", command[0])
        _open_whole(whole)

    tasks.run_in_background(lambda: viewer_command(path, page), start)


def _open_whole(url: QUrl) -> bool:
    """Have the desktop open the file; when it cannot, say so at the pointer and copy the
    file's path. Whether the desktop took it."""
    if QDesktopServices.openUrl(url):
        return True
    path = url.toLocalFile()
    log.info("no program opens %s", path)
    QGuiApplication.clipboard().setText(path)
    QToolTip.showText(
        QCursor.pos(),
        plain.tooltip(f"No program here opens {Path(path).name}. Its path is copied: {path}"),
    )
    return False
