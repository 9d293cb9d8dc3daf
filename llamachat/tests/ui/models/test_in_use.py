"""The tests of `llamachat.ui.models.in_use`."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPlainTextEdit

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.tests.support import type_message, visible_widget_named
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


class TestUnloadGuard:
    """A send whose model the router must load, at its limit, says what it may unload."""

    @pytest.fixture
    def router(self):
        """A router holding two models at most, both taken; a third it must load."""

        models = [Model("test-model", "loaded"), Model("alpha", "loaded"), Model("smol")]
        with ScriptedRouter(models, models_max=2) as scripted:
            yield scripted

    def test_a_send_that_may_unload_another_windows_model_is_held_once(
        self, chat_window, router, qtbot
    ) -> None:
        """The chat's model must load and the router may unload the quick window's: Send
        says so and sends nothing; Send again goes (the person chose to)."""

        window, _history = chat_window()
        quick = Conversation(window.app, mode=ONESHOT, model="alpha")
        qtbot.waitUntil(lambda: window.model_picker.status("smol") == "unloaded", timeout=5000)
        qtbot.waitUntil(lambda: window.unload_guard.limit == 2, timeout=5000)
        window.chat.model = "smol"
        router.script(Reply(content="Loaded and answering."))
        type_message(qtbot, window, "Hello?")
        editor = visible_widget_named(window, QPlainTextEdit, "Message")
        qtbot.keyClick(editor, Qt.Key.Key_Return)
        said = window.statusBar().currentMessage()
        assert said.startswith("Loading smol will unload one of test-model, alpha")
        assert "alpha is used by the quick window" in said
        assert "test-model is used by the chat window" not in said  # this chat leaves it
        assert router.chat_requests() == [] and not window.composer.is_empty()
        qtbot.keyClick(editor, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 1, timeout=5000)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=15000)
        quick.close()
