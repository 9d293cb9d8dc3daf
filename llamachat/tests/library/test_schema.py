"""The tests of `llamachat.library.schema`."""

from __future__ import annotations

from pathlib import Path


class TestSchema:
    """library.db's tables, and their migrations from older versions (`user_version`)."""

    def test_a_version_1_library_db_keeps_its_vectors_given_their_bits(
        self, tmp_path: Path
    ) -> None:
        """library.db made before the bits (version 1: float vectors searched by brute
        force) is converted by the next indexing: every vector kept, nothing sent to the
        router again, the search finds what it found; a version 1 file whose vectors name
        no model has them made again."""
        from llamachat.library.index import LibraryStore
        from llamachat.library.schema import SCHEMA_VERSION
        from llamachat.tests.support import recording_embedder

        root = tmp_path / "docs"
        root.mkdir()
        for name in ("alpha", "beta", "gamma"):
            (root / f"{name}.txt").write_text(f"The {name} notes.\n\nMore on {name}.")
        embedder, sent = recording_embedder(64)
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        library = store.attach(1, root)
        store.index(library, embedder=embedder)
        before = [hit.text for hit in store.search("beta", 1, limit=6, embedder=embedder)]
        # Back to version 1's layout, as its LibraryStore made it.
        rows = store._db.execute(
            "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
        ).fetchall()
        store._db.execute("DROP TABLE passage_vectors")
        store._db.execute(
            "CREATE VIRTUAL TABLE passage_vectors USING vec0(session_id INTEGER PARTITION KEY,"
            " embedding float[64] distance_metric=cosine)"
        )
        store._db.executemany(
            "INSERT INTO passage_vectors (rowid, session_id, embedding) VALUES (?, ?, ?)", rows
        )
        store._db.execute("PRAGMA user_version = 1")
        store._db.commit()
        store.close()

        store = LibraryStore(db)
        sent.clear()
        try:
            # Indexing converts it (in its thread: the window opens library.db too).
            report = store.index(library, embedder=embedder)
            version = store._db.execute("PRAGMA user_version").fetchone()[0]
            kept = store._db.execute(
                "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
            ).fetchall()
            after = [hit.text for hit in store.search("beta", 1, limit=6, embedder=embedder)]
        finally:
            store.close()
        assert version == SCHEMA_VERSION and len(rows) == 3
        assert kept == rows
        assert after == before
        assert report.embedded == 0 and sent == ["beta"]  # the query's vector only

        store = LibraryStore(db)
        store._db.execute("DELETE FROM vector_model")
        store._db.execute("PRAGMA user_version = 1")
        store._db.commit()
        store.close()
        store = LibraryStore(db)
        try:
            assert store.index(library, embedder=embedder).embedded == 3
        finally:
            store.close()

    def test_library_db_version_2_keeps_its_chat_libraries_and_vectors_and_takes_projects(
        self, tmp_path: Path
    ) -> None:
        """library.db made before projects (version 2: libraries of chats only) is migrated
        when opened: the chat's library keeps its id, files and vectors (nothing sent to the
        router again), and a project's library beside it is searched by the project's chat
        alone, by words and by vectors."""
        from llamachat.library import searching
        from llamachat.library.index import LibraryStore
        from llamachat.library.schema import SCHEMA_VERSION
        from llamachat.tests.support import recording_embedder

        chat_docs, project_docs = tmp_path / "chat", tmp_path / "project"
        for folder, word in ((chat_docs, "alpha"), (project_docs, "omega")):
            folder.mkdir()
            (folder / f"{word}.txt").write_text(f"The {word} notes.\n\nMore on {word}.")
        embedder, sent = recording_embedder(64)
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        library = store.attach(1, chat_docs)
        store.index(library, embedder=embedder)
        before = [hit.text for hit in store.search("alpha", 1, limit=6, embedder=embedder)]
        vectors_before = store._db.execute(
            "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
        ).fetchall()
        # Back to version 2's libraries table, as its LibraryStore made it.
        store._db.execute("PRAGMA foreign_keys=OFF")
        store._db.executescript(
            "CREATE TABLE old (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL,"
            " root TEXT NOT NULL, indexed_at REAL NOT NULL DEFAULT 0,"
            " UNIQUE (session_id, root));"
            "INSERT INTO old SELECT id, session_id, root, indexed_at FROM libraries;"
            "DROP TABLE libraries; ALTER TABLE old RENAME TO libraries;"
            "PRAGMA user_version = 2;"
        )
        store.close()

        store = LibraryStore(db)
        sent.clear()
        try:
            version = store._db.execute("PRAGMA user_version").fetchone()[0]
            [row] = store.libraries()
            assert (row.id, row.session_id, row.project_id, row.files) == (library, 1, None, 1)
            assert store.index(library, embedder=embedder).embedded == 0
            assert (
                store._db.execute(
                    "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
                ).fetchall()
                == vectors_before
            )
            after = [hit.text for hit in store.search("alpha", 1, limit=6, embedder=embedder)]
            store.index(store.attach_to_project(3, project_docs), embedder=embedder)
            mine = {hit.path.name for hit in store.search("omega", 1, 6, embedder, 3)}
            others = {hit.path.name for hit in store.search("omega", 2, 6, embedder)}
            near_mine = searching.nearest(store._db, store.vectors, "omega", 1, embedder, 20, 3)
            near_others = searching.nearest(store._db, store.vectors, "omega", 2, embedder, 20)
            passages = store._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        finally:
            store.close()
        assert version == SCHEMA_VERSION and after == before
        assert "omega.txt" in mine and others == set()
        # The chat's vectors and its project's, ranked together; none for another chat.
        assert len(near_mine) == passages == 2 and near_others == []
