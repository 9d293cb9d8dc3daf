"""The tests of `llamachat.ui.models.choice`."""

from __future__ import annotations


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
