"""The tests of `llamachat.library.index`."""

from __future__ import annotations

import os
from pathlib import Path

from llamachat.tests.support import NON_UTF8_NAME, SECRET, messy_folder, returns_at_once


class TestLibraryIndex:
    """The index in library.db: every kind of file read, changed files read again."""

    def test_index_reads_every_kind_and_lists_the_skipped_with_why(self, tmp_path: Path) -> None:
        """PDFs by page, Markdown and HTML by heading, code as text; an encrypted, a broken
        and an unknown file are listed as skipped with the reason; hidden files are not."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_library_folder

        root = make_library_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(7, root)
        report = store.index(library)

        assert (report.indexed, report.skipped) == (7, 3)
        files = {row.path.relative_to(root).as_posix(): row for row in store.files(library)}
        assert sorted(files) == [
            "broken.pdf", "locked.pdf", "notes/llamas.md", "page.html", "photo.png",
            "report.pdf", "tool.py",
        ]  # fmt: skip
        assert files["locked.pdf"].skipped == "encrypted (a password is needed)"
        assert files["broken.pdf"].skipped.startswith("unreadable PDF (")
        assert files["photo.png"].skipped == "not a type llamachat reads (.png)"
        assert files["report.pdf"].passages == 2 and files["report.pdf"].skipped == ""

        [hit] = store.search("zebra revenue", 7, limit=1)
        assert (hit.path, hit.page) == (root / "report.pdf", 2)
        assert "42 million" in hit.text
        [hit] = store.search("What do llamas eat?", 7, limit=1)
        assert (hit.path.name, hit.page, hit.heading) == ("llamas.md", None, "Llamas")
        [hit] = store.search("alpacas fleece", 7)
        assert (hit.heading, hit.text) == ("Alpacas", "Alpacas have fluffy fleece.")
        assert store.search("scriptword", 7) == []
        assert store.search("ostrich_speed", 7)[0].path == root / "tool.py"
        assert store.search("zebra", 8) == []  # another chat's libraries are not searched
        [row] = store.libraries(7)
        assert (row.root, row.files, row.skipped) == (root, 7, 3)
        store.close()

    def test_reindex_reads_only_changed_files_and_forgets_removed_ones(
        self, tmp_path: Path
    ) -> None:
        """Unchanged files (same size and mtime) are not read again; an edited file is,
        a new one is added, a deleted one leaves the index."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_library_folder

        root = make_library_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(1, root)
        store.index(library)
        again = store.index(library)
        assert (again.indexed, again.unchanged, again.removed) == (0, 7, 0)

        (root / "notes" / "llamas.md").write_text("# Llamas\nLlamas now eat camel cakes.\n")
        (root / "new.txt").write_text("Vicunas are wild.")
        (root / "tool.py").unlink()
        report = store.index(library)
        assert (report.indexed, report.unchanged, report.removed) == (2, 5, 1)
        assert store.search("camel", 1)[0].path.name == "llamas.md"
        assert store.search("grass", 1) == []
        assert store.search("vicunas", 1)[0].path.name == "new.txt"
        assert store.search("ostrich_speed", 1) == []

        store.remove(library)
        assert store.libraries(1) == [] and store.search("vicunas", 1) == []
        store.close()

    def test_indexing_the_messy_folder_keeps_odd_names_skips_the_rest_and_sends_nothing_outside(
        self, tmp_path: Path
    ) -> None:
        """Issue 37 item 3: a name that is not UTF-8 is indexed (no UnicodeEncodeError); a
        FIFO (one made after the first run too), socket and /dev/zero are listed as skipped at
        once (read in the real child process); a link to a file outside is never indexed, so
        no search finds it."""
        from llamachat.library.child import ChildReader
        from llamachat.library.extract import extract
        from llamachat.library.index import LibraryStore

        messy = messy_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(1, messy.root)
        store.close()
        reader = ChildReader()

        def index() -> None:
            # On returns_at_once's thread: a store belongs to the thread that opened it.
            store = LibraryStore(tmp_path / "library.db")
            try:
                store.index(library, read=lambda p, s: extract(p, s, reader.read))
            finally:
                store.close()

        try:
            assert returns_at_once(index, 60) is None
            os.mkfifo(messy.root / "later.txt")
            assert returns_at_once(index, 60) is None
        finally:
            reader.close()
        store = LibraryStore(tmp_path / "library.db")
        rows = {row.path.relative_to(messy.root).as_posix(): row for row in store.files(library)}
        for name in messy.readable:
            assert rows[name].skipped == "" and rows[name].passages > 0, name
        for name, word in [*messy.left_out.items(), ("later.txt", "pipe")]:
            assert word in rows[name].skipped, (name, rows[name].skipped)
        assert "too large" in rows[messy.large].skipped
        assert store.search("vicunas", 1)[0].path == messy.root / NON_UTF8_NAME
        assert store.search(SECRET, 1) == [] and store.search("far away", 1) == []
        store.close()
