"""The tests of `llamachat.ui.chat.builder`."""

from __future__ import annotations

import httpx


class TestBuilder:
    """One conversation's next request, built whole with `turn` for sending and for the meter."""

    def test_window_sends_the_turn_the_meter_counted_byte_for_byte(
        self, chat_window, router, qtbot
    ) -> None:
        """The request on the wire is the Turn the meter counted (a skill, the tools, the
        chat's parameters, llama.cpp's fields), byte for byte; a retry sends the Turn the
        same builder gives for that point of the chat."""

        window, history = chat_window()
        chat, watch = window.chat, window.chat.context
        chat.set_params({"temperature": 0.25})
        chat.load_skill("weather")
        window.composer.set_text("Will it rain?")

        def counted() -> bool:
            request = watch.request()
            return (
                request is not None
                and "skill:weather" in [part.name for part in request.system]
                and watch.breakdown().exact
                and watch.breakdown().get("user") > 0
            )

        qtbot.waitUntil(counted)
        request = watch.request()
        assert request is not None and request.tools
        assert request.params["temperature"] == 0.25 and request.params["return_progress"]
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        sent = router.chat_requests()[-1]
        assert sent.body == httpx.Request("POST", router.url, json=request.body()).content

        reply = history.messages(window.session_id)[-1]
        assert chat.retry(reply["id"])
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        again = chat.next_turn(before=reply["id"])
        assert router.chat_requests()[-1].body == sent.body
        assert sent.body == httpx.Request("POST", router.url, json=again.body()).content

    def test_a_projects_instructions_join_each_of_its_chats_system_message(
        self, qtbot, chat_window, router
    ) -> None:
        """The instructions written in a project's dialog go into the system message of every
        chat in it, after the preset, the same bytes each turn; a chat moved out loses them."""
        from llamachat.tests.support import send_and_wait

        window, history = chat_window()
        work = history.projects.create("Work")
        dialog = window.sidebar.edit_project(work)
        dialog.instructions.setPlainText("Answer in French.")
        dialog.accept()
        assert history.projects.get(work)["instructions"] == "Answer in French."
        window.sessions.new(work)
        send_and_wait(qtbot, window, "hello")
        system = router.chat_requests()[-1].json["messages"][0]
        assert system["role"] == "system" and system["content"].endswith("\n\nAnswer in French.")
        send_and_wait(qtbot, window, "again")
        assert router.chat_requests()[-1].json["messages"][0] == system
        history.projects.move(window.session_id, None)
        send_and_wait(qtbot, window, "out")
        assert "Answer in French." not in router.chat_requests()[-1].json["messages"][0]["content"]
