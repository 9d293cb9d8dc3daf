"""The tests of `llamachat.ui.memory.memory_panel`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import send_and_wait


class TestMemoryPanel:
    """Every memory by scope, searched, edited, pinned and deleted; what this chat does with it."""

    def test_the_panel_searches_edits_pins_and_deletes_and_the_requests_follow(
        self, chat_window, router, qtbot
    ) -> None:
        window, history = chat_window(memory_enabled=True)
        work = history.projects.create("Work")
        history.memories.add("Uses Fedora <b>41</b>")
        history.memories.add("The API is FastAPI", project_id=work)
        panel = window.memories.open_panel()
        assert panel.rows_text() == [
            ("Uses Fedora <b>41</b>", "", "you", "sent with the next message"),
            ("The API is FastAPI", "", "you", "not in this chat's scope"),
        ]
        panel.search.setText("fastapi")
        assert [row[0] for row in panel.rows_text()] == ["The API is FastAPI"]
        panel.search.clear()

        fedora = history.memories.listed()[0]["id"]
        panel.select(fedora)
        panel.pin_button.click()
        assert history.memories.get(fedora)["pinned"]  # type: ignore[index]
        assert panel.rows_text()[0][:2] == ("Uses Fedora <b>41</b>", "pinned")
        assert panel.pin_button.text() == "Unpin"
        item = next(i for i in panel.items() if i.text(0).startswith("Uses Fedora"))
        item.setText(0, "Uses Fedora 42")  # as an edit in place ends
        assert history.memories.get(fedora)["text"] == "Uses Fedora 42"  # type: ignore[index]
        router.script(Reply(content="OK."))
        send_and_wait(qtbot, window, "Hi")
        assert "- Uses Fedora 42" in router.chat_requests()[-1].json["messages"][0]["content"]

        panel.select(fedora)
        panel.delete_button.click()
        assert [m["text"] for m in history.memories.listed(every=True)] == ["The API is FastAPI"]
        router.script(Reply(content="OK."))
        send_and_wait(qtbot, window, "Again")
        sent = router.chat_requests()[-1].json["messages"]
        assert not any("Fedora" in m["content"] for m in sent if m["role"] == "system")

    def test_the_panel_says_what_is_left_out_and_why_memory_is_off(
        self, chat_window, router, qtbot
    ) -> None:
        window, history = chat_window(memory_enabled=True, memory_tokens=14)
        history.memories.add("A first fact about the garden")
        history.memories.add("A second fact about the kitchen")
        panel = window.memories.open_panel()
        assert [row[3] for row in panel.rows_text()] == [
            "left out: over memory_tokens",
            "sent with the next message",
        ]
        assert "1 left out of this chat's prompt" in panel.summary.text()

        panel.chat_switch.setChecked(False)
        assert not window.chat.state.memory_on
        assert panel.state_line.text().startswith("Memory is off in this chat")
        assert [row[3] for row in panel.rows_text()] == ["", ""]

        window.chat.start_temporary()
        panel.update_view()
        assert panel.state_line.text() == "A temporary chat reads and writes no memory."
        assert not panel.chat_switch.isEnabled() and not panel.add_button.isEnabled()

    def test_with_memory_off_in_the_configuration_the_panel_offers_to_turn_it_on(
        self, chat_window, qtbot
    ) -> None:
        window, _history = chat_window()
        panel = window.memories.open_panel()
        assert panel.state_line.text().startswith("Memory is off (memory_enabled")
        assert panel.turn_on.isVisible()
        panel.turn_on.click()
        qtbot.waitUntil(lambda: window.app.config.memory_enabled)
        assert not panel.turn_on.isVisible()
        assert "memory_enabled = true" in window.app.config.path.read_text(encoding="utf-8")
