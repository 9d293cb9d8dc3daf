"""Fixtures of the `ui` tests: window-less conversations, views, first-run windows, a bad server."""

from __future__ import annotations

import pytest

from llamachat.config import Config
from llamachat.history.store import History
from llamachat.tests.support import (
    SKILL_FINANCE,
    SKILL_WEATHER,
    HostileServer,
    firstrun_config,
    make_app,
    write_skill,
)
from llamachat.ui import ChatWindow
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.views.messages import MessagesView


@pytest.fixture
def messages_view(qtbot):
    """A shown MessagesView, 800x600."""

    view = MessagesView()
    qtbot.addWidget(view)
    view.resize(800, 600)
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.fixture
def conversation(qtbot, router, tmp_path):
    """Build window-less Conversations on a real History and the scripted router."""

    skills_root = tmp_path / "skills"
    write_skill(skills_root, "finance-cli", SKILL_FINANCE)
    write_skill(skills_root, "weather", SKILL_WEATHER)
    history = History(tmp_path / "history.db")
    built: list = []

    def make(**options):
        cfg = Config(
            router_url=router.url,
            default_model="test-model",
            skills_dir=skills_root,
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            manage_server=False,
            **{"warm_cache": False, **options.pop("cfg", {})},
        )
        app = make_app(cfg, history)
        chat = Conversation(app, model="test-model", **options)
        built.append((chat, app))
        return chat, history

    yield make
    for chat, app in built:
        chat.stop()
        assert chat.threads.wait_all(10_000)
        app.close()
    history.close()


@pytest.fixture
def firstrun(qtbot, tmp_path):
    """Build ChatWindows on real temp folders (no model list awaited)."""

    history = History(tmp_path / "history.db")
    built: list = []

    def make(**options):
        window = ChatWindow(make_app(firstrun_config(tmp_path, **options), history))
        qtbot.addWidget(window)
        window.show()
        built.append(window)
        return window

    yield make
    for window in built:
        window.close()
        window.app.close()
    history.close()


@pytest.fixture
def hostile_server():
    server = HostileServer()
    yield server
    server.close()
