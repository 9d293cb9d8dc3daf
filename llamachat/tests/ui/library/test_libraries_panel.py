"""The tests of `llamachat.ui.library.libraries_panel`."""

from __future__ import annotations

from pathlib import Path

from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.router.client import Client
from llamachat.tests.support import messy_folder


class TestLibraryPanel:
    """The Libraries panel: a chat's libraries and its project's, and how they are searched."""

    def test_router_down_or_refusing_keeps_full_text_and_the_panel_says_why(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Indexing in the background with a router that refuses embeddings (a model not
        started with --embeddings), then with none answering: the full-text index is made
        and searched all the same, and the Libraries panel says why there are no vectors."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_embedder
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.libraries_panel import LibrariesPanel

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        db = tmp_path / "library.db"
        with ScriptedRouter([Model("chat-only", "loaded", embeddings=False)]) as router:
            client = Client(router.url)
            host = LibraryHost(db, embedder=lambda: make_embedder(client, "chat-only"))
            panel = LibrariesPanel(host, 4)
            qtbot.addWidget(panel)
            host.attach(4, root)
            qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
            assert "does not support embeddings" in host.vectors_note
            assert "full text only" in panel.summary.text()
            assert "does not support embeddings" in panel.summary.text()
        # The router is gone now: nothing answers.
        (root / "more.txt").write_text("More zebra news.")
        host.reindex_all()
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        client.close()
        assert "gave no vectors" in panel.summary.text()
        store = LibraryStore(db)
        try:
            names = {hit.path.name for hit in store.search("zebra", 4)}
        finally:
            store.close()
        assert names == {"zebra.txt", "more.txt"}
        host.close()

    def test_libraries_panel_says_the_search_uses_vectors_when_it_does(
        self, qtbot, router, tmp_path: Path
    ) -> None:
        """With vectors made, the panel says the search goes by meaning too and with which
        model; without an embedding model it says nothing of vectors."""
        from llamachat.tests.support import make_embedder
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.libraries_panel import LibrariesPanel

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        client = Client(router.url)
        embedders = [make_embedder(client), None]
        host = LibraryHost(tmp_path / "library.db", embedder=lambda: embedders[0])
        panel = LibrariesPanel(host, 4)
        qtbot.addWidget(panel)
        host.attach(4, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        panel.refresh()
        assert "by meaning too, with vectors from test-model" in panel.summary.text()
        embedders.pop(0)
        panel.refresh()
        assert "meaning" not in panel.summary.text() and "vectors" not in panel.summary.text()
        host.close()
        client.close()

    def test_the_panel_lists_the_messy_folder_with_odd_names_shown_and_reasons(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Issue 37 item 3 in the window: indexing ends (no bug dialog, no stuck progress),
        the name that is not UTF-8 is listed with a replacement character and indexed, and
        each file left out says why."""
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.libraries_panel import LibrariesPanel

        messy = messy_folder(tmp_path / "docs")
        host = LibraryHost(tmp_path / "library.db")
        panel = LibrariesPanel(host, 3)
        qtbot.addWidget(panel)
        host.attach(3, messy.root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        panel.refresh()
        top = panel.tree.topLevelItem(0)
        rows = {
            top.child(i).text(0): (top.child(i).text(2), top.child(i).text(3))
            for i in range(top.childCount())
        }
        host.close()
        assert rows["caf\N{REPLACEMENT CHARACTER}.txt"][0] == "1"
        assert rows["fifo.txt"] == ("0", "a pipe (FIFO), not a regular file")
        assert "outside the folder" in rows["passwd.txt"][1]
        assert panel.progress.isHidden()
