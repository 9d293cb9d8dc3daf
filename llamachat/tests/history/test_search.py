"""The tests of `llamachat.history.search`."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from llamachat.history.search import SearchFilter, span_start
from llamachat.history.store import History


class TestSearch:
    """Finding sessions: full-text search, the session list and its filters."""

    def test_history_search_matches_words_and_prefixes_with_a_snippet(self, tmp_path: Path) -> None:

        history = History(tmp_path / "h.db")
        llamas = history.create_session("chat")
        history.add_message(llamas, "user", "Where do llamas live?")
        history.add_message(llamas, "assistant", "In the Andes mountains.", reasoning="geography")
        other = history.create_session("oneshot")
        history.add_message(other, "user", "What is a café?")
        assert [s["id"] for s in history.search("andes")] == [llamas]
        assert [s["id"] for s in history.search("llam")] == [llamas]
        assert [s["id"] for s in history.search("geography")] == [llamas]
        assert [s["id"] for s in history.search("cafe")] == [other]
        # Every word must occur in one message: "live" and "mountains" are in two.
        assert history.search("llamas live") and not history.search("live mountains")
        hit = history.search("mountains")[0]
        assert "mountains" in hit["snippet"] and hit["mode"] == "chat"
        assert len(history.search("a")) == 2  # one row per session, not per message

    def test_history_search_finds_titles_first_with_message_snippets(self, tmp_path: Path) -> None:
        """A title holding every word finds its chat (listed first, newest first); a chat
        matching in its messages too keeps that message's snippet; deleted chats stay out."""

        history = History(tmp_path / "h.db")
        renamed = history.create_session("chat")
        history.add_message(renamed, "user", "something unrelated")
        history.rename_session(renamed, "Trip to 50% Peru_plans")
        both = history.create_session("chat")
        history.add_message(both, "user", "Peru trip budget")
        history.add_message(both, "assistant", "A Peru trip costs little.")
        only_message = history.create_session("chat")
        history.add_message(only_message, "user", "tell me about llamas")
        history.add_message(only_message, "assistant", "Llamas come from Peru.")
        assert [s["id"] for s in history.search("peru trip")] == [both, renamed]
        hits = {s["id"]: s["snippet"] for s in history.search("peru")}
        assert list(hits) == [both, renamed, only_message]
        assert hits[renamed] == "" and "Peru" in hits[both] and "Peru" in hits[only_message]
        # LIKE's wildcards are matched literally.
        assert [s["id"] for s in history.search("50%")] == [renamed]
        assert [s["id"] for s in history.search("p_ru")] == []
        assert [s["id"] for s in history.search("peru_p")] == [renamed]
        history.delete_session(renamed)
        assert renamed not in [s["id"] for s in history.search("peru")]
        assert len(history.search("peru", limit=1)) == 1

    def test_history_search_follows_updates_and_deletions(self, tmp_path: Path) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat")
        history.add_message(sid, "user", "hello")
        reply = history.add_message(sid, "assistant", "", status="streaming")
        assert history.search("zebra") == []
        history.update_message(reply, content="a zebra", status="complete")
        assert [s["id"] for s in history.search("zebra")] == [sid]
        history.delete_branch(reply)
        assert history.search("zebra") == []

    @pytest.mark.parametrize(
        "query",
        [
            '"foo',
            "AND (",
            "OR",
            "NOT",
            "a:b",
            "col:",
            "*",
            "^x",
            "NEAR(a b)",
            "(((",
            "'",
            '""',
            "-",
            "a - b",
            "  ",
            "",
            "\x00",
            "content:llama",
            "llama*",
            "{content reasoning}: x",
        ],
    )
    def test_history_search_never_raises_on_query_syntax(self, tmp_path: Path, query: str) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat")
        history.add_message(sid, "user", 'quote " and AND ( parens a:b content llama')
        assert isinstance(history.search(query), list)
        assert [s["id"] for s in history.search('"quote')] == [sid]
        assert [s["id"] for s in history.search("AND (")] == [sid]

    def test_history_list_sessions_pages_10000_sessions_newest_first_by_index(
        self, tmp_path: Path
    ) -> None:

        path = tmp_path / "h.db"
        History(path).close()
        conn = sqlite3.connect(path)
        conn.executemany(
            "INSERT INTO sessions (mode, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
            [("oneshot" if n % 10 == 0 else "chat", f"s{n}", n, n) for n in range(10_000)],
        )
        conn.commit()
        plan = " ".join(
            row[-1]
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM sessions WHERE deleted_at IS NULL"
                " ORDER BY updated_at DESC, id DESC LIMIT 50 OFFSET 100"
            )
        )
        conn.close()
        assert "sessions_live_by_update" in plan and "TEMP B-TREE" not in plan
        history = History(path)
        assert history.count_sessions() == 10_000
        first = history.list_sessions(limit=50)
        assert [s["title"] for s in first[:3]] == ["s9999", "s9998", "s9997"]
        second = history.list_sessions(limit=50, offset=50)
        assert second[0]["title"] == "s9949" and len(second) == 50
        assert history.list_sessions(limit=50, offset=9_990)[-1]["title"] == "s0"
        assert {s["mode"] for s in history.list_sessions(mode="oneshot", limit=20)} == {"oneshot"}
        assert history.list_sessions(mode="oneshot", limit=1)[0]["title"] == "s9990"

    def test_search_and_list_keep_to_a_filter_of_project_model_and_last_update(
        self, tmp_path: Path
    ) -> None:
        """A SearchFilter keeps a search (title and message hits) and the plain list to a
        project or none, a model (the chat's or a message's), a span of last update."""

        path = tmp_path / "history.db"
        history = History(path)
        work = history.projects.create("Work")
        in_work = history.create_session("chat", "qwen", project_id=work)
        history.add_message(in_work, "user", "alpaca notes")
        history.add_message(in_work, "assistant", "an alpaca", model="llama")
        loose = history.create_session("chat", "gemma")
        history.add_message(loose, "user", "alpaca farm")
        old = history.create_session("chat", "qwen")
        history.add_message(old, "user", "alpaca history")
        titled = history.create_session("chat", "qwen", title="Alpaca plans")
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86400, old)
            )
        conn.close()
        ids = lambda rows: [row["id"] for row in rows]
        assert history.models() == ["gemma", "llama", "qwen"]
        assert ids(history.search("alpaca")) == [titled, loose, in_work, old]
        assert ids(history.search("alpaca", matching=SearchFilter(project=work))) == [in_work]
        assert ids(history.search("alpaca", matching=SearchFilter(project=None))) == [
            titled,
            loose,
            old,
        ]
        # A message's model counts, as does the chat's.
        assert ids(history.search("alpaca", matching=SearchFilter(model="llama"))) == [in_work]
        assert ids(history.search("alpaca", matching=SearchFilter(model="qwen"))) == [
            titled,
            in_work,
            old,
        ]
        both = SearchFilter(project=None, model="qwen", updated="month")
        assert ids(history.search("alpaca", matching=both)) == [titled]
        assert ids(history.search("plans", matching=SearchFilter(project=work))) == []
        assert history.search("  ", matching=both) == []
        # An empty query: the list and its count keep to the filter, newest first.
        assert ids(history.list_sessions(matching=SearchFilter(model="qwen"))) == [
            titled,
            in_work,
            old,
        ]
        assert ids(history.list_sessions(matching=both)) == [titled]
        assert history.count_sessions(matching=SearchFilter(updated="month")) == 3
        assert history.count_sessions(matching=SearchFilter(project=None, updated="today")) == 2
        assert history.list_sessions(matching=SearchFilter(model="nobody")) == []
        now = time.time()
        midnight = time.localtime(span_start("today", now))
        assert (midnight.tm_hour, midnight.tm_min, midnight.tm_yday) == (
            0,
            0,
            time.localtime(now).tm_yday,
        )
        assert span_start("week", now) == now - 7 * 86400 and span_start("any") is None
        with pytest.raises(ValueError, match="updated must be one of"):
            SearchFilter(updated="fortnight")
        # The model filter reads the model's messages through an index, not every message.
        plan = history._read(
            "EXPLAIN QUERY PLAN SELECT session_id FROM messages WHERE model = ?", ("qwen",)
        )
        assert "messages_by_model" in " ".join(str(row[3]) for row in plan)
        history.close()
