"""The tests of `llamachat.ui.chat.compaction`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from llamachat import compact, turn
from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History
from llamachat.tests.support import (
    make_long_chat,
    overflow_buttons,
    prompt_tokens,
    send_and_wait,
    visible_widget_named,
)
from llamachat.ui.views.summary import SummaryView


class TestCompaction:
    """A conversation's side of a full context: its policy, compacting into a branch, trimming."""

    def test_compact_and_send_makes_a_branch_that_fits_and_keeps_every_original_message(
        self, chat_window, router, qtbot
    ) -> None:
        """ "Compact and send" (the panel's first way out): the model summarizes all but the
        last two exchanges; a new branch holds the summary block, the kept messages and the
        question, and fits; the original path is the other version, found and exported."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window()
        session_id = make_long_chat(history, 6, 150)
        original = history.messages(session_id)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        window.composer.set_text("and now?")
        window.send()
        assert window.overflow.isVisible() and not router.chat_requests()
        assert overflow_buttons(window.overflow)[0] == "Compact and send"
        router.script(Reply(content="Six questions about alpha."), Reply(content="Now this."))
        qtbot.mouseClick(
            visible_widget_named(window.overflow, QPushButton, "Compact and send"),
            Qt.MouseButton.LeftButton,
        )
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 2 and not window.is_streaming())
        summarizing, sent = (r.json for r in router.chat_requests())
        assert summarizing["messages"][0]["content"].startswith(compact.SUMMARY_PROMPT)
        assert "question 3 " in summarizing["messages"][1]["content"]
        assert "question 4 " not in summarizing["messages"][1]["content"]

        path = history.messages(session_id)
        assert [m["role"] for m in path] == ["system", *["user", "assistant"] * 3]
        assert path[0]["content"] == "Six questions about alpha."
        assert path[0]["versions"] == [original[0]["id"], path[0]["id"]]
        assert [m["content"] for m in path[1:5]] == [m["content"] for m in original[8:]]
        assert [m["content"] for m in path[5:]] == ["and now?", "Now this."]
        assert window.composer.text() == "" and not window.overflow.isVisible()
        assert sent["messages"][0]["content"].endswith(turn.summary_text(path[0]["content"]))
        assert [m["role"] for m in sent["messages"]] == [
            "system",
            *["user", "assistant"] * 2,
            "user",
        ]
        assert prompt_tokens(sent) + window.chat.context.reserve() <= 2048
        qtbot.waitUntil(lambda: window.chat.context.breakdown().get("summary") > 0)

        block = window.messages.views()[0]
        assert isinstance(block, SummaryView) and block.version_text() == "2/2"
        assert block.title.text() == "Summary of 8 earlier messages"
        assert not block.is_expanded()
        block.toggle.click()
        assert block.is_expanded()
        block.edit_button.click()
        block.editor.setPlainText("Edited summary.")
        block.save_button.click()
        assert history.messages(session_id)[0]["content"] == "Edited summary."
        assert window.chat.next_turn().messages()[0]["content"].endswith("Edited summary.")

        assert history.search("question 0")[0]["id"] == session_id
        assert len(history.export_json(session_id)["messages"]) == 12 + 7
        window.chat.show_version(original[0]["id"])
        assert [m["id"] for m in history.messages(session_id)] == [m["id"] for m in original]

    def test_compact_policy_compacts_by_itself_and_slash_compact_takes_a_focus(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow = "compact": a message that does not fit compacts the chat, then
        goes; `/compact <focus>` compacts again with the focus in the instructions."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session_id = make_long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(content="Summary one."), Reply(content="Answered."))
        send_and_wait(qtbot, window, "and now?")
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 2 and not window.is_streaming())
        assert not window.overflow.isVisible()
        assert history.messages(session_id)[-1]["content"] == "Answered."
        assert history.messages(session_id)[0]["content"] == "Summary one."

        router.script(Reply(content="Summary two."))
        send_and_wait(qtbot, window, "/compact keep the API decisions")
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 3)
        qtbot.waitUntil(lambda: history.messages(session_id)[0]["content"] == "Summary two.")
        instructions = router.chat_requests()[-1].json["messages"][0]["content"]
        assert instructions.endswith("Pay particular attention to: keep the API decisions")
        path = history.messages(session_id)
        assert len(path[0]["versions"]) == 3 and compact.summarized(path[0]) == 10
        assert window.messages.views()[0].title.text() == "Summary of 10 earlier messages"

    def test_trim_policy_leaves_the_oldest_messages_out_of_the_request_with_a_marker(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow = "trim": the oldest exchanges are not sent (the request really
        lacks them and fits), "N earlier messages not sent" shows, the chat keeps them all."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="trim")
        session_id = make_long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        send_and_wait(qtbot, window, "and now?")
        sent = router.chat_requests()[-1].json
        contents = [str(m["content"]) for m in sent["messages"]]
        left_out = window.chat.state.trimmed
        assert left_out >= 2 and left_out % 2 == 0
        assert not any(
            text.startswith(f"question {n} ") for text in contents for n in range(left_out // 2)
        )
        assert contents[1].startswith(f"question {left_out // 2} ") and contents[-1] == "and now?"
        assert prompt_tokens(sent) + window.chat.context.reserve() <= 2048
        assert window.trim_marker.isVisible()
        assert window.trim_marker.text().startswith(f"{left_out} earlier messages not sent")
        assert len(history.messages(session_id)) == 12 + 2

        window.new_session()
        assert window.chat.state.trimmed == 0 and not window.trim_marker.isVisible()

    def test_refuse_policy_and_the_chats_own_policy_in_its_parameters(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow = "refuse": nothing is sent, no panel, the reason stays shown; the
        chat's own choice in ⚙ wins over the config's, is saved with it and never sent."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="refuse")
        session_id = make_long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        window.composer.set_text("and now?")
        window.send()
        assert not router.chat_requests() and not window.overflow.isVisible()
        assert window.composer.text() == "and now?"
        assert "“refuse”" in window.problem_bar.text()

        combo = window.chat_params.panel.editors[compact.CHAT_KEY]
        combo.setCurrentText("trim")
        assert history.session_params(session_id) == {compact.CHAT_KEY: "trim"}
        window.send()
        sent = router.chat_requests()[-1].json
        assert window.chat.state.trimmed > 0 and compact.CHAT_KEY not in sent

    def test_compacting_stops_with_the_chat_as_it_was_and_the_message_back(
        self, chat_window, router, qtbot
    ) -> None:
        """Stop while the summary streams: nothing changes in the chat, the question is back
        in the composer."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session_id = make_long_chat(history, 6, 150)
        original = history.messages(session_id)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(content=["Sum", "mary"], stall_after=1))
        window.composer.set_text("and now?")
        window.send()
        assert window.chat.compaction.running() and window.composer.text() == ""
        qtbot.waitUntil(
            lambda: (
                "Compacting: summarizing 8 earlier messages" in window.statusBar().currentMessage()
            )
        )
        window.stop()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert history.messages(session_id) == original
        assert window.composer.text() == "and now?"

    def test_a_summary_longer_than_the_context_is_refused_and_the_status_line_ends(
        self, chat_window, router, qtbot
    ) -> None:
        """A summary that, with the kept messages, does not fit the chat's context either
        (a server ignoring max_tokens) is refused: the chat is as it was, the question
        back; "Compacting… (Stop ends it)" leaves the status bar (issue 37, items 6, 11)."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session_id = make_long_chat(history, 6, 150)
        original = history.messages(session_id)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(content=" ".join(f"point{n}" for n in range(3000))))
        window.composer.set_text("and now?")
        window.send()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert history.messages(session_id) == original
        assert "the summary and the kept messages take about" in window.problem_bar.text()
        assert window.composer.text() == "and now?"
        assert "Compacting" not in window.statusBar().currentMessage()
        assert len(router.chat_requests()) == 1

    def test_a_failed_compaction_takes_its_progress_out_of_the_status_bar(
        self, chat_window, router, qtbot
    ) -> None:
        """The summarizing request fails: "Compacting… (Stop ends it)" does not stay in the
        status bar, the failure is said (issue 37, item 11)."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session_id = make_long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(status=500, error={"message": "out of memory"}))
        window.composer.set_text("and now?")
        window.send()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert "could not be compacted" in window.problem_bar.text()
        assert "Compacting" not in window.statusBar().currentMessage()

    def test_the_question_waiting_for_a_compaction_stays_the_chats_draft(
        self, chat_window, router, qtbot
    ) -> None:
        """While the chat is compacted, the question that waits is still the chat's draft
        in the history file (a kill -9 then loses nothing); once it is sent, it is not."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        sent, stopped = make_long_chat(history, 6, 150), make_long_chat(history, 6, 150)
        window.open_session(sent)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(content="Summary."), Reply(content="Answered."))
        window.composer.set_text("the-sent-question")
        window.send()
        qtbot.waitUntil(lambda: history.messages(sent)[-1]["content"] == "Answered.")
        assert history.messages(sent)[-2]["content"] == "the-sent-question"
        qtbot.waitUntil(lambda: history.draft(sent) == "")

        window.open_session(stopped)
        router.script(Reply(content=["Sum", "mary"], stall_after=1))
        window.composer.set_text("the-waiting-question")
        window.send()
        assert window.chat.compaction.running() and window.composer.text() == ""
        window.drafts.save()  # the pause after the composer emptied
        # What a process started after a kill -9 reads from the file.
        with History(history.path) as after_a_kill:
            assert after_a_kill.draft(stopped) == "the-waiting-question"
        window.stop()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert window.composer.text() == "the-waiting-question"
        assert history.draft(stopped) == "the-waiting-question"

    def test_policy_compact_with_nothing_to_compact_shows_what_can_help(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow "compact" and nothing (more) to compact: the panel, not
        "Nothing to compact"; after a compaction the refusal says the chat was compacted
        (issue 38, item 8)."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session = make_long_chat(history, 4, 20)
        window.open_session(session)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and watch.breakdown().exact)
        router.script(Reply(content="- a summary"))
        long = "word " * 1700
        window.composer.set_text(long)
        window.send()
        qtbot.waitUntil(lambda: window.overflow.isVisible(), timeout=10_000)
        said = window.overflow.text.text()
        assert said.startswith("Not sent, even with the chat compacted"), said
        assert "Compacting cannot help" in said
        assert window.composer.text() == long
        window.overflow.hide()
        window.send()
        assert window.overflow.isVisible() and "Nothing to compact" not in said

    def test_changing_the_chats_policy_sends_the_trimmed_messages_again(
        self, chat_window, router, qtbot
    ) -> None:
        """ "N earlier messages not sent" goes once the chat's policy is no longer "trim"."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="trim")
        session_id = make_long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        send_and_wait(qtbot, window, "and now?")
        assert window.chat.state.trimmed >= 2 and window.trim_marker.isVisible()
        window.chat.set_params({**window.chat.params(), compact.CHAT_KEY: compact.ASK})
        assert window.chat.state.trimmed == 0 and not window.trim_marker.isVisible()

    def test_compacting_shows_the_reading_then_the_summary_as_it_is_written(
        self, chat_window, router, qtbot
    ) -> None:
        """While the model reads the chat the compaction shows a reading bar as a reply
        does; the view goes when it ends (issue 38, item 5)."""
        window, history = chat_window()
        session_id = make_long_chat(history, 6, 20)
        window.open_session(session_id)
        router.script(Reply(content=["- one ", "- two"], stall_after=0))
        assert window.chat.compaction.compact()
        view = window.compacting
        qtbot.waitUntil(lambda: view.isVisible() and view.reading.isVisible())
        assert view.reading.label.text().startswith("Reading ")
        assert "summarizing 8 earlier messages" in view.title.text()
        assert not view.text.isVisible()
        router.release()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert not view.isVisible()
        assert history.messages(session_id)[0]["content"] == "- one - two"

    def test_compacting_shows_the_summary_as_it_is_written(
        self, chat_window, router, qtbot
    ) -> None:
        """The summary's text shows as it comes, in place of the reading bar."""
        window, history = chat_window()
        session_id = make_long_chat(history, 6, 20)
        window.open_session(session_id)
        router.script(Reply(content=["- one ", "- two"], stall_after=2))
        assert window.chat.compaction.compact()
        view = window.compacting
        qtbot.waitUntil(lambda: view.text.isVisible(), timeout=5000)
        assert view.text.toPlainText() == "- one " and not view.reading.isVisible()
        router.release()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
