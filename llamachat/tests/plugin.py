"""The fixtures every test shares: a pytest plugin (`-p llamachat.tests.plugin`).

Every test gets a private HOME and XDG tree (`isolated_home`, autouse) and Python's cycle
collector on the GUI thread. The scripted router (`router`) and real windows on it
(`chat_window`, `quick`) serve both `llamachat/tests` and the end-to-end suite
`test_llamachat.py`; fixtures of one area are in that area's `conftest.py`, the helpers in
`llamachat.tests.support`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.dev.scripted_router import ScriptedRouter
from llamachat.history.store import History
from llamachat.tests.support import (
    SKILL_FINANCE,
    SKILL_WEATHER,
    make_app,
    quick_skills_folder,
    write_skill,
)
from llamachat.ui import ChatWindow
from llamachat.ui.chat.worker import collect_garbage_on_gui_thread
from llamachat.ui.quick import QuickWindow

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True, scope="session")
def garbage_collected_on_gui_thread(qapp) -> None:
    """Python's cycle collector runs on the GUI thread from the first test on, as in the
    app (its windows arrange it). Left to a worker thread, it destroys a test's dropped
    Qt objects there: a QFileSystemWatcher's notifier then floods the log forever
    ("Invalid socket ..."), hanging a run of the tests that made no window first."""
    collect_garbage_on_gui_thread()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and XDG tree for every test."""
    home = tmp_path / "home"
    for sub in ("", ".config", ".local/share", ".cache", ".local/state", "runtime"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "runtime").chmod(0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local/state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(home / "runtime"))
    monkeypatch.delenv("LLAMACHAT_CONFIG", raising=False)
    return home


@pytest.fixture
def router():
    """A started ScriptedRouter serving one loaded model, "test-model"."""

    with ScriptedRouter() as scripted:
        yield scripted


@pytest.fixture
def chat_window(qtbot, router, tmp_path):
    """Build ChatWindows on real temp folders against the scripted router."""

    opened: list = []
    skills_root = tmp_path / "skills"
    write_skill(skills_root, "finance-cli", SKILL_FINANCE)
    write_skill(skills_root, "weather", SKILL_WEATHER)

    def make(*, history=None, url: str | None = None, listed: bool = True, **options):
        values = {
            "router_url": url or router.url,
            "default_model": "test-model",
            "skills_dir": skills_root,
            "history_path": tmp_path / "history.db",
            "prompts_dir": tmp_path / "prompts",
            "warm_cache": False,
            **options,
        }
        cfg = Config(**values)
        store = history or History(cfg.history_path)
        window = ChatWindow(make_app(cfg, store))
        qtbot.addWidget(window)
        window.show()
        if listed:
            qtbot.waitUntil(lambda: bool(window.models()), timeout=5000)
        opened.append((window, store))
        return window, store

    yield make
    for window, store in opened:
        window.close()
        window.app.close()
    for _window, store in opened:
        store.close()


@pytest.fixture
def quick(qtbot, router, tmp_path):
    """Build QuickWindows on real temp folders against the scripted router."""

    skills_root = quick_skills_folder(tmp_path)
    built: list = []
    history = History(tmp_path / "history.db")

    def make(**options):
        values = {
            "router_url": router.url,
            "skills_dir": skills_root,
            "history_path": tmp_path / "history.db",
            "prompts_dir": tmp_path / "prompts",
            "manage_server": False,
            "warm_cache": False,
            **options,
        }
        window = QuickWindow(make_app(Config(**values), history))
        qtbot.addWidget(window)
        built.append(window)
        return window, history

    yield make
    for window in built:
        window.close()
        window.app.close()
    history.close()
