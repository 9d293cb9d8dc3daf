"""The tests of `llamachat.ui.library.host`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from llamachat.library.index import LibraryStore
from llamachat.tests.support import make_zebra_folder


class TestHost:
    """The App's libraries: which chats and projects have one, indexing off the GUI thread."""

    def test_host_shows_the_page_of_a_long_pdf_while_indexing_it(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Indexing a long PDF, the host says the page it got to, not only the files done,
        and the Libraries panel reads "book.pdf, page N of 120"; idle, the bar is hidden."""
        from llamachat.library import extract
        from llamachat.tests.support import write_library_pdf
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.libraries_panel import LibrariesPanel

        root = tmp_path / "docs"
        write_library_pdf(
            root / "book.pdf", [f"Page {n} tells of llamas in the Andes." for n in range(120)]
        )
        reads: list[tuple[int, int]] = []
        extract.extract(root / "book.pdf", 1, on_page=lambda *pages: reads.append(pages))
        assert len(reads) >= 120 // extract.PART_PAGES and reads[-1] == (120, 120)
        assert [page for page, _pages in reads] == sorted({page for page, _pages in reads})

        host = LibraryHost(tmp_path / "library.db")
        panel = LibrariesPanel(host, 3)
        qtbot.addWidget(panel)
        seen: list[tuple] = []
        labels: list[str] = []

        def on_progress(*args: object) -> None:
            seen.append(args)
            labels.append(panel.progress_label.text())  # the panel's slot ran first

        host.progress.connect(on_progress)
        host.attach(3, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        host.close()
        pages = [(page, total) for _done, _files, _name, page, total in seen if total]
        assert pages and {total for _page, total in pages} == {120}
        assert 0 < pages[0][0] < 120  # the first part of the file
        assert re.fullmatch(
            r"0 of 1 file: book\.pdf, page \d+ of 120",
            labels[seen.index((0, 1, "book.pdf", *pages[0]))],
        )
        assert seen[-1] == (0, 0, "", 0, 0)
        assert panel.progress.isHidden() and panel.progress_label.isHidden()
        [row] = host.libraries(3)
        assert row.passages == 120

    def test_host_reads_files_in_a_child_process_that_closing_ends(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The host's indexing reads the files in a child process at a lower CPU priority
        (pypdf off the window's GIL), with the same result as reading them here; the child
        ends with the run. Closing the host while a long PDF is read ends the child at once,
        and that file is not taken as indexed."""
        import multiprocessing

        from llamachat.library import child
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_library_folder, write_library_pdf
        from llamachat.ui.library.host import LibraryHost

        def readers() -> list:
            return [p for p in multiprocessing.active_children() if p.name == "llamachat-reader"]

        root = make_library_folder(tmp_path / "docs")
        here = LibraryStore(tmp_path / "here.db")
        here.index(here.attach(1, root))
        host = LibraryHost(tmp_path / "library.db")
        during: list[int] = []
        host.progress.connect(lambda *_args: during.extend(p.pid for p in readers()))
        host.attach(1, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        [library] = host.libraries(1)
        assert host.files(library.id) == here.files(here.attach(1, root))
        here.close()
        assert during and os.getpid() not in during
        assert readers() == []

        long = tmp_path / "long"
        write_library_pdf(long / "long.pdf", ["An alpaca sleeps under the stars."] * 400)
        reading: list[tuple[int, int]] = []

        def on_progress(_done: int, _files: int, _name: str, page: int, _pages: int) -> None:
            if page and not reading:
                [reader] = readers()
                reading.append((reader.pid, os.getpriority(os.PRIO_PROCESS, reader.pid)))
                host.close()  # in the middle of the PDF

        host.progress.connect(on_progress)
        host.attach(1, long)
        qtbot.waitUntil(lambda: bool(reading) and not host.busy(), timeout=60000)
        [(pid, niceness)] = reading
        assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + child.NICENESS)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert readers() == []
        [stopped] = [row for row in host.libraries(1) if row.root == long.resolve()]
        assert stopped.files == 0  # read again next time, not kept half read

    def test_host_goes_on_with_a_first_indexing_cut_short(self, qtbot, tmp_path: Path) -> None:
        """A library attached but never read whole (llamachat quit while it was read) is read
        when the libraries are first looked at, not a minute later: a search waits for it."""
        from llamachat.ui.library.host import LibraryHost

        store = LibraryStore(tmp_path / "library.db")
        store.attach(7, make_zebra_folder(tmp_path / "docs"))
        store.close()
        host = LibraryHost(tmp_path / "library.db")
        try:
            assert host.config_for(7) is not None
            assert host.busy()
            qtbot.waitUntil(lambda: not host.busy(), timeout=20_000)
            [row] = host.libraries(7)
            assert row.indexed_at > 0 and row.passages == 2
        finally:
            host.close()


class TestHostDamagedFile:
    """A damaged library.db, mended."""

    def test_a_damaged_library_file_is_moved_aside_and_made_again(self, qtbot, tmp_path) -> None:
        """library.db damaged (pages scribbled over): as history.db, it is moved aside to
        library.db.corrupt-<stamp>, a new one keeps the list of libraries, and their files
        are indexed again; the user is told where the old file went (issue 37, item 11)."""
        import os

        from llamachat.library.index import LibraryStore
        from llamachat.ui.library.host import LibraryHost

        root = tmp_path / "docs"
        root.mkdir()
        for n in range(60):
            (root / f"note{n}.txt").write_text(
                "\n\n".join(f"Note {n}, part {p}: the zebra-{n} facts." for p in range(40))
            )
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        store.index(store.attach(1, root))
        [indexed] = store.libraries(1)
        passages = indexed.passages
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        scribbled = bytearray(db.read_bytes())
        page = 4096
        for start in range(8 * page, len(scribbled) - page, 3 * page):
            scribbled[start : start + page] = os.urandom(page)
        db.write_bytes(bytes(scribbled))

        host = LibraryHost(db)
        said: list[str] = []
        host.failed.connect(said.append)
        [row] = host.libraries(1)
        assert row.root == root.resolve()
        [aside] = tmp_path.glob("library.db.corrupt-*")
        assert said == [
            (
                f"The libraries file was damaged: it was moved to {aside.name} and a new "
                "one made; the libraries are read again."
            )
        ]
        qtbot.waitUntil(lambda: host.libraries(1)[0].passages == passages, timeout=60000)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        host.close()
        assert said[1:] == []
