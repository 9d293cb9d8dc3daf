"""The tests of `llamachat.ui.models.choice`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.ui.views.figures import ReadingProgress


class TestChoice:
    """The chat window's model: the picker's choice applied to the chat, and the star saved."""

    def test_chat_whose_model_the_server_lacks_goes_on_with_the_model_in_use(
        self, chat_window, qtbot
    ) -> None:
        # A chat imported from ChatGPT names "gpt-4o": opening it must not make every
        # reply fail with "model not found".
        window, history = chat_window()
        away = history.create_session("chat", "gpt-4o")
        history.add_message(away, "user", "hi")
        here = history.create_session("chat", "test-model")
        history.add_message(here, "user", "hello")
        assert window.open_session(away)
        assert window.current_model() == "test-model"
        message = window.statusBar().currentMessage()
        assert "was with gpt-4o, which the server does not offer" in message
        assert "goes on with test-model" in message
        assert history.get_session(away)["model"] == "gpt-4o"
        assert window.open_session(here) and window.current_model() == "test-model"

    def test_a_reply_whose_model_loads_says_loading_with_the_routers_progress(
        self, chat_window, qtbot
    ) -> None:
        """Before the prompt is read, the reply says "Loading <model>" with the load's
        progress from the router's events; then the answer comes as usual (issue 38,
        item 6)."""
        with ScriptedRouter([Model("test-model", "unloaded")], load_delay=1.0) as cold:
            window, _history = chat_window(url=cold.url)
            cold.script(Reply(content="Hi."))
            window.composer.set_text("hello")
            window.send()
            view = window.messages.last_assistant()
            qtbot.waitUntil(lambda: view.findChild(ReadingProgress) is not None)
            reading = view.findChild(ReadingProgress)
            qtbot.waitUntil(lambda: reading.label.text() == "Loading test-model… 50%")
            assert reading.isVisible() and reading.bar.value() == 50
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
            assert view.content() == "Hi." and not reading.isVisible()

    def test_a_chat_reopened_at_start_with_a_model_not_offered_goes_on_with_one_that_is(
        self, qtbot, chat_window, tmp_path
    ) -> None:
        """The chat opened last comes back before the models are listed; when its model (an
        import's gpt-4o) is not offered, the listing puts the model in use back and says so."""
        from llamachat.history.store import History

        history = History(tmp_path / "history.db")
        chat = history.create_session("chat", "gpt-4o", title="imported")
        history.add_message(chat, "user", "hi")
        history.mark_opened(chat)
        window, _ = chat_window(history=history)
        assert window.session_id == chat
        qtbot.waitUntil(lambda: window.current_model() == "test-model", timeout=5000)
        assert "gpt-4o, which the server does not offer" in window.statusBar().currentMessage()
