"""The tests of `llamachat.ui.views.search_toggle`."""

from __future__ import annotations


class TestSearchToggle:
    """The Web search toggle: offer the model web search, or say why it cannot search."""

    def test_search_toggle_is_greyed_out_and_says_why_for_a_model_without_tools(
        self, chat_window, router, qtbot
    ) -> None:
        """A model whose template takes no tools cannot search: the toggle is greyed out
        (the choice kept), its tooltip and the status line say why, and the request has no
        date note (it is there for web search)."""
        router.models["test-model"].tools = False
        window, _history = chat_window(search_url="http://127.0.0.1:9/search", search_enabled=True)
        toggle = window.web_search
        assert toggle.is_on()
        qtbot.waitUntil(lambda: not toggle.action.isEnabled())
        assert toggle.action.isChecked() and toggle.is_on()
        assert toggle.action.toolTip().startswith("Web search is off for this model: this")
        assert window.statusBar().currentMessage() == (
            "Web search is off for test-model: this model's chat template cannot take tools."
        )
        request = window.chat.next_turn()
        assert [part.name for part in request.system] == ["system"] and request.tools == ()
