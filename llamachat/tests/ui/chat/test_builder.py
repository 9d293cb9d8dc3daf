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
