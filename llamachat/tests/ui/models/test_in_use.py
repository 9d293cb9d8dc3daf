"""The tests of `llamachat.ui.models.in_use`."""

from __future__ import annotations

from llamachat.ui.chat.conversation import ONESHOT, Conversation
from llamachat.ui.models.in_use import unload_notice


class TestModelsInUse:
    """Which model each conversation uses, and what a load that may unload one says."""

    def test_each_conversation_says_its_model_and_leaves_when_it_closes(
        self, conversation, qtbot
    ) -> None:
        """A chat and a quick window's conversation are each where their model is used,
        following a change of model, until they close."""

        chat, _history = conversation()
        in_use = chat.app.models_in_use
        quick = Conversation(chat.app, mode=ONESHOT, model="alpha")
        assert in_use.users("test-model") == ["the chat window"]
        assert in_use.users("alpha") == ["the quick window"]
        assert in_use.users("alpha", besides=quick) == []
        quick.model = "test-model"
        assert in_use.users("test-model") == ["the chat window", "the quick window"]
        assert in_use.users("alpha") == []
        quick.close()
        assert in_use.users("test-model") == ["the chat window"]

    def test_the_notice_names_the_model_a_load_unloads_and_who_uses_it(self) -> None:
        """One model the router may unload: named; several: the router's rule and each in
        use; none in use: nothing to say."""

        users = {"alpha": ["the quick window"], "beta": ["the chat window"]}.get

        def where(model: str) -> list[str]:
            return users(model) or []

        assert unload_notice(["smol"], ["alpha"], where) == (
            "Loading smol will unload alpha, used by the quick window."
        )
        assert unload_notice(["smol"], ["alpha", "beta", "gamma"], where) == (
            "Loading smol will unload one of alpha, beta, gamma (the router unloads the one "
            "used longest ago): alpha is used by the quick window; beta is used by the chat "
            "window."
        )
        assert unload_notice(["smol"], ["gamma"], where) == ""
