"""The llamachat test suite.

Real parts throughout: HTTP to a scripted OpenAI-compatible router on 127.0.0.1
(and to the real llama-server where it is installed), real SQLite files, real
files on disk, real Qt widgets under QT_QPA_PLATFORM=offscreen. Every test runs
with HOME and the XDG folders pointed at its own temporary directory, so nothing
here reads or writes the developer's own configuration, history or skills.

One class per module or feature area of the package, named after it (`TestConfig`,
`TestHistory`, `TestClient`, ... `TestSidebar`, `TestChatWindow`), in the order of its
layers: a behaviour's tests sit with the code that owns it, its faults included. The fixtures and helpers live in the pytest plugin
`llamachat.dev.pytest_plugin`, which pyproject.toml loads.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime as dt
import gc
import inspect
import io
import itertools
import json
import logging
import os
import pkgutil
import random
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import sys as _sys
import threading
import time
import tomllib
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from PySide6.QtCore import (
    QMimeData,
    QModelIndex,
    QObject,
    QPoint,
    QPointF,
    QRect,
    QSize,
    Qt,
    QThread,
    QTimer,
    QUrl,
    Slot,
)
from PySide6.QtGui import (
    QContextMenuEvent,
    QDesktopServices,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QImage,
    QKeySequence,
    QPalette,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFormat,
)
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QToolButton,
    QWidget,
)

import llamachat
from llamachat import __version__, cli, compact, config, context, qt_platform, skills, tools, turn
from llamachat.__main__ import _act, find_router, load_or_create_config, main
from llamachat.config import Config, ProviderConfig
from llamachat.dev import bench_skills, structure
from llamachat.dev.bench_render import sample_tokens
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter, ToolCall, render
from llamachat.dev.skill_corpus import CORPUS
from llamachat.history.search import SearchFilter, span_start
from llamachat.history.store import (
    MIGRATIONS,
    History,
    HistoryError,
    HistoryUnavailable,
    ImportCancelled,
    import_chats,
    import_file,
)
from llamachat.prompts import DEFAULT_NAME, DEFAULT_TEXT, PromptError, Prompts
from llamachat.router import client as backend
from llamachat.router.binary import find_binary, launch_environment, wheel_binary
from llamachat.router.client import Client, ServerError, embeddings
from llamachat.router.errors import ModelFileError, RouterUnavailable, ServerLocked, ServerNotFound
from llamachat.router.lock import default_lock_path
from llamachat.router.model_files import add_model_file, reload_models, set_preset_context
from llamachat.router.models import ModelInfo, Models
from llamachat.router.server import ManagedServer, RotatingLog, ensure_router, free_port
from llamachat.skills import SkillStore, system_part
from llamachat.ui import ChatWindow, instance, tasks, theme
from llamachat.ui.app import CONFIGURED, READY, ExceptionHook
from llamachat.ui.chat import session as controller
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.chat.worker import (
    FRAME_INTERVAL_MS,
    MAX_READ_WAIT_MS,
    StreamWorker,
    WorkerThreads,
    collect_garbage_on_gui_thread,
)
from llamachat.ui.instance import RunningInstance, payload, socket_name
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.quick import WIDTH, QuickWindow
from llamachat.ui.router_guide import ServerLogDialog
from llamachat.ui.settings import SettingsDialog
from llamachat.ui.shortcuts import SHORTCUTS, ShortcutsDialog, install
from llamachat.ui.skills.panel import SkillsPanel, SkillsWatcher
from llamachat.ui.theme import apply_theme
from llamachat.ui.tray import Tray
from llamachat.ui.views import chips as skills_chips
from llamachat.ui.views.composer import AttachmentError, file_attachment
from llamachat.ui.views.document import DocumentWriter as _DocumentWriter
from llamachat.ui.views.figures import ReadingProgress
from llamachat.ui.views.markdown import (
    BREAK,
    DARK,
    LIGHT,
    MAX_RUN,
    StreamingMarkdown,
    break_text_runs,
    render_markdown,
)
from llamachat.ui.views.message import MessageView, open_link
from llamachat.ui.views.meter import ContextMeter
from llamachat.ui.views.overflow import OverflowPanel, raised_context
from llamachat.ui.views.popup import above
from llamachat.ui.views.presets import CUSTOM_LABEL, PresetPicker
from llamachat.ui.views.session_list import SESSION_MIME, SessionListModel, marked_html
from llamachat.ui.views.sidebar import SessionSidebar
from llamachat.ui.views.summary import SummaryView

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from llamachat.dev.pytest_plugin import (
    _OK_CHUNK,
    _SIGKILL_CHILD,
    HOSTILE,
    QUICK_SKILL_WEATHER,
    SKILL_WEATHER,
    SMOL_FILE,
    SMOL_ID,
    TURN_SKILL_ZETA,
    _answered,
    _app,
    _app_cfg_file,
    _ask,
    _ask_with,
    _button,
    _button_label,
    _by_name,
    _chat,
    _chrome_history,
    _chrome_models,
    _chrome_registry,
    _chrome_skill,
    _click_session,
    _clock_tool,
    _combo_ids,
    _completions,
    _config_error,
    _fake_pyside,
    _fake_server,
    _fault_big_text,
    _fault_cli,
    _fault_damage,
    _fault_file_bytes,
    _fault_health_server,
    _fault_history_with_chat,
    _fault_raw_router,
    _fault_row,
    _fault_start,
    _fault_status_label,
    _fault_stream_outcome,
    _fault_write_config,
    _firstrun_button,
    _firstrun_buttons,
    _firstrun_cfg,
    _firstrun_dead_url,
    _firstrun_from_thread,
    _firstrun_unstarted_server,
    _good_export,
    _highlighted,
    _instance_cfg,
    _live_group_members,
    _llama_chat,
    _llamachat,
    _long_chat,
    _longest_unbroken_run,
    _mcp_allow,
    _mcp_answer,
    _mcp_bin,
    _mcp_faulty_toml,
    _mcp_time_toml,
    _mcp_window,
    _models_folder,
    _models_router,
    _need,
    _nested,
    _oneshots,
    _outside_text_places,
    _overflow_buttons,
    _pdf_skill,
    _png,
    _problem_for,
    _prompt_tokens,
    _put_skill,
    _quick_ask,
    _quick_config_file,
    _quick_named,
    _quick_part,
    _quick_skills,
    _real_assets,
    _refuses_connections,
    _search_cfg,
    _seed_schema_db,
    _send,
    _shown_text,
    _skill_md,
    _skill_part,
    _skill_store,
    _sse_objects,
    _start_instance,
    _status,
    _stop,
    _stream_markdown,
    _streamed_content,
    _TimedRelay,
    _turn_store,
    _type,
    _user,
    _wait_for,
    _warmups,
    _write_config,
    _write_skill,
    firstrun_offscreen,
    offscreen_dialogs,
    offscreen_limits,
    offscreen_popup,
    quick_offscreen,
)


class TestLayering:
    """The package's layers: a Qt-free core, one name per exception."""

    def test_core_modules_import_without_qt(self) -> None:
        """The core is Qt-free: importing it in a fresh interpreter loads no PySide6."""

        # Every module outside ui/ is core; of the development tools only the scripted router is.
        core = sorted(
            name for name in structure.product_modules() if not name.startswith("llamachat.ui")
        ) + ["llamachat.dev.scripted_router"]
        code = (
            "import sys, importlib\n"
            f"for name in {core!r}: importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6')))\n"
            "print(','.join(bad))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert core, "no core modules found"
        assert out == "", f"core modules pulled in Qt: {out}"

    def test_structure_has_no_import_cycles_and_no_oversized_module_or_class(self) -> None:
        """The house keeps its rooms: no import cycle (type-checking imports included), at
        most 15 files directly in ui/, no module over 800 lines, no class over ~400 (450)."""
        shape = structure.measure()
        assert "llamachat.router.client" in shape.module_lines, "the measure found no modules"
        assert any(cls.endswith(".ChatWindow") for cls in shape.class_lines)
        assert shape.problems() == []

    def test_structure_measure_finds_a_cycle_and_a_long_module(self, tmp_path: Path) -> None:
        """The structure check is not blind: a two-module cycle and a long file are reported."""
        package = tmp_path / "llamachat"
        (package / "ui").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "ui" / "__init__.py").write_text("")
        (package / "a.py").write_text("from llamachat import b\n")
        (package / "b.py").write_text(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from llamachat.a import x\n"
            + "pass\n" * 900
        )
        problems = structure.measure(package).problems()
        assert "import cycle among: llamachat.a, llamachat.b" in problems
        assert any(p.startswith("llamachat.b: 90") for p in problems)

    def test_no_two_exception_classes_share_a_name(self) -> None:
        """Every exception class of the package has a name of its own (an `except X` is unambiguous)."""
        import importlib

        owners: dict[str, set[str]] = {}
        for info in pkgutil.walk_packages(llamachat.__path__, "llamachat."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == info.name
                ):
                    owners.setdefault(name, set()).add(info.name)
        assert "ManagedServerError" in owners and "ServerError" in owners
        clashes = {name: sorted(mods) for name, mods in owners.items() if len(mods) > 1}
        assert clashes == {}


class TestConfig:
    """`llamachat.config`: the file, its keys, its errors."""

    def test_config_write_default_writes_exactly_the_example_file(self, tmp_path: Path) -> None:
        from llamachat import config

        written = config.write_default(tmp_path / "new" / "config.toml")
        example = Path(__file__).parent / "config.example.toml"
        assert written.read_bytes() == example.read_bytes()

    def test_config_example_file_loads_to_the_defaults(self, tmp_path: Path) -> None:

        from llamachat import config

        path = config.write_default(tmp_path / "config.toml")
        from_example = dataclasses.replace(config.load(path), path=None)
        from_nothing = dataclasses.replace(config.load(tmp_path / "missing.toml"), path=None)
        assert from_example == from_nothing == config.Config()
        for key, value in tomllib.loads(config.DEFAULT_TEXT).items():
            assert config.DEFAULTS[key] == value, key

    def test_config_example_documents_every_key_with_valid_examples(self, tmp_path: Path) -> None:

        from llamachat import config

        lines = config.DEFAULT_TEXT.splitlines()
        for key in config.DEFAULTS:
            if key in ("providers", "mcp_servers"):
                assert f"# [[{key}]]" in lines
                continue
            if key in ("model_params", "preset_params"):
                assert any(line.startswith(f"# [{key}.") for line in lines), key
                continue
            where = [i for i, line in enumerate(lines) if re.match(rf"(# )?{key} = ", line)]
            assert where, f"{key} is not in the example file"
            assert lines[where[0] - 1].startswith("# "), f"{key} has no comment above it"
        # Uncommenting every example value must give a valid file that changes those keys.
        uncommented = re.sub(
            r"^# ((\w+ = .*)|(\[\[(providers|mcp_servers)\]\])|(\[\w+_params\.[\w.-]+\]))$",
            r"\1",
            config.DEFAULT_TEXT,
            flags=re.MULTILINE,
        )
        (tmp_path / "team-skills").mkdir()
        cfg = config.load(_write_config(tmp_path, uncommented))
        assert cfg.router_api_key_env == "LLAMA_API_KEY"
        assert cfg.search_enabled is True and cfg.search_url == "http://127.0.0.1:8888"
        assert cfg.server_args == ("--ctx-size", "16384", "--n-gpu-layers", "99")
        assert cfg.model_params == {"Qwen3-8B-Q4_K_M": {"temperature": 0.6, "top_p": 0.95}}
        assert cfg.preset_params == {"Coder": {"temperature": 0.2}}
        assert cfg.providers == (
            config.ProviderConfig(
                name="openrouter",
                base_url="https://openrouter.ai/api/v1",
                api_key_env="OPENROUTER_API_KEY",
                models=("deepseek/deepseek-chat",),
            ),
        )
        assert [server.name for server in cfg.mcp_servers] == ["time", "github"]
        assert cfg.mcp_servers[1].headers_env == (("Authorization", "GITHUB_MCP_AUTHORIZATION"),)

    def test_config_missing_file_gives_defaults_in_the_per_user_folders(
        self, tmp_path: Path, isolated_home: Path
    ) -> None:
        from llamachat import config

        cfg = config.load(tmp_path / "nowhere.toml")
        data = isolated_home / ".local/share/llamachat"
        assert cfg.path == tmp_path / "nowhere.toml"
        assert cfg.router_url == "http://127.0.0.1:8080"
        assert cfg.max_searches == 2
        assert cfg.history_path == data / "history.db"
        assert cfg.prompts_dir == data / "prompts"
        assert cfg.models_dir == data / "models"
        assert cfg.skills_dir == isolated_home / ".agents/skills"
        assert config.default_path() == isolated_home / ".config/llamachat/config.toml"

    def test_config_llamachat_config_env_chooses_the_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from llamachat import config

        path = _write_config(tmp_path, 'default_model = "from-env"\n')
        monkeypatch.setenv("LLAMACHAT_CONFIG", str(path))
        assert config.default_path() == path
        assert config.load().default_model == "from-env"

    def test_config_search_is_off_without_a_url_and_on_with_one(self, tmp_path: Path) -> None:
        from llamachat import config

        assert (
            config.load(_write_config(tmp_path, "search_enabled = true\n")).search_enabled is False
        )
        on = config.load(_write_config(tmp_path, 'search_url = "http://127.0.0.1:8888/"\n'))
        assert on.search_enabled is True and on.search_url == "http://127.0.0.1:8888"
        off = 'search_enabled = false\nsearch_url = "http://127.0.0.1:8888"\n'
        assert config.load(_write_config(tmp_path, off)).search_enabled is False
        assert config.Config(search_url="").search_enabled is False

    def test_config_skills_are_off_only_when_every_skills_folder_is_missing(
        self, tmp_path: Path
    ) -> None:
        from llamachat import config

        missing = _write_config(tmp_path, f'skills_dir = "{tmp_path / "none"}"\n')
        assert config.load(missing).skills_enabled is False
        (tmp_path / "extra").mkdir()
        text = f'skills_dir = "{tmp_path / "none"}"\nskills_dirs = ["{tmp_path / "extra"}"]\n'
        cfg = config.load(_write_config(tmp_path, text))
        assert cfg.skills_enabled is True
        assert cfg.skill_roots() == (tmp_path / "none", tmp_path / "extra")

    def test_config_paths_expand_tilde_and_anchor_relative_paths_at_the_file(
        self, tmp_path: Path, isolated_home: Path
    ) -> None:
        from llamachat import config

        text = (
            'history_path = "~/chats/history.db"\n'
            'prompts_dir = "presets"\n'
            'models_preset = "~/models/preset.ini"\n'
            'llama_server = "~/bin/llama-server"\n'
        )
        cfg = config.load(_write_config(tmp_path, text))
        assert cfg.history_path == isolated_home / "chats/history.db"
        assert cfg.prompts_dir == tmp_path / "presets"
        assert cfg.models_preset == isolated_home / "models/preset.ini"
        assert cfg.llama_server == str(isolated_home / "bin/llama-server")

    def test_config_invalid_toml_names_the_file_and_line(self, tmp_path: Path) -> None:
        path = _write_config(
            tmp_path, 'router_url = "http://127.0.0.1:8080"\n\nmax_searches = = 3\n'
        )
        error = _config_error(path)
        assert error.path == path and error.line == 3
        assert str(error).startswith(f"{path}, line 3: invalid TOML")
        assert "(at line" not in str(error)

    def test_config_wrong_type_names_the_key_the_type_and_the_line(self, tmp_path: Path) -> None:
        path = _write_config(tmp_path, '# comment\ntheme = "dark"\nmax_searches = "two"\n')
        error = _config_error(path)
        assert (error.key, error.line) == ("max_searches", 3)
        assert "max_searches must be an integer, got string" in str(error)
        error = _config_error(_write_config(tmp_path, "max_searches = true\n"))
        assert "max_searches must be an integer, got boolean" in str(error)
        error = _config_error(_write_config(tmp_path, 'server_args = ["-c", 4096]\n'))
        assert error.key == "server_args" and "list of strings" in str(error)

    def test_config_unknown_key_is_reported_with_a_suggestion(self, tmp_path: Path) -> None:
        error = _config_error(_write_config(tmp_path, 'theme = "dark"\nmax_search = 3\n'))
        assert (error.key, error.line) == ("max_search", 2)
        assert "unknown key 'max_search' (did you mean 'max_searches'?)" in str(error)
        text = (
            '[[providers]]\nname = "a"\nbase_url = "https://a.example.org"\n\n'
            '[[providers]]\nname = "b"\nbase_uri = "https://b.example.org"\n'
        )
        error = _config_error(_write_config(tmp_path, text))
        assert (error.key, error.line) == ("providers[2].base_uri", 7)
        assert "did you mean 'base_url'?" in str(error)
        error = _config_error(_write_config(tmp_path, "[search]\nurl = 'x'\n"))
        assert (error.key, error.line) == ("search", 1)

    @pytest.mark.parametrize(
        ("text", "key", "line", "words"),
        [
            ('theme = "blue"\n', "theme", 1, "theme must be one of system, light, dark"),
            ("\nmax_searches = -1\n", "max_searches", 2, "0 or more"),
            ("idle_timeout = 0\n", "idle_timeout", 1, "more than 0"),
            ('router_url = "127.0.0.1:8080"\n', "router_url", 1, "http:// or https://"),
            ('search_url = "ftp://example.org"\n', "search_url", 1, "http:// or https://"),
            ('[[providers]]\nname = "x"\n', "providers[1].base_url", 1, "needs a base_url"),
            (
                '[[providers]]\nbase_url = "https://x.example.org"\n',
                "providers[1].name",
                1,
                "needs a name",
            ),
            (
                '[[providers]]\nname = "x"\nbase_url = "x.example.org"\n',
                "providers[1].base_url",
                3,
                "http:// or https://",
            ),
            (
                '[[providers]]\nname = "a/b"\nbase_url = "https://x.example.org"\n',
                "providers[1].name",
                2,
                "must not contain '/'",
            ),
            (
                (
                    '[[providers]]\nname = "x"\nbase_url = "https://x.example.org"\n'
                    '[[providers]]\nname = "x"\nbase_url = "https://y.example.org"\n'
                ),
                "providers[2].name",
                5,
                "two providers are named 'x'",
            ),
            ('providers = ["x"]\n', "providers", 1, "providers[1] must be a table"),
        ],
    )
    def test_config_bad_values_name_the_key_and_line(
        self, tmp_path: Path, text: str, key: str, line: int, words: str
    ) -> None:
        error = _config_error(_write_config(tmp_path, text))
        assert (error.key, error.line) == (key, line)
        assert words in str(error)

    def test_config_unreadable_file_names_the_file(self, tmp_path: Path) -> None:
        folder = tmp_path / "folder.toml"
        folder.mkdir()
        error = _config_error(folder)
        assert error.path == folder and str(folder) in str(error)
        latin = tmp_path / "latin.toml"
        latin.write_bytes(b'default_model = "caf\xe9"\n')
        error = _config_error(latin)
        assert str(latin) in str(error) and "not UTF-8" in str(error)
        locked = _write_config(tmp_path, "theme = 'dark'\n")
        locked.chmod(0)
        try:
            if os.access(locked, os.R_OK):
                pytest.skip("running as root: a mode-0 file is still readable")
            error = _config_error(locked)
            assert str(locked) in str(error) and "ermission" in str(error)
        finally:
            locked.chmod(0o600)

    def test_config_api_key_comes_from_the_environment_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from llamachat import config

        text = (
            'router_api_key_env = "ROUTER_KEY"\n'
            '[[providers]]\nname = "remote"\nbase_url = "https://api.example.org/v1/"\n'
            'api_key_env = "REMOTE_KEY"\n'
        )
        cfg = config.load(_write_config(tmp_path, text))
        assert cfg.api_key() is None and cfg.providers[0].api_key() is None
        monkeypatch.setenv("ROUTER_KEY", "sk-router-secret")
        monkeypatch.setenv("REMOTE_KEY", "sk-remote-secret")
        assert cfg.api_key() == "sk-router-secret"
        assert cfg.providers[0].api_key() == "sk-remote-secret"
        assert cfg.providers[0].base_url == "https://api.example.org/v1"
        assert "secret" not in repr(config.load(cfg.path))

    @pytest.mark.parametrize(
        ("text", "key"),
        [
            ('skills_dir = "skills\\u0000x"\n', "skills_dir"),
            ('prompts_dir = "prompts\\u0000x"\n', "prompts_dir"),
            ('history_path = "history\\u0000.db"\n', "history_path"),
            ('skills_dirs = ["ok", "more\\u0000x"]\n', "skills_dirs"),
            ('models_preset = "preset\\u0000.ini"\n', "models_preset"),
        ],
    )
    def test_config_nul_byte_in_a_path_exits_2_naming_file_line_and_key(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str
    ) -> None:
        """A NUL byte no file name can hold: a ConfigError (exit 2, also for `ask --print`)."""
        path = _write_config(tmp_path, "# comment\n" + text)
        error = _config_error(path)
        assert (error.path, error.line, error.key) == (path, 2, key)
        assert "NUL" in error.message
        assert main(["--config", str(path), "ask", "--print", "hi"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"llamachat: {path}, line 2: {key}") and "Traceback" not in err

    @pytest.mark.parametrize(
        ("value", "says"),
        [("a-file/history.db", "is a file, not a folder"), ("a-folder", "is a folder")],
    )
    def test_config_history_path_that_cannot_be_a_database_exits_2_naming_the_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, says: str
    ) -> None:
        """history_path under a file, or naming a folder: a ConfigError, checked by every command."""
        (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
        (tmp_path / "a-folder").mkdir()
        text = (
            f'manage_server = false\nrouter_url = "http://127.0.0.1:9"\nhistory_path = "{value}"\n'
        )
        path = _write_config(tmp_path, text)
        error = _config_error(path)
        assert (error.path, error.line, error.key) == (path, 3, "history_path")
        assert says in error.message
        assert main(["--config", str(path), "ask", "--print", "hi"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"llamachat: {path}, line 3: history_path") and says in err

    @pytest.mark.parametrize(
        ("text", "key", "line"),
        [
            ('[model_params.m]\ntemperature = "hot"\n', "model_params.m.temperature", 3),
            (
                '[model_params."a.b"]\ntop_p = 0.9\n\n[preset_params.Coder]\nseed = [1]\n',
                "preset_params.Coder.seed",
                6,
            ),
            ("[model_params]\nm = { top_k = 1.5 }\n", "model_params.m.top_k", 3),
            ('model_params = { m = { colour = "red" } }\n', "model_params.m.colour", 2),
            ('[model_params]\nm.min_p = "low"\n', "model_params.m.min_p", 3),
        ],
    )
    def test_config_bad_model_params_name_the_line(
        self, tmp_path: Path, text: str, key: str, line: int
    ) -> None:
        """A bad value in a [model_params.<model>] table: the error has its line and full key."""
        path = _write_config(tmp_path, "# comment\n" + text)
        error = _config_error(path)
        assert (error.key, error.line) == (key, line)
        assert str(error).startswith(f"{path}, line {line}: ") and key in str(error)

    @pytest.mark.parametrize("size", [1, 5, 73, 100000])
    def test_config_font_size_out_of_range_is_refused(self, tmp_path: Path, size: int) -> None:
        """font_size is 0 (the system's) or 6 to 72 points, in the file and through Settings."""
        from llamachat import config

        error = _config_error(_write_config(tmp_path, f"\nfont_size = {size}\n"))
        assert (error.key, error.line) == ("font_size", 2)
        assert "0 (the system's size) or from 6 to 72" in error.message
        for fine in (0, 6, 72):
            assert config.load(_write_config(tmp_path, f"font_size = {fine}\n")).font_size == fine
        path = _write_config(tmp_path, "# mine\nfont_size = 12\n")
        with pytest.raises(config.ConfigError) as caught:
            config.update_file(path, {"font_size": size})
        assert caught.value.key == "font_size"
        assert path.read_text(encoding="utf-8") == "# mine\nfont_size = 12\n"

    @pytest.mark.parametrize(
        ("text", "line", "key", "says"),
        [
            pytest.param('theme = "dark"\nrouter_url = \n', 2, None, "", id="syntax"),
            pytest.param('\n\nmax_searches = "two"\n', 3, "max_searches", "integer", id="type"),
            pytest.param(
                'router_ulr = "http://127.0.0.1:8080"\n',
                1,
                "router_ulr",
                "router_url",
                id="unknown-key",
            ),
            pytest.param("idle_timeout = -1\n", 1, "idle_timeout", "", id="bad-value"),
            pytest.param(
                '[[providers]]\nname = "remote"\nbase_url = 5\n',
                3,
                "base_url",
                "",
                id="provider-type",
            ),
            pytest.param('server_args = ["-c", 4096]\n', 1, "server_args", "", id="list-item-type"),
            pytest.param(b'theme = "dark\xff\xfe"\n', None, None, "", id="not-utf8"),
            pytest.param(None, None, None, "", id="unreadable"),
        ],
    )
    def test_fault_bad_config_through_the_cli_exits_2_naming_file_line_and_key(
        self, tmp_path: Path, text, line, key, says
    ) -> None:
        """`llamachat --config bad.toml`: exit 2, the file (and line and key) named, no traceback."""
        path = tmp_path / "bad.toml"
        if text is None:
            path.mkdir()  # a path that cannot be read as a file, even by root
        else:
            _fault_write_config(path, text)
        done = _fault_cli(path, tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"llamachat: {path}")
        if line is not None:
            assert f"{path}, line {line}" in done.stderr
        if key is not None:
            assert key in done.stderr
        assert says in done.stderr
        assert len(done.stderr.strip().splitlines()) <= 3

    @pytest.mark.parametrize(
        ("text", "key", "says"),
        [
            pytest.param('router_url = "http://[::1"\n', "router_url", "valid URL", id="bad-ipv6"),
            pytest.param(
                'router_url = "http://127.0.0.1:99999"\n', "router_url", "valid URL", id="bad-port"
            ),
            pytest.param("idle_timeout = nan\n", "idle_timeout", "got nan", id="nan"),
            pytest.param("idle_timeout = inf\n", "idle_timeout", "got inf", id="inf"),
            pytest.param('prompts_dir = "a-file"\n', "prompts_dir", "is a file", id="prompts-file"),
            pytest.param('models_dir = "a-file"\n', "models_dir", "is a file", id="models-file"),
            pytest.param(
                'models_dir = "a-file/models"\n',
                "models_dir",
                "cannot be made",
                id="models-under-file",
            ),
            pytest.param(
                'prompts_dir = "a-file/p"\n',
                "prompts_dir",
                "cannot be made",
                id="prompts-under-file",
            ),
        ],
    )
    def test_fault_bad_urls_numbers_and_folders_exit_2_naming_file_line_and_key(
        self, tmp_path: Path, text: str, key: str, says: str
    ) -> None:
        """A URL no parser takes, a NaN timeout, folders that are files: exit 2 naming the file,
        line and key, never a traceback or a window that crashes (or silently never times out).
        (Tests run as root, which writes anywhere: an unwritable folder is not tested here.)"""
        (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
        path = _fault_write_config(tmp_path / "bad.toml", "# comment\n" + text)
        done = _fault_cli(path, tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"llamachat: {path}, line 2: {key}"), done.stderr
        assert says in done.stderr

    def test_fault_config_path_under_a_file_exits_2_naming_it(self, tmp_path: Path) -> None:
        """`--config a-file/config.toml`: the part of the path that is a file is named, exit 2.
        (Root enters any folder, so a folder without permissions cannot be tested here; a path
        through a file fails the same way, with ENOTDIR instead of EACCES.)"""
        blocker = tmp_path / "a-file"
        blocker.write_text("", encoding="utf-8")
        done = _fault_cli(blocker / "config.toml", tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert "Traceback" not in done.stderr
        assert f"{blocker} is a file" in done.stderr


class TestSettings:
    """`llamachat.ui.settings` and `config.file`: the Settings dialog, saved in place."""

    @offscreen_dialogs
    def test_chrome_window_settings_round_trip_keeps_comments_and_applies(
        self, router, qtbot, tmp_path
    ) -> None:
        """Ctrl+, opens Settings; saving keeps the file's comments, switches the theme and shows
        the web search toggle; the star writes the default model into the same file."""

        from llamachat import config

        path = tmp_path / "config.toml"
        path.write_text(
            config.DEFAULT_TEXT.replace(
                'router_url = "http://127.0.0.1:8080"',
                f'router_url = "{router.url}"  # the box under my desk',
            )
            + f'\nhistory_path = "{tmp_path / "history.db"}"\n'
            + f'prompts_dir = "{tmp_path / "prompts"}"\n'
            + "# My own note, at the end.\n",
            encoding="utf-8",
        )
        cfg = config.load(path)
        history = History(cfg.history_path)
        window = ChatWindow(_app(cfg, history))
        qtbot.addWidget(window)
        window.show()
        try:
            qtbot.waitUntil(lambda: bool(window.models()))
            assert not window.web_search.button.isVisible()
            qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
            dialog = _by_name(window, QDialog, "Settings")
            assert dialog.router_url.text() == router.url
            dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
            dialog.search_url.setText("http://127.0.0.1:9")
            assert dialog.save()
            text = path.read_text(encoding="utf-8")
            assert f'router_url = "{router.url}"  # the box under my desk' in text
            assert text.endswith("# My own note, at the end.\n")
            assert 'theme = "dark"' in text and 'search_url = "http://127.0.0.1:9"' in text
            assert window.cfg.theme == "dark" and window.cfg.router_url == router.url
            window_colour = QApplication.palette().color(QPalette.ColorRole.Window).name()
            assert window_colour == "#2b2b2e"
            assert window.web_search.button.isVisible() and window.web_search.is_on()

            picker = window.model_picker
            qtbot.mouseClick(picker.star, Qt.MouseButton.LeftButton)
            assert picker.default_model() == "test-model"
            text = path.read_text(encoding="utf-8")
            assert 'default_model = "test-model"' in text
            assert text.endswith("# My own note, at the end.\n")
            assert config.load(path).default_model == "test-model"
            _send(qtbot, window, "still talking")
            assert history.messages(window.session_id)[-1]["content"] == "echo: still talking"
        finally:
            window.close()
            history.close()
            apply_theme(QApplication.instance(), "light")

    def test_settings_update_file_keeps_comments_and_uncomments_default_lines(
        self, tmp_path: Path
    ) -> None:
        from llamachat import config

        path = tmp_path / "config.toml"
        config.update_file(path, {"router_api_key_env": "MY_KEY", "theme": "dark"})
        text = path.read_text(encoding="utf-8")
        assert text == config.DEFAULT_TEXT.replace(
            '# router_api_key_env = "LLAMA_API_KEY"', 'router_api_key_env = "MY_KEY"'
        ).replace('theme = "system"', 'theme = "dark"')
        with pytest.raises(config.ConfigError, match="max_searches must be 0 or more") as caught:
            config.update_file(path, {"max_searches": -1})
        assert caught.value.path == path
        assert path.read_text(encoding="utf-8") == text
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "home"]

    def test_settings_round_trip_keeps_the_users_comments(self, qtbot, tmp_path: Path) -> None:
        from llamachat import config

        path = tmp_path / "config.toml"
        original = (
            config.DEFAULT_TEXT.replace(
                'router_url = "http://127.0.0.1:8080"',
                'router_url = "http://127.0.0.1:8080"  # the box under my desk',
            )
            + "\n# My own note, at the end.\n"
        )
        path.write_text(original, encoding="utf-8")
        dialog = SettingsDialog(config.load(path))
        qtbot.addWidget(dialog)
        dialog.router_url.setText("http://10.0.0.5:8080")
        dialog.api_key_env.setText("MY_KEY")
        dialog.search_url.setText("http://127.0.0.1:8888")
        dialog.skills_dirs.setPlainText("~/team-skills\n")
        dialog.default_model.setCurrentText("qwen")
        dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
        with qtbot.waitSignal(dialog.saved) as saved:
            assert dialog.save() is True
        text = path.read_text(encoding="utf-8")
        assert 'router_url = "http://10.0.0.5:8080"  # the box under my desk' in text
        assert text.endswith("\n# My own note, at the end.\n")
        changed = (
            "router_url",
            "# router_api_key_env",
            "# search_url",
            "# skills_dirs",
            "# default_model",
            "theme",
        )
        kept = [line for line in original.splitlines() if not line.startswith(changed)]
        assert [line for line in text.splitlines() if line in kept] == kept
        new = saved.args[0]
        assert new == config.load(path)
        assert (
            new.router_url,
            new.router_api_key_env,
            new.search_url,
            new.default_model,
            new.theme,
        ) == ("http://10.0.0.5:8080", "MY_KEY", "http://127.0.0.1:8888", "qwen", "dark")
        assert new.skills_dirs == (Path.home() / "team-skills",)

        bad = SettingsDialog(new)
        qtbot.addWidget(bad)
        bad.router_url.setText("ftp://elsewhere")
        assert bad.save() is False
        assert "router_url must start with http:// or https://" in bad.error()
        assert bad.error_label.isVisibleTo(bad)
        assert path.read_text(encoding="utf-8") == text


class TestHistory:
    """`llamachat.history`: the history store, its file, its faults (damage, full disk, read-only)."""

    def test_history_sessions_create_get_rename_and_settings(self, tmp_path: Path) -> None:

        with History(tmp_path / "h.db") as history:
            sid = history.create_session("chat", "model-a", prompt_name="Default")
            history.rename_session(sid, "Named")
            history.set_model(sid, "model-b")
            history.set_prompt(sid, "", "Be terse.")
            history.set_skills(sid, ["finance-cli", "handoff"])
            session = history.get_session(sid)
            assert session is not None
            assert {
                k: session[k]
                for k in ("id", "mode", "title", "model", "prompt_name", "prompt_custom", "skills")
            } == {
                "id": sid,
                "mode": "chat",
                "title": "Named",
                "model": "model-b",
                "prompt_name": "",
                "prompt_custom": "Be terse.",
                "skills": ["finance-cli", "handoff"],
            }
            assert isinstance(session["created_at"], float)
            assert history.get_session(sid + 100) is None
            with pytest.raises(ValueError):
                history.create_session("group")

    def test_history_messages_keep_every_field_and_first_user_message_titles_the_session(
        self,
        tmp_path: Path,
    ) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "m")
        before = history.get_session(sid)["updated_at"]
        history.add_message(sid, "system", "You are terse.")
        user = history.add_message(
            sid,
            "user",
            "\n  How do llamas sleep?\nSecond line",
            attachments=[{"name": "pic.png", "mime": "image/png"}],
        )
        calls = [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "web_search", "arguments": '{"query": "llama"}'},
            }
        ]
        reply = history.add_message(
            sid,
            "assistant",
            "Standing up.",
            reasoning="Think.",
            tool_calls=calls,
            model="m",
            usage={"prompt_tokens": 5},
            timings={"predicted_per_second": 42.0},
        )
        history.add_message(sid, "user", "A later question")
        messages = history.messages(sid)
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert messages[1]["id"] == user and messages[1]["attachments"][0]["name"] == "pic.png"
        assert messages[2]["id"] == reply
        assert messages[2]["tool_calls"] == calls
        assert messages[2]["usage"] == {"prompt_tokens": 5}
        assert messages[2]["timings"] == {"predicted_per_second": 42.0}
        assert messages[2]["reasoning"] == "Think." and messages[2]["status"] == "complete"
        session = history.get_session(sid)
        assert session["title"] == "How do llamas sleep?"
        assert session["updated_at"] >= before
        assert history.message_count(sid) == 4
        history.delete_branch(reply)
        assert [m["id"] for m in history.messages(sid)] == [messages[0]["id"], user]
        with pytest.raises(HistoryError, match="no session"):
            history.add_message(sid + 100, "user", "x")
        with pytest.raises(ValueError):
            history.add_message(sid, "robot", "x")

    def test_history_has_no_column_for_api_keys(self, tmp_path: Path) -> None:

        History(tmp_path / "h.db").close()
        conn = sqlite3.connect(tmp_path / "h.db")
        columns = [
            row[1]
            for table in ("sessions", "messages")
            for row in conn.execute(f"PRAGMA table_info({table})")
        ]
        conn.close()
        assert columns and not [c for c in columns if "key" in c or "secret" in c]

    def test_history_is_versioned_in_wal_mode_and_reopens_without_loss(
        self, tmp_path: Path
    ) -> None:

        path = tmp_path / "h.db"
        with History(path) as history:
            sid = history.create_session("chat")
            history.add_message(sid, "user", "kept across opens")
            assert history.recovered_from is None
        with History(path) as history:
            assert history.messages(sid)[0]["content"] == "kept across opens"
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()

    def test_history_opens_a_seed_schema_database_and_keeps_its_data(self, tmp_path: Path) -> None:

        path = tmp_path / "old.db"
        _seed_schema_db(path)
        with History(path) as history:
            assert history.recovered_from is None
            old = history.get_session(7)
            assert old["title"] == "Old llama talk" and old["model"] == "old-model"
            assert old["prompt_name"] == "Default" and old["skills"] == []
            assert old["updated_at"] == 1700000100.0
            assert history.get_session(8)["title"] == ""
            assert history.messages(7)[0]["content"] == "tell me about alpacas"
            assert history.messages(7)[0]["reasoning"] == ""
            history.set_skills(7, ["finance-cli"])
            assert history.get_session(7)["skills"] == ["finance-cli"]
            # The old message became searchable, and new ones are indexed as usual.
            assert [s["id"] for s in history.search("alpacas")] == [7]
            history.add_message(8, "user", "vicuñas too")
            assert [s["id"] for s in history.search("vicunas")] == [8]
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        conn.close()

    def test_history_from_a_newer_llamachat_is_refused_and_left_alone(self, tmp_path: Path) -> None:

        path = tmp_path / "h.db"
        History(path).close()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 99")
        conn.close()
        before = path.read_bytes()
        with pytest.raises(HistoryError, match="newer llamachat"):
            History(path)
        assert path.read_bytes() == before
        assert not list(tmp_path.glob("*.corrupt-*"))

    def test_history_search_matches_words_and_prefixes_with_a_snippet(self, tmp_path: Path) -> None:

        history = History(tmp_path / "h.db")
        llamas = history.create_session("chat")
        history.add_message(llamas, "user", "Where do llamas live?")
        history.add_message(llamas, "assistant", "In the Andes mountains.", reasoning="geography")
        other = history.create_session("oneshot")
        history.add_message(other, "user", "What is a café?")
        assert [s["id"] for s in history.search("andes")] == [llamas]
        assert [s["id"] for s in history.search("llam")] == [llamas]
        assert [s["id"] for s in history.search("geography")] == [llamas]
        assert [s["id"] for s in history.search("cafe")] == [other]
        # Every word must occur in one message: "live" and "mountains" are in two.
        assert history.search("llamas live") and not history.search("live mountains")
        hit = history.search("mountains")[0]
        assert "mountains" in hit["snippet"] and hit["mode"] == "chat"
        assert len(history.search("a")) == 2  # one row per session, not per message

    def test_history_search_finds_titles_first_with_message_snippets(self, tmp_path: Path) -> None:
        """A title holding every word finds its chat (listed first, newest first); a chat
        matching in its messages too keeps that message's snippet; deleted chats stay out."""

        history = History(tmp_path / "h.db")
        renamed = history.create_session("chat")
        history.add_message(renamed, "user", "something unrelated")
        history.rename_session(renamed, "Trip to 50% Peru_plans")
        both = history.create_session("chat")
        history.add_message(both, "user", "Peru trip budget")
        history.add_message(both, "assistant", "A Peru trip costs little.")
        only_message = history.create_session("chat")
        history.add_message(only_message, "user", "tell me about llamas")
        history.add_message(only_message, "assistant", "Llamas come from Peru.")
        assert [s["id"] for s in history.search("peru trip")] == [both, renamed]
        hits = {s["id"]: s["snippet"] for s in history.search("peru")}
        assert list(hits) == [both, renamed, only_message]
        assert hits[renamed] == "" and "Peru" in hits[both] and "Peru" in hits[only_message]
        # LIKE's wildcards are matched literally.
        assert [s["id"] for s in history.search("50%")] == [renamed]
        assert [s["id"] for s in history.search("p_ru")] == []
        assert [s["id"] for s in history.search("peru_p")] == [renamed]
        history.delete_session(renamed)
        assert renamed not in [s["id"] for s in history.search("peru")]
        assert len(history.search("peru", limit=1)) == 1

    def test_history_edited_first_question_renames_an_automatic_title_only(
        self, tmp_path: Path
    ) -> None:
        """A new version of the first question renames a chat whose title came from an
        earlier version; a title the user gave stays; a later message keeps titles."""

        history = History(tmp_path / "h.db")
        auto = history.create_session("chat")
        history.add_message(auto, "user", "Wher do llamas live?")
        history.add_message(auto, "assistant", "In the Andes.")
        history.add_message(auto, "user", "And alpacas?")
        assert history.get_session(auto)["title"] == "Wher do llamas live?"
        history.add_message(auto, "user", "Where do llamas live?", parent=None)
        assert history.get_session(auto)["title"] == "Where do llamas live?"
        history.add_message(auto, "user", "Whereabouts?", parent=None)
        assert history.get_session(auto)["title"] == "Whereabouts?"

        named = history.create_session("chat")
        history.add_message(named, "user", "Wher do llamas live?")
        history.rename_session(named, "Llamas")
        history.add_message(named, "user", "Where do llamas live?", parent=None)
        assert history.get_session(named)["title"] == "Llamas"

    def test_history_search_follows_updates_and_deletions(self, tmp_path: Path) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat")
        history.add_message(sid, "user", "hello")
        reply = history.add_message(sid, "assistant", "", status="streaming")
        assert history.search("zebra") == []
        history.update_message(reply, content="a zebra", status="complete")
        assert [s["id"] for s in history.search("zebra")] == [sid]
        history.delete_branch(reply)
        assert history.search("zebra") == []

    @pytest.mark.parametrize(
        "query",
        [
            '"foo',
            "AND (",
            "OR",
            "NOT",
            "a:b",
            "col:",
            "*",
            "^x",
            "NEAR(a b)",
            "(((",
            "'",
            '""',
            "-",
            "a - b",
            "  ",
            "",
            "\x00",
            "content:llama",
            "llama*",
            "{content reasoning}: x",
        ],
    )
    def test_history_search_never_raises_on_query_syntax(self, tmp_path: Path, query: str) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat")
        history.add_message(sid, "user", 'quote " and AND ( parens a:b content llama')
        assert isinstance(history.search(query), list)
        assert [s["id"] for s in history.search('"quote')] == [sid]
        assert [s["id"] for s in history.search("AND (")] == [sid]

    def test_history_list_sessions_pages_10000_sessions_newest_first_by_index(
        self, tmp_path: Path
    ) -> None:

        path = tmp_path / "h.db"
        History(path).close()
        conn = sqlite3.connect(path)
        conn.executemany(
            "INSERT INTO sessions (mode, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
            [("oneshot" if n % 10 == 0 else "chat", f"s{n}", n, n) for n in range(10_000)],
        )
        conn.commit()
        plan = " ".join(
            row[-1]
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM sessions WHERE deleted_at IS NULL"
                " ORDER BY updated_at DESC, id DESC LIMIT 50 OFFSET 100"
            )
        )
        conn.close()
        assert "sessions_live_by_update" in plan and "TEMP B-TREE" not in plan
        history = History(path)
        assert history.count_sessions() == 10_000
        first = history.list_sessions(limit=50)
        assert [s["title"] for s in first[:3]] == ["s9999", "s9998", "s9997"]
        second = history.list_sessions(limit=50, offset=50)
        assert second[0]["title"] == "s9949" and len(second) == 50
        assert history.list_sessions(limit=50, offset=9_990)[-1]["title"] == "s0"
        assert {s["mode"] for s in history.list_sessions(mode="oneshot", limit=20)} == {"oneshot"}
        assert history.list_sessions(mode="oneshot", limit=1)[0]["title"] == "s9990"

    def test_history_soft_delete_hides_undelete_restores_purge_removes(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        keep = history.create_session("chat")
        history.add_message(keep, "user", "keep me")
        gone = history.create_session("chat")
        history.add_message(gone, "user", "delete me please")
        history.delete_session(gone)
        assert [s["id"] for s in history.list_sessions()] == [keep]
        assert history.count_sessions() == 1 and history.search("delete") == []
        history.undelete_session(gone)
        assert [s["id"] for s in history.list_sessions()] == [gone, keep]
        assert [s["id"] for s in history.search("delete")] == [gone]
        history.delete_session(gone)
        assert history.purge_deleted() == 1
        assert history.get_session(gone) is None and history.message_count(gone) == 0
        assert history.search("delete") == [] and history.message_count(keep) == 1

    def test_history_export_markdown_has_title_roles_and_reasoning(self, tmp_path: Path) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "qwen")
        history.add_message(sid, "user", "Why is the sky blue?")
        history.add_message(
            sid, "assistant", "Rayleigh scattering.", reasoning="Physics.", model="qwen"
        )
        history.add_message(sid, "assistant", "Half an ans", status="stopped")
        text = history.export_markdown(sid)
        assert text.startswith("# Why is the sky blue?\n")
        assert "## You\n\nWhy is the sky blue?" in text
        assert "## Assistant (qwen)" in text
        assert "<details><summary>Reasoning</summary>\n\nPhysics.\n\n</details>" in text
        assert text.index("Physics.") < text.index("Rayleigh scattering.")
        assert "*(stopped)*" in text

    def test_history_json_export_imports_back_as_a_new_identical_session(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "m", prompt_name="Default")
        history.set_skills(sid, ["finance-cli"])
        history.add_message(sid, "user", "hi", attachments=[{"name": "a.txt", "text": "x"}])
        history.add_message(
            sid,
            "assistant",
            "hello",
            reasoning="r",
            usage={"total_tokens": 3},
            tool_calls=[{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
        )
        exported = history.export_json(sid)
        assert exported["format"] == "llamachat-session" and exported["version"] == 2
        other = History(tmp_path / "other.db")
        new_id = other.import_json(json.loads(json.dumps(exported)))
        assert other.export_json(new_id) == exported
        assert history.import_json(exported) != sid
        assert history.export_json(sid) == exported

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (lambda d: d.clear(), "not a llamachat session"),
            (lambda d: d.update(format="other"), "not a llamachat session"),
            (lambda d: d.update(version=3), "newer llamachat"),
            (lambda d: d.update(version="1"), "version"),
            (lambda d: d.update(session=[]), "session must be an object"),
            (lambda d: d["session"].update(mode="group"), "session.mode"),
            (lambda d: d["session"].update(title=5), "session.title"),
            (lambda d: d["session"].update(skills=[1]), "session.skills"),
            (lambda d: d.update(messages={}), "messages must be a list"),
            (lambda d: d["messages"].append("text"), "messages[2] must be an object"),
            (lambda d: d["messages"][0].pop("role"), "messages[1].role"),
            (lambda d: d["messages"][0].update(role="robot"), "messages[1].role"),
            (lambda d: d["messages"][0].update(status="done"), "messages[1].status"),
            (lambda d: d["messages"][0].update(usage=[]), "messages[1].usage"),
            (lambda d: d["messages"][0].update(attachments=["a"]), "messages[1].attachments"),
            (lambda d: d.update(version=2), "messages[1].id"),
        ],
    )
    def test_history_import_rejects_bad_input_and_adds_nothing(
        self, tmp_path: Path, change, words: str
    ) -> None:

        history = History(tmp_path / "h.db")
        data = _good_export()
        change(data)
        with pytest.raises(HistoryError, match=re.escape(words)):
            history.import_json(data)
        assert history.count_sessions() == 0
        assert history.get_session(history.import_json(_good_export()))["title"] == "t"

    def test_history_corrupt_file_is_moved_aside_and_a_fresh_one_used(self, tmp_path: Path) -> None:

        path = tmp_path / "history.db"
        junk = os.urandom(8192)
        path.write_bytes(junk)
        history = History(path)
        moved = history.recovered_from
        assert moved is not None and moved.read_bytes() == junk
        assert re.fullmatch(r"history\.db\.corrupt-\d{8}-\d{6}", moved.name)
        assert history.count_sessions() == 0
        history.add_message(history.create_session("chat"), "user", "fresh start")
        history.close()
        assert History(path).recovered_from is None

    def test_history_truncated_file_is_moved_aside_with_nothing_deleted(
        self, tmp_path: Path
    ) -> None:

        path = tmp_path / "history.db"
        with History(path) as history:
            sid = history.create_session("chat")
            for n in range(200):
                history.add_message(sid, "user", f"message {n} " + "words " * 200)
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
        history = History(path)
        assert history.recovered_from is not None
        assert history.recovered_from.read_bytes() == whole[: len(whole) // 2]
        assert history.count_sessions() == 0

    def test_history_unwritable_folder_raises_naming_the_path(
        self, tmp_path: Path, make_unwritable
    ) -> None:

        existing = tmp_path / "existing"
        existing.mkdir()
        History(existing / "h.db").close()
        empty = tmp_path / "empty"
        empty.mkdir()
        make_unwritable(empty)
        with pytest.raises(HistoryError) as caught:
            History(empty / "h.db")
        assert str(empty / "h.db") in str(caught.value) and "writable" in str(caught.value)
        make_unwritable(existing)
        with pytest.raises(HistoryError) as caught:
            History(existing / "h.db")
        assert str(existing / "h.db") in str(caught.value)
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        with pytest.raises(HistoryError, match=re.escape(str(blocker / "h.db"))):
            History(blocker / "h.db")

    def test_history_streamed_text_saved_by_update_survives_a_crash(self, tmp_path: Path) -> None:

        path = tmp_path / "h.db"
        script = (
            "import os, sys\n"
            "from llamachat.history.store import History\n"
            "h = History(sys.argv[1])\n"
            "sid = h.create_session('chat')\n"
            "h.add_message(sid, 'user', 'tell a story')\n"
            "mid = h.add_message(sid, 'assistant', '', status='streaming')\n"
            "h.update_message(mid, content='Once upon', reasoning='plan')\n"
            "h.update_message(mid, content='Once upon a time')\n"
            "os._exit(9)\n"  # no close, no commit on exit: what a crash leaves behind
        )
        done = subprocess.run(
            [_sys.executable, "-c", script, str(path)], cwd=Path(__file__).parent, check=False
        )
        assert done.returncode == 9
        history = History(path)
        reply = history.messages(history.list_sessions()[0]["id"])[-1]
        assert (reply["content"], reply["reasoning"], reply["status"]) == (
            "Once upon a time",
            "plan",
            "streaming",
        )

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (lambda d: d["session"].update(params={"temperature": "hot"}), "params.temperature"),
            (lambda d: d["session"].update(params={"seed": [1]}), "session.params.seed"),
            (lambda d: d["session"].update(params={"top_p": float("nan")}), "params.top_p"),
            (lambda d: d["session"].update(updated_at=float("inf")), "session.updated_at"),
            (lambda d: d["messages"][0].update(created_at=float("nan")), "messages[1].created_at"),
            (lambda d: d["messages"][0].update(created_at=-5), "messages[1].created_at"),
            (lambda d: d["messages"][0].update(usage={"t": float("nan")}), "messages[1].usage"),
            (lambda d: d["messages"][0].update(tool_calls=_nested(100)), "messages[1].tool_calls"),
            (
                lambda d: d["messages"][0].update(timings={"a": _nested(200_000)}),
                "messages[1].timings nests",
            ),
        ],
    )
    def test_history_import_refuses_non_finite_numbers_deep_values_and_bad_params(
        self, tmp_path: Path, change, words: str
    ) -> None:
        """Every field is checked before anything is written: parameters against their
        table, times and numbers finite, free-form values at most 32 deep."""

        history = History(tmp_path / "h.db")
        data = _good_export()
        change(data)
        with pytest.raises(HistoryError, match=re.escape(words)):
            history.import_json(data)
        assert history.count_sessions() == 0

    def test_history_import_file_names_deep_nesting_nan_and_an_oversized_message(
        self, tmp_path: Path
    ) -> None:
        """What json.loads turned into a RecursionError or a NaN, and a message over the
        size limit, each refuse the file with the field named; nothing is added."""

        db = tmp_path / "h.db"
        History(db).close()
        good = json.dumps(_good_export())
        cases = {
            "[" * 200_000 + "]" * 200_000: "not a llamachat session",
            good.replace('"content": "hi"', '"content": ' + "[" * 200_000 + "]" * 200_000): (
                "messages[1] nests lists or objects too deeply"
            ),
            good.replace('"created_at": 1.0}]', '"created_at": NaN}]'): "messages[1].created_at",
            good.replace("}]", '}, {"role": "user", "content": "' + "x" * 2000 + '"}]'): (
                "messages[2] is 2,031 characters long; the limit is 1,000 per message"
            ),
            good + " {}": "it is not JSON",
        }
        for number, (text, words) in enumerate(cases.items()):
            source = tmp_path / f"{number}.json"
            source.write_text(text, encoding="utf-8")
            with pytest.raises(HistoryError, match=re.escape(words)):
                import_file(db, source, max_message_chars=1000)
        with History(db) as history:
            assert history.count_sessions() == 0

    def test_history_import_file_is_marked_imported_and_listed_first_with_its_dates(
        self, tmp_path: Path
    ) -> None:
        """A user's import is titled "(imported)" and goes to the top of the list; its
        messages and its creation keep the dates they had."""

        history = History(tmp_path / "h.db")
        old = history.create_session("chat")
        history.add_message(old, "user", "Old question")
        history.add_message(history.create_session("chat"), "user", "Newer question")
        exported = history.export_json(old)
        source = tmp_path / "old.json"
        source.write_text(json.dumps(exported), encoding="utf-8")
        new_id = import_file(history.path, source)
        first = history.list_sessions()[0]
        assert (first["id"], first["title"]) == (new_id, "Old question (imported)")
        assert first["created_at"] == exported["session"]["created_at"]
        assert [m["created_at"] for m in history.messages(new_id)] == [
            m["created_at"] for m in exported["messages"]
        ]

    def test_history_import_file_cancelled_between_batches_keeps_nothing(
        self, tmp_path: Path
    ) -> None:
        """Cancel (the progress callback raising) after messages were written removes the
        hidden session and its messages; progress rose until then."""

        history = History(tmp_path / "h.db")
        data = _good_export()
        data["messages"] = [
            {"role": "user", "content": f"message {n}", "created_at": 1.0} for n in range(2500)
        ]
        source = tmp_path / "big.json"
        source.write_text(json.dumps(data), encoding="utf-8")
        seen: list[float] = []

        def progress(share: float) -> None:
            seen.append(share)
            if share > 0.5:
                raise ImportCancelled

        with pytest.raises(ImportCancelled):
            import_file(history.path, source, on_progress=progress)
        assert seen == sorted(seen) and seen[-1] > 0.5
        assert history.count_sessions() == 0
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
        raw.close()
        assert import_file(history.path, source) and history.count_sessions() == 1

    def test_history_keeps_one_draft_per_chat_and_the_new_chats_across_opens(
        self, tmp_path: Path
    ) -> None:
        """A draft per session and one for the new chat (None), kept across opens; ''
        forgets it; purging a chat purges its draft; a version-3 file gains the table."""

        path = tmp_path / "h.db"
        with History(path) as history:
            sid = history.create_session("chat")
            assert history.draft(sid) == "" and history.draft(None) == ""
            history.set_draft(sid, "half a thought")
            history.set_draft(None, "for a new chat")
            history.set_draft(sid, "a whole thought")
        with History(path) as history:
            assert history.draft(sid) == "a whole thought"
            assert history.draft(None) == "for a new chat"
            history.set_draft(None, "")
            assert history.draft(None) == ""
            history.delete_session(sid)
            history.purge_deleted([sid])
            assert history.draft(sid) == ""
        # A database of schema 3 (before drafts) gains them.
        old = tmp_path / "schema3.db"
        raw = sqlite3.connect(old)
        for script in MIGRATIONS[:3]:
            raw.executescript(script)
        raw.execute("PRAGMA user_version = 3")
        raw.close()
        with History(old) as history:
            history.set_draft(None, "after the migration")
            assert history.draft(None) == "after the migration"

    def test_a_database_of_schema_three_gains_pins_and_keeps_its_chats(
        self, tmp_path: Path
    ) -> None:
        """Today's released schema (3) opens with every chat unpinned; a pinned chat then
        stays above newer ones, and unpinning puts it back in its place."""

        path = tmp_path / "old.db"
        conn = sqlite3.connect(path)
        for script in MIGRATIONS[:3]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 3")
        for sid, updated in ((1, 100.0), (2, 200.0), (3, 300.0)):
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?, ?, 0, ?)",
                (sid, f"chat {sid}", updated),
            )
        conn.execute(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES (1, 'user', 'hi', 0)"
        )
        conn.commit()
        conn.close()

        with History(path) as history:
            assert [s["id"] for s in history.list_sessions()] == [3, 2, 1]
            assert [s["pinned"] for s in history.list_sessions()] == [0, 0, 0]
            assert history.messages(1)[0]["content"] == "hi"
            history.set_pinned(1, True)
            assert [s["id"] for s in history.list_sessions()] == [1, 3, 2]
            assert history.get_session(1)["pinned"] == 1
            assert "pinned" not in history.export_json(1)["session"]
            assert history.get_session(1)["project_id"] is None and history.projects.listed() == []
            history.set_pinned(1, False)
            assert [s["id"] for s in history.list_sessions()] == [3, 2, 1]
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        conn.close()

    def test_projects_group_chats_keep_defaults_and_travel_by_name_in_exports(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        work = history.projects.create("  Work   notes ")
        assert [p["name"] for p in history.projects.listed()] == ["Work notes"]
        with pytest.raises(HistoryError, match="already a project"):
            history.projects.create("work NOTES")
        history.projects.update(
            work,
            prompt_name="Terse",
            model="qwen",
            skills=["pdf"],
            params={"temperature": 0.2},
            collapsed=True,
        )
        with pytest.raises(HistoryError, match="temperature"):
            history.projects.update(work, params={"temperature": "hot"})
        project = history.projects.get(work)
        assert project is not None
        assert (project["prompt_name"], project["model"], project["skills"]) == (
            "Terse",
            "qwen",
            ["pdf"],
        )
        assert project["params"] == {"temperature": 0.2} and project["collapsed"] is True
        loose = history.create_session("chat")
        inside = history.create_session("chat", "qwen", project_id=work)
        history.add_message(inside, "user", "quarterly figures")
        assert [s["id"] for s in history.list_sessions(project=work)] == [inside]
        assert [s["id"] for s in history.list_sessions(project=None)] == [loose]
        assert history.count_sessions(project=work) == 1 and history.count_sessions() == 2
        forked = history.fork(inside, history.messages(inside)[0]["id"])
        assert history.get_session(forked)["project_id"] == work

        exported = history.export_json(inside)
        assert exported["session"]["project"] == "Work notes"
        assert "project_id" not in exported["session"]
        other = History(tmp_path / "other.db")
        copy = other.import_json(exported)
        (made,) = other.projects.listed()
        assert made["name"] == "Work notes" and other.get_session(copy)["project_id"] == made["id"]
        assert other.export_json(copy) == exported
        # A second import joins the project of that name instead of making another.
        assert other.get_session(other.import_json(exported))["project_id"] == made["id"]
        bad = {**exported, "session": {**exported["session"], "project": 5}}
        with pytest.raises(HistoryError, match="session.project"):
            other.import_json(bad)
        assert len(other.projects.listed()) == 1 and other.count_sessions() == 2

        history.projects.delete(work)
        assert history.projects.listed() == [] and history.get_session(inside)["project_id"] is None
        assert history.count_sessions(project=None) == 3
        history.close()
        other.close()

    def test_fault_ten_megabyte_single_delta_arrives_whole_in_client_window_and_history(
        self, chat_window, router, qtbot
    ) -> None:
        """One 10 MB delta: the client yields it as one piece; the window shows and saves it."""

        big = _fault_big_text(10)
        router.script(Reply(content=[big]))
        client = Client(router.url)
        try:
            pieces = [
                value
                for kind, value in client.stream_chat(
                    "test-model", [{"role": "user", "content": "x"}]
                )
                if kind == "content"
            ]
        finally:
            client.close()
        assert len(pieces) == 1 and pieces[0] == big

        window, history = chat_window()
        router.script(Reply(content=[big]))
        _fault_start(qtbot, window, "big")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=120000)
        row = _fault_row(history, window)
        assert row["status"] == "complete" and row["content"] == big
        assert window.conversation.last_assistant().content() == big

    @pytest.mark.parametrize("kind", ["garbage", "truncated", "scribbled"])
    def test_fault_damaged_history_is_moved_aside_and_the_window_says_so(
        self, chat_window, router, qtbot, tmp_path: Path, kind: str
    ) -> None:
        """A damaged history.db: the window says where it went, keeps it byte for byte, starts fresh."""

        path = tmp_path / "history.db"
        _fault_damage(path, kind)
        damaged = path.read_bytes()

        history = History(path)
        assert history.recovered_from is not None
        assert history.recovered_from.read_bytes() == damaged
        window, _ = chat_window(history=history)
        status = window.problem_bar.text()
        assert "damaged" in status and str(history.recovered_from) in status
        _send(qtbot, window, "fresh start")
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "fresh start",
            "echo: fresh start",
        ]
        assert window.problem_bar.text() == status
        # What could still be read was salvaged into the fresh file, beside the new chat.
        assert history.count_sessions() == (2 if history.salvaged else 1)
        assert (history.salvaged > 0) == (kind == "scribbled")

    def test_fault_one_damaged_page_costs_only_its_rows_the_rest_is_salvaged(
        self, tmp_path: Path
    ) -> None:
        """A page of messages scribbled over: the file is set aside untouched, and every session
        and message still readable is copied into the fresh history, searchable again."""

        path = tmp_path / "history.db"
        with History(path) as history:
            for n in range(200):
                session = history.create_session("chat", title=f"chat {n:03d}")
                history.add_message(session, "user", f"marker{n:03d}q " + "filler words " * 60)
                history.add_message(session, "assistant", f"marker{n:03d}a " + "answer words " * 60)
        data = bytearray(path.read_bytes())
        page = 4096
        hit = data.find(b"marker100q")
        assert hit > 0
        start = hit // page * page
        data[start : start + page] = b"\xa5" * page
        path.write_bytes(bytes(data))

        history = History(path)
        try:
            assert history.recovered_from is not None
            assert history.recovered_from.read_bytes() == bytes(data)
            assert 380 <= history.salvaged < 400
            assert history.count_sessions() == 200
            assert [s["title"] for s in history.search("marker150a")] == ["chat 150"]
            assert history.search("marker100q") == []
            history.add_message(history.create_session("chat"), "user", "still writable")
        finally:
            history.close()

    def test_fault_an_unrelated_sqlite_file_is_refused_not_taken_over(self, tmp_path: Path) -> None:
        """history_path pointing at another program's SQLite file: a HistoryError that says so;
        the file is left byte for byte, nothing is moved aside or migrated."""

        path = tmp_path / "places.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
            conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
        conn.close()
        before = path.read_bytes()
        with pytest.raises(HistoryError) as caught:
            History(path)
        assert "not a llamachat history" in str(caught.value) and "moz_places" in str(caught.value)
        assert str(path) in str(caught.value)
        assert path.read_bytes() == before
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("places")] == [
            "places.sqlite"
        ]

    def test_fault_sqlite_errors_split_into_the_environment_and_bugs(
        self, tmp_path: Path, monkeypatch
    ) -> None:
        """A database another program locks is the environment's fault: HistoryUnavailable with
        SQLite's code and what to do. Using a closed history is a bug: the sqlite3 error itself."""

        from llamachat.history import store as db

        monkeypatch.setattr(db, "BUSY_TIMEOUT_S", 0.05)
        path = tmp_path / "history.db"
        history = History(path)
        session = history.create_session("chat")
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(HistoryUnavailable) as caught:
                history.add_message(session, "user", "blocked")
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert caught.value.code == "SQLITE_BUSY"
        assert str(path) in str(caught.value) and "close that program" in str(caught.value)
        history.add_message(session, "user", "goes through now")
        history.close()
        with pytest.raises(sqlite3.ProgrammingError) as bug:
            history.messages(session)
        assert not isinstance(bug.value, HistoryError)

    def test_fault_read_only_data_folder_is_a_clear_message_and_nothing_is_moved(
        self, tmp_path: Path, make_unwritable
    ) -> None:
        """An existing history in a folder that refuses writes: exit 1 naming the file, data kept."""
        data = tmp_path / "data"
        data.mkdir()
        _fault_history_with_chat(data / "history.db", 4)
        before = sorted(p.name for p in data.iterdir())
        original = (data / "history.db").read_bytes()
        make_unwritable(data)
        config = _fault_write_config(
            tmp_path / "config.toml",
            f'history_path = "{data / "history.db"}"\nrouter_url = "http://127.0.0.1:9"\n'
            "manage_server = false\n",
        )
        done = _fault_cli(config, tmp_path)
        assert done.returncode == 1, done.stderr
        assert str(data / "history.db") in done.stderr and "writable" in done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(p.name for p in data.iterdir()) == before
        assert (data / "history.db").read_bytes() == original

    def test_fault_deleted_chat_is_purged_from_the_file_when_undo_ends(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A chat deleted in the sidebar can be undone while the notice shows; once the notice
        goes, its messages and full-text rows are gone from the file, not just hidden."""

        path = tmp_path / "history.db"
        history = History(path)
        keep = history.create_session("chat")
        history.add_message(keep, "user", "keepsake marmalade")
        gone = history.create_session("chat")
        history.add_message(gone, "user", "zanzibarquokka secret plans")
        history.add_message(gone, "assistant", "zanzibarquokka noted")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.delete_session(gone)
        assert sidebar.undo_delete() == gone  # still restorable while Undo is offered
        sidebar.delete_session(gone)
        # The notice bar closing (its timer, or the user) ends the undo window.
        close = [
            b for b in sidebar.findChildren(QAbstractButton) if b.accessibleName() == "Close notice"
        ]
        close[0].click()
        assert sidebar.undo_delete() is None
        assert history.get_session(gone) is None and history.message_count(gone) == 0
        assert history.search("zanzibarquokka") == []
        history.close()
        data = _fault_file_bytes(path)
        assert b"marmalade" in data
        assert b"zanzibarquokka" not in data

    def test_fault_chat_deleted_in_an_earlier_run_is_purged_at_start(self, tmp_path: Path) -> None:
        """A deleted chat the last run never purged (quit with Undo still offered) is purged when
        the history next opens, once older than the undo margin; a fresh deletion is kept."""

        from llamachat.history import store as db

        path = tmp_path / "history.db"
        history = History(path)
        old = history.create_session("chat")
        history.add_message(old, "user", "oldquokkaword")
        fresh = history.create_session("chat")
        history.add_message(fresh, "user", "freshquokkaword")
        history.delete_session(old)
        history.delete_session(fresh)
        history.close()
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE sessions SET deleted_at = deleted_at - ? WHERE id = ?",
                (db.PURGE_AFTER_S + 1, old),
            )
        conn.close()
        History(path).close()
        data = _fault_file_bytes(path)
        assert b"oldquokkaword" not in data
        reopened = History(path)
        try:
            rows = reopened._read("SELECT id FROM sessions")
            assert [r[0] for r in rows] == [fresh]
        finally:
            reopened.close()

    def test_search_and_list_keep_to_a_filter_of_project_model_and_last_update(
        self, tmp_path: Path
    ) -> None:
        """A SearchFilter keeps a search (title and message hits) and the plain list to a
        project or none, a model (the chat's or a message's), a span of last update."""

        path = tmp_path / "history.db"
        history = History(path)
        work = history.projects.create("Work")
        in_work = history.create_session("chat", "qwen", project_id=work)
        history.add_message(in_work, "user", "alpaca notes")
        history.add_message(in_work, "assistant", "an alpaca", model="llama")
        loose = history.create_session("chat", "gemma")
        history.add_message(loose, "user", "alpaca farm")
        old = history.create_session("chat", "qwen")
        history.add_message(old, "user", "alpaca history")
        titled = history.create_session("chat", "qwen", title="Alpaca plans")
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86400, old)
            )
        conn.close()
        ids = lambda rows: [row["id"] for row in rows]
        assert history.models() == ["gemma", "llama", "qwen"]
        assert ids(history.search("alpaca")) == [titled, loose, in_work, old]
        assert ids(history.search("alpaca", matching=SearchFilter(project=work))) == [in_work]
        assert ids(history.search("alpaca", matching=SearchFilter(project=None))) == [
            titled,
            loose,
            old,
        ]
        # A message's model counts, as does the chat's.
        assert ids(history.search("alpaca", matching=SearchFilter(model="llama"))) == [in_work]
        assert ids(history.search("alpaca", matching=SearchFilter(model="qwen"))) == [
            titled,
            in_work,
            old,
        ]
        both = SearchFilter(project=None, model="qwen", updated="month")
        assert ids(history.search("alpaca", matching=both)) == [titled]
        assert ids(history.search("plans", matching=SearchFilter(project=work))) == []
        assert history.search("  ", matching=both) == []
        # An empty query: the list and its count keep to the filter, newest first.
        assert ids(history.list_sessions(matching=SearchFilter(model="qwen"))) == [
            titled,
            in_work,
            old,
        ]
        assert ids(history.list_sessions(matching=both)) == [titled]
        assert history.count_sessions(matching=SearchFilter(updated="month")) == 3
        assert history.count_sessions(matching=SearchFilter(project=None, updated="today")) == 2
        assert history.list_sessions(matching=SearchFilter(model="nobody")) == []
        now = time.time()
        midnight = time.localtime(span_start("today", now))
        assert (midnight.tm_hour, midnight.tm_min, midnight.tm_yday) == (
            0,
            0,
            time.localtime(now).tm_yday,
        )
        assert span_start("week", now) == now - 7 * 86400 and span_start("any") is None
        with pytest.raises(ValueError, match="updated must be one of"):
            SearchFilter(updated="fortnight")
        # The model filter reads the model's messages through an index, not every message.
        plan = history._read(
            "EXPLAIN QUERY PLAN SELECT session_id FROM messages WHERE model = ?", ("qwen",)
        )
        assert "messages_by_model" in " ".join(str(row[3]) for row in plan)
        history.close()


class TestHistoryTree:
    """`llamachat.history.store` as a tree: versions, branches, the active path, forks, tree export."""

    def _chat(self, history: History) -> tuple[int, int, int]:
        """A session with one question and one reply: (session, question, reply)."""
        sid = history.create_session("chat", "m", prompt_name="Default")
        question = history.add_message(sid, "user", "Name a llama.")
        reply = history.add_message(sid, "assistant", "Dolly.")
        return sid, question, reply

    def test_versions_of_a_reply_are_siblings_and_the_newest_is_shown(self, tmp_path: Path) -> None:
        """Three regenerations are four versions of one reply; switching shows each with
        what followed it; a reopened file shows the path last shown."""

        history = History(tmp_path / "h.db")
        sid, question, first = self._chat(history)
        follow_up = history.add_message(sid, "user", "Why?")
        versions = [first]
        for text in ("Kuzco.", "Paca.", "Lhama."):
            versions.append(history.add_message(sid, "assistant", text, parent=question))
        path = history.messages(sid)
        assert [m["content"] for m in path] == ["Name a llama.", "Lhama."]
        assert path[1]["versions"] == versions and path[0]["versions"] == []
        assert history.message_count(sid) == 6

        shown = history.select_version(sid, first)
        assert [m["content"] for m in shown] == ["Name a llama.", "Dolly.", "Why?"]
        assert shown[2]["id"] == follow_up and shown[1]["versions"] == versions
        assert [m["content"] for m in history.select_version(sid, versions[2])][1] == "Paca."
        history.close()
        again = History(tmp_path / "h.db")
        assert [m["content"] for m in again.messages(sid)] == ["Name a llama.", "Paca."]
        with pytest.raises(HistoryError, match="no message"):
            again.select_version(sid, 10_000)

    def test_a_path_read_again_after_any_change_is_what_the_file_holds(
        self, tmp_path: Path
    ) -> None:
        """History keeps each chat's path between reads and brings it up to date with the
        writes a reply makes: after every kind of change, in any order, its messages are
        those a fresh connection reads from the file, and a caller's changes to the rows it
        got never reach the next reader."""

        history = History(tmp_path / "h.db")
        sid, question, reply = self._chat(history)
        other = history.create_session("chat", "m", prompt_name="Default")
        history.add_message(other, "user", "Elsewhere?")
        chance = random.Random(13)

        def step(number: int) -> None:
            path = history.messages(sid)
            ids = [m["id"] for m in path]
            match chance.choice(["add", "add", "save", "save", "version", "select", "delete"]):
                case "add":
                    role = "user" if path[-1]["role"] == "assistant" else "assistant"
                    history.add_message(sid, role, f"message {number}", status="streaming")
                case "save":
                    history.update_message(
                        chance.choice(ids),
                        content=f"saved {number}",
                        status="complete",
                        usage={"prompt_tokens": number},
                        tool_calls=[{"id": f"c{number}"}],
                    )
                case "version" if len(path) > 1:
                    at = chance.randrange(1, len(path))
                    history.add_message(
                        sid, path[at]["role"], f"version {number}", parent=path[at]["parent_id"]
                    )
                case "select":
                    history.select_version(sid, chance.choice(ids))
                case "delete" if len(path) > 2:
                    history.delete_branch(path[-1]["id"])
                case _:
                    history.add_message(other, "assistant", f"other {number}")

        for number in range(120):
            step(number)
            got = history.messages(sid)
            got[-1]["content"] = "changed by a caller"
            got[-1]["versions"].append(-1)
            fresh = History(tmp_path / "h.db")
            assert history.messages(sid) == fresh.messages(sid), number
            assert history.messages(other) == fresh.messages(other), number
            fresh.close()
        assert history.messages(sid)[0]["id"] == question and reply

    def test_a_chat_changed_by_another_connection_is_read_again(self, tmp_path: Path) -> None:
        """A second llamachat process (`ask --print`) writing the same file: the window's
        History sees its messages at the next read, not the path it read before."""

        history = History(tmp_path / "h.db")
        sid, _question, reply = self._chat(history)
        assert len(history.messages(sid)) == 2
        elsewhere = History(tmp_path / "h.db")
        elsewhere.update_message(reply, content="Dolly, edited elsewhere.")
        # The path still ends where it did: only the file says the reply changed.
        assert history.messages(sid)[-1]["content"] == "Dolly, edited elsewhere."
        elsewhere.add_message(sid, "user", "And another?")
        elsewhere.close()
        assert [m["content"] for m in history.messages(sid)] == [
            "Name a llama.",
            "Dolly, edited elsewhere.",
            "And another?",
        ]

    def test_edits_are_branches_that_keep_their_replies(self, tmp_path: Path) -> None:
        """Two edits of a question make three branches, each with its own reply."""

        history = History(tmp_path / "h.db")
        sid, _question, reply = self._chat(history)
        later = history.add_message(sid, "user", "Another?")
        history.add_message(sid, "assistant", "Kuzco.")
        edits = [later]
        for text in ("Two more?", "Three more?"):
            edits.append(history.add_message(sid, "user", text, parent=reply))
            history.add_message(sid, "assistant", f"Answer to {text}")
        path = history.messages(sid)
        assert [m["content"] for m in path] == [
            "Name a llama.",
            "Dolly.",
            "Three more?",
            "Answer to Three more?",
        ]
        assert path[2]["versions"] == edits
        walked = [[m["content"] for m in history.select_version(sid, edit)][2:] for edit in edits]
        assert walked == [
            ["Another?", "Kuzco."],
            ["Two more?", "Answer to Two more?"],
            ["Three more?", "Answer to Three more?"],
        ]
        assert history.get_session(sid)["title"] == "Name a llama."
        assert [hit["id"] for hit in history.search("Kuzco")] == [sid]  # every branch is found

    def test_delete_branch_takes_what_followed_and_the_path_ends_at_its_parent(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        sid, question, reply = self._chat(history)
        history.add_message(sid, "user", "More?")
        kept = history.add_message(sid, "assistant", "Other.", parent=question)
        history.select_version(sid, reply)
        history.delete_branch(reply)
        assert [m["id"] for m in history.messages(sid)] == [question]
        assert history.message_count(sid) == 2
        assert [m["id"] for m in history.select_version(sid, kept)] == [question, kept]

    def test_fork_copies_the_path_up_to_a_message_with_skills_and_prompt(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        sid, question, reply = self._chat(history)
        history.set_skills(sid, ["weather"])
        history.set_prompt(sid, "", "Be brief.")
        history.set_session_params(sid, {"temperature": 0.2})
        history.add_message(sid, "user", "More?")
        history.add_message(sid, "assistant", "Other.", parent=question)  # not on the path
        history.select_version(sid, reply)
        forked = history.fork(sid, reply)
        session = history.get_session(forked)
        assert session["title"] == "Name a llama. (fork)" and session["skills"] == ["weather"]
        assert (session["prompt_custom"], session["model"], session["mode"]) == (
            "Be brief.",
            "m",
            "chat",
        )
        assert [(m["role"], m["content"]) for m in history.messages(forked)] == [
            ("user", "Name a llama."),
            ("assistant", "Dolly."),
        ]
        assert history.message_count(forked) == 2 and history.message_count(sid) == 4
        assert history.session_params(forked) == {"temperature": 0.2}
        with pytest.raises(HistoryError, match="not on the path|no message"):
            history.fork(sid, 10_000)

    def test_tree_export_imports_back_equal_and_v1_files_still_import(self, tmp_path: Path) -> None:
        """The JSON export holds every branch and the active leaf; importing it recreates
        the same tree; a version-1 file (one path) imports as one path."""

        history = History(tmp_path / "h.db")
        sid, question, reply = self._chat(history)
        history.add_message(sid, "assistant", "Kuzco.", parent=question)
        history.add_message(sid, "user", "Edited.", parent=None)
        history.select_version(sid, reply)
        history.set_session_params(sid, {"temperature": 0.3, "seed": 7})
        exported = history.export_json(sid)
        assert exported["version"] == 2 and exported["session"]["active"] == 2
        assert exported["session"]["params"] == {"temperature": 0.3, "seed": 7}
        assert [(m["id"], m["parent"]) for m in exported["messages"]] == [
            (1, None),
            (2, 1),
            (3, 1),
            (4, None),
        ]
        other = History(tmp_path / "other.db")
        copy = other.import_json(json.loads(json.dumps(exported)))
        assert other.export_json(copy) == exported
        assert [m["content"] for m in other.messages(copy)] == ["Name a llama.", "Dolly."]

        old = _good_export()
        old["messages"].append({"role": "assistant", "content": "hello", "created_at": 2.0})
        single = history.import_json(old)
        assert [(m["content"], m["versions"]) for m in history.messages(single)] == [
            ("hi", []),
            ("hello", []),
        ]

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (lambda m, s: m[1].update(parent=7), "messages[2].parent"),
            (lambda m, s: m[1].update(parent=2), "messages[2].parent"),  # itself: not earlier
            (lambda m, s: m[1].update(id=1), "messages[2].id"),
            (lambda m, s: m[0].update(id="1"), "messages[1].id"),
            (lambda m, s: s.update(active=9), "session.active"),
            (lambda m, s: s.update(params=[1]), "session.params"),
        ],
    )
    def test_tree_import_names_the_bad_field_and_adds_nothing(
        self, tmp_path: Path, change, words: str
    ) -> None:

        history = History(tmp_path / "h.db")
        sid, _question, _reply = self._chat(history)
        data = history.export_json(sid)
        change(data["messages"], data["session"])
        with pytest.raises(HistoryError, match=re.escape(words)):
            history.import_json(data)
        assert history.count_sessions() == 1

    def test_a_database_of_the_last_release_migrates_to_one_path_per_session(
        self, tmp_path: Path
    ) -> None:
        """A schema-1 file (as 0.1.0 wrote it) opens with every chat a single path, its
        newest message the active leaf, nothing lost."""

        path = tmp_path / "old.db"
        conn = sqlite3.connect(path)
        conn.executescript(MIGRATIONS[0])
        conn.execute("PRAGMA user_version = 1")
        for sid in (1, 2):
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?, ?, 0, 0)",
                (sid, f"chat {sid}"),
            )
        rows = [(1, "user", "a"), (2, "user", "x"), (1, "assistant", "b"), (1, "user", "c")]
        for session_id, role, content in rows:
            conn.execute(
                "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, 0)",
                (session_id, role, content),
            )
        conn.commit()
        conn.close()

        history = History(path)
        assert [(m["content"], m["parent_id"]) for m in history.messages(1)] == [
            ("a", None),
            ("b", 1),
            ("c", 3),
        ]
        assert [m["content"] for m in history.messages(2)] == ["x"]
        history.add_message(1, "assistant", "d")
        assert [m["content"] for m in history.messages(1)][-2:] == ["c", "d"]
        assert [hit["id"] for hit in history.search("b")] == [1]

    def test_history_add_branch_makes_a_new_root_version_and_keeps_the_original_path(
        self, tmp_path: Path
    ) -> None:
        """`add_branch` writes a compacted chat's summary and kept messages as a new branch
        from the root in one go: the active path, the original path one version away."""

        with History(tmp_path / "h.db") as history:
            session = history.create_session("chat", "m")
            first = history.add_message(session, "user", "first question")
            history.add_message(session, "assistant", "first answer")
            original = history.messages(session)
            row = {
                k: v
                for k, v in original[-1].items()
                if k not in ("id", "session_id", "parent_id", "versions")
            }
            summary = {**row, "role": "system", "content": "summary", "usage": {"summary_of": 1}}
            ids = history.add_branch(session, [summary, row])  # type: ignore[list-item]
            path = history.messages(session)
            assert [m["id"] for m in path] == ids and path[0]["parent_id"] is None
            assert path[0]["versions"] == [first, ids[0]] and path[0]["usage"] == {"summary_of": 1}
            assert history.get_session(session)["title"] == "first question"  # type: ignore[index]
            back = history.select_version(session, first)
            assert [m["id"] for m in back] == [m["id"] for m in original]


class TestPrompts:
    """`llamachat.prompts`: system prompt presets."""

    def test_prompts_ensure_default_creates_one_default_preset_only_when_empty(
        self,
        tmp_path: Path,
    ) -> None:

        prompts = Prompts(tmp_path / "prompts")
        prompts.ensure_default()
        assert prompts.names() == [DEFAULT_NAME]
        assert prompts.get(DEFAULT_NAME).startswith("You are a helpful assistant")
        assert (tmp_path / "prompts" / "Default.md").is_file()
        prompts.save(DEFAULT_NAME, "Edited by the user.")
        prompts.ensure_default()
        assert prompts.get(DEFAULT_NAME) == "Edited by the user."
        prompts.delete(DEFAULT_NAME)
        prompts.save("Pirate", "Talk like a pirate.")
        prompts.ensure_default()
        assert prompts.names() == ["Pirate"]

    def test_prompts_save_list_get_rename_delete(self, tmp_path: Path) -> None:

        prompts = Prompts(tmp_path)
        prompts.save("writer", "Write well.\n")
        prompts.save("Coder", "Write code.")
        prompts.save("Ünïcode é", "ok")
        (tmp_path / ".writer.md.swp").write_text("editor junk")
        assert prompts.names() == ["Coder", "writer", "Ünïcode é"]
        assert prompts.get("writer") == "Write well.\n"
        prompts.save("writer", "Write better.")
        assert prompts.get("writer") == "Write better."
        prompts.rename("writer", "Writer 2")
        assert prompts.names() == ["Coder", "Writer 2", "Ünïcode é"]
        with pytest.raises(PromptError, match="already exists"):
            prompts.rename("Coder", "Writer 2")
        with pytest.raises(PromptError, match="no prompt preset named 'writer'"):
            prompts.get("writer")
        with pytest.raises(PromptError, match="no prompt preset"):
            prompts.rename("writer", "x")
        prompts.delete("Coder")
        with pytest.raises(PromptError, match="no prompt preset"):
            prompts.delete("Coder")
        assert prompts.names() == ["Writer 2", "Ünïcode é"]

    @pytest.mark.parametrize(
        "name", ["", "   ", "a/b", "../escape", "..", ".hidden", "a\\b", " padded", "x\ny", "c:d"]
    )
    def test_prompts_reject_names_that_are_not_safe_file_names(
        self, tmp_path: Path, name: str
    ) -> None:

        prompts = Prompts(tmp_path / "prompts")
        for action in (
            lambda: prompts.save(name, "text"),
            lambda: prompts.get(name),
            lambda: prompts.delete(name),
            lambda: prompts.rename("x", name),
        ):
            with pytest.raises(ValueError, match="preset"):
                action()
        assert not any(tmp_path.rglob("*.md"))

    def test_prompts_unwritable_folder_raises_prompt_error_naming_the_file(
        self, tmp_path: Path, make_unwritable
    ) -> None:

        (tmp_path / "prompts").mkdir()
        folder = make_unwritable(tmp_path / "prompts")
        with pytest.raises(PromptError) as caught:
            Prompts(folder).save("New", "text")
        assert str(folder / "New.md") in str(caught.value)


class TestTurn:
    """`llamachat.turn`: the one turn builder."""

    def test_turn_system_message_is_preset_date_then_skills_in_load_order_byte_stable(
        self,
        tmp_path,
    ) -> None:
        """Named system parts: preset, the date note only with search, skills as loaded."""
        from llamachat.tools import web_search

        store = _turn_store(tmp_path)
        parts = turn.system_parts(
            "Be brief.", search_on=True, store=store, names=["zeta", "missing", "alpha"]
        )
        assert [part.name for part in parts] == ["system", "date", "skill:zeta", "skill:alpha"]
        text = turn.join_system(parts)
        assert text == "\n\n".join(
            [
                "Be brief.",
                web_search.date_note(),
                system_part(store.load("zeta")),
                system_part(store.load("alpha")),
            ]
        )
        again = turn.system_parts("Be brief.", search_on=True, store=store, names=["zeta", "alpha"])
        assert turn.join_system(again).encode() == text.encode()
        assert turn.system_parts("", search_on=False, store=None, names=["zeta"]) == ()
        plain = turn.join_system(turn.system_parts("P", search_on=False, store=store))
        assert plain == "P" and web_search.date_note() not in plain

    def test_turn_replays_history_and_names_every_part_of_the_question(self, tmp_path) -> None:
        """History rows replay (answers only); the last question's text and files are named parts."""
        from llamachat.tools import web_search

        store = _turn_store(tmp_path)
        cfg = Config(
            search_url="http://127.0.0.1:9", max_searches=3, skills_dir=tmp_path / "skills"
        )
        image = {
            "kind": "image",
            "name": "cat.png",
            "mime": "image/png",
            "data": "data:image/png;base64,AA==",
        }
        notes = {"kind": "text", "name": "notes.py", "mime": "text/x-python", "data": "print(1)\n"}
        with History(tmp_path / "history.db") as history:
            session = history.create_session("chat", "m")
            history.add_message(session, "user", "look", attachments=[image])
            reply = history.add_message(session, "assistant", "A cat.", model="m")
            history.update_message(reply, reasoning="It has whiskers.")
            history.add_message(session, "assistant", "", model="m", status="error")
            history.add_message(session, "user", "and this?", attachments=[notes])
            stored = history.messages(session)

        system = turn.system_parts("Be brief.", search_on=True, store=store, names=["alpha"])
        request = turn.build_turn(cfg, model="m", system=system, messages=stored, store=store)
        assert [part.name for part in request.parts()] == [
            "system",
            "date",
            "skill:alpha",
            "history",
            "user",
            "attachment:notes.py",
            "tools",
        ]
        assert request.messages() == [
            {"role": "system", "content": request.system_message()},
            {
                "role": "user",
                "content": "look\n\n[image cat.png not sent: this model does not read images]",
            },
            {"role": "assistant", "content": "A cat."},
            {"role": "user", "content": "and this?\n\nnotes.py:\n```py\nprint(1)\n```"},
        ]
        assert (
            request.search_cfg.url == "http://127.0.0.1:9" and request.search_cfg.max_searches == 3
        )
        assert request.skills_cfg.store is store
        assert [tool["function"]["name"] for tool in request.tools] == [
            web_search.TOOL_SCHEMA["function"]["name"],
            "load_skill",
        ]

        seeing = turn.build_turn(
            cfg, model="m", system=(), messages=stored[:1], images=True, search_on=False
        )
        assert seeing.messages() == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": image["data"]}},
                ],
            }
        ]
        assert (seeing.search_cfg, seeing.skills_cfg, seeing.tools) == (None, None, ())

    def test_turn_parse_question_takes_commands_then_mentions_of_known_skills(
        self, tmp_path
    ) -> None:
        """`/name` commands leave the text, mentions stay in it; unknown names are left alone.

        A one-word mention is only suggested, unless mentions are on for that skill."""

        store = _turn_store(tmp_path)
        question = turn.parse_question("/zeta compare with alpha and /nope", store)
        assert question == turn.Question(
            "compare with alpha and /nope", ("zeta",), ("zeta",), ("alpha",)
        )
        question = turn.parse_question("/zeta compare with alpha", store, always=["alpha"])
        assert question == turn.Question("compare with alpha", ("zeta", "alpha"), ("zeta",))
        assert turn.parse_question("/zeta hi", None) == turn.Question("/zeta hi")

    def test_turn_pick_model_prefers_configured_then_loaded_then_first_listed(self) -> None:
        """The one-shot model: config, else a model in memory, else the first listed, else ''."""

        listed = [ModelInfo(id="a", status="unloaded"), ModelInfo(id="b", status="loaded")]
        assert turn.pick_model(Config(oneshot_model="c", default_model="d"), listed) == "c"
        assert turn.pick_model(Config(default_model="d"), listed) == "d"
        assert turn.pick_model(Config(), listed) == "b"
        assert turn.pick_model(Config(), listed[:1]) == "a"
        assert turn.pick_model(Config(), []) == ""

    def test_turn_skill_store_sees_a_skills_folder_created_after_start_up(self, tmp_path) -> None:
        """No skills folder yet: a store all the same, which finds the folder once it exists."""

        cfg = Config(skills_dir=tmp_path / "later")
        assert not cfg.skills_enabled
        store = turn.skill_store(cfg)
        assert store is not None and turn.skills_config(cfg, store) is None
        (tmp_path / "later" / "zeta").mkdir(parents=True)
        (tmp_path / "later" / "zeta" / "SKILL.md").write_text(TURN_SKILL_ZETA, encoding="utf-8")
        assert turn.parse_question("/zeta hi", store).skills == ("zeta",)
        assert turn.skills_config(cfg, store).store is store
        off = Config(skills_dir=tmp_path / "later", skills_enabled=False)
        assert turn.skill_store(off) is None


class TestContext:
    """`llamachat.context` and the meter: the next request counted, checked and shown."""

    def test_context_meter_total_is_the_prompt_the_router_reads(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Every part is counted (a skill, the history, the draft, an attachment, tools): the
        meter's total is the router's prompt_n + cache_n for the request that follows."""

        window, history = chat_window()
        watch, meter = window.chat.context, window.meter
        qtbot.waitUntil(lambda: meter.context_size() == 4096)
        _send(qtbot, window, "/weather hello")
        notes = tmp_path / "notes.txt"
        notes.write_text("Rain in Paris all week, 12 degrees.\n", encoding="utf-8")
        window.composer.add_attachment(file_attachment(notes, images=False))
        window.composer.set_text("What should I wear today?")
        qtbot.waitUntil(lambda: watch.breakdown().exact and watch.breakdown().get("user") > 0)

        parts = dict(watch.breakdown().parts)
        assert {"system", "skill:weather", "history", "user", "attachment:notes.txt"} <= set(parts)
        assert parts["tools"] > 0 and parts["template"] > 0
        tip = meter.toolTip()
        for label in ("skill weather", "earlier messages", "attachment notes.txt", "reply reserve"):
            assert label in tip, label
        counted = meter.used()
        assert meter.label.text() == f"{counted:,} / 4,096"

        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        timings = history.messages(window.session_id)[-1]["timings"]
        read = timings["prompt_n"] + timings["cache_n"]
        assert abs(counted - read) <= 0.02 * read, (counted, read, timings, watch.breakdown())
        assert timings["cache_n"] > 0  # the byte-stable prefix was reused

    def test_context_meter_counts_the_mcp_tools_a_reply_is_offered(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """An MCP server's tools are counted once it is up (its first turn starts it); the
        total is still the router's prompt for the request that follows."""

        window, history = _mcp_window(chat_window, router, tmp_path, _mcp_time_toml())
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 4096 and watch.breakdown().exact)
        without = watch.breakdown().get("tools")
        _send(qtbot, window, "hello")
        qtbot.waitUntil(
            lambda: watch.breakdown().exact and watch.breakdown().get("tools") > without,
            timeout=30_000,
        )
        window.composer.set_text("What time is it?")
        qtbot.waitUntil(lambda: watch.breakdown().exact and watch.breakdown().get("user") > 0)
        counted = window.meter.used()
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30_000)
        sent = router.chat_requests()[-1].json
        assert "time_get_current_time" in [t["function"]["name"] for t in sent["tools"]]
        timings = history.messages(window.session_id)[-1]["timings"]
        assert counted == timings["prompt_n"] + timings["cache_n"]

    def test_context_keystrokes_send_no_request_and_the_draft_is_counted_once(
        self, chat_window, router, qtbot
    ) -> None:
        """Typing is estimated at once; the server counts the draft after a pause, once."""

        window, _history = chat_window()
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.breakdown().exact and watch.context_size() == 4096)
        before = len(router.requests)
        for n in range(1, 40):
            window.composer.set_text("word " * n)
        assert len(router.requests) == before
        assert watch.breakdown().get("user") > 0 and not watch.breakdown().exact
        qtbot.waitUntil(lambda: watch.breakdown().exact)
        counted = [q for q in router.requests[before:] if q.path == "/tokenize"]
        assert [q.json["content"] for q in counted] == ["word " * 39]
        assert watch.breakdown().get("user") == 39

    def test_context_oversized_message_is_refused_kept_and_offers_ways_out(
        self, chat_window, router, qtbot
    ) -> None:
        """Request + reply reserve over the context: nothing is sent, the message stays in the
        composer, the numbers are shown with one-click ways out (unload a skill, new chat)."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window()
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        _send(qtbot, window, "/weather hi")
        asked = len(router.chat_requests())
        long = "word " * 1900
        window.composer.set_text(long)
        qtbot.waitUntil(lambda: window.meter.state == "over")
        assert "does not fit" in window.meter.toolTip()

        window.send()
        assert len(router.chat_requests()) == asked
        assert window.composer.text() == long
        assert [m["content"] for m in history.messages(window.session_id)][-1] != long
        panel = window.overflow
        assert panel.isVisible()
        said = panel.text.text()
        assert "Not sent" in said and "2,048" in said and "512 for the reply" in said
        buttons = {b.text(): b for b in panel.findChildren(QPushButton)}
        unload = next(text for text in buttons if text.startswith("Unload weather (−"))
        assert "New chat with this message" in buttons and "Dismiss" in buttons

        qtbot.mouseClick(buttons[unload], Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == [] and not panel.isVisible()
        assert window.composer.text() == long
        window.send()
        assert panel.isVisible() and len(router.chat_requests()) == asked
        buttons = {b.text(): b for b in panel.findChildren(QPushButton)}
        qtbot.mouseClick(buttons["New chat with this message"], Qt.MouseButton.LeftButton)
        assert window.session_id is None and window.composer.text() == long

    def test_context_prompt_progress_shows_in_the_reply_and_stop_works_during_it(
        self, chat_window, router, qtbot
    ) -> None:
        """return_progress: the reply shows "Reading N of M tokens" with a bar while the prompt
        is read, the meter follows it live, and Stop ends it and drops the connection."""

        window, history = chat_window()
        router.script(Reply(content="Answer.", stall_after=0))
        window.composer.set_text("read this")
        window.send()
        view = window.conversation.last_assistant()
        qtbot.waitUntil(lambda: view.findChild(ReadingProgress) is not None)
        reading = view.findChild(ReadingProgress)
        # The three chunks may come in more than one frame: the last one read it all.
        qtbot.waitUntil(lambda: 1 < reading.bar.maximum() == reading.bar.value())
        sent = router.chat_requests()[-1].json
        assert sent["return_progress"] is True and sent["timings_per_token"] is True
        total = reading.bar.maximum()
        assert reading.label.text() == f"Reading {total:,} of {total:,} tokens"
        assert reading.isVisible() and reading.bar.value() == total
        assert window.meter.used() == total

        window.stop()
        assert not window.is_streaming() and not reading.isVisible()
        qtbot.waitUntil(lambda: router.disconnects == 1)
        row = history.messages(window.session_id)[-1]
        assert row["status"] == "stopped" and row["timings"]["prompt_n"] == total

    def test_context_size_of_a_model_the_reply_loads_shows_while_it_streams(
        self, chat_window, qtbot
    ) -> None:
        """A model not loaded has no size to show; the reply that loads it brings it, live."""

        with ScriptedRouter([Model("test-model", n_ctx=4096)]) as cold:
            window, _history = chat_window(url=cold.url)
            qtbot.waitUntil(lambda: tasks.manager().running() == 0)
            assert window.meter.context_size() is None
            cold.script(Reply(content=["Once ", "upon ", "a ", "time"], stall_after=2))
            window.composer.set_text("Tell me a story")
            window.send()
            qtbot.waitUntil(lambda: "Once" in window.conversation.last_assistant().content())
            qtbot.waitUntil(lambda: window.meter.context_size() == 4096)
            assert window.is_streaming() and "/ 4,096" in window.meter.label.text()
            window.stop()

    def test_context_stopped_reply_keeps_its_figures_in_history_and_on_screen(
        self, chat_window, router, qtbot
    ) -> None:
        """A reply stopped mid-way keeps prompt, cache, speeds and time to first token; the
        line under it and its tooltip show them, also when the chat is opened again."""

        window, history = chat_window()
        _send(qtbot, window, "first")
        router.script(Reply(content=["one ", "two ", "three ", "four"], stall_after=3))
        window.composer.set_text("second")
        window.send()
        qtbot.waitUntil(lambda: window.conversation.last_assistant().content() == "one two ")
        window.stop()
        row = history.messages(window.session_id)[-1]
        assert row["status"] == "stopped"
        timings = row["timings"]
        assert timings["predicted_n"] == 2 and timings["cache_n"] > 0 and timings["prompt_n"] > 0
        assert timings["ttft_ms"] >= 0

        def shown() -> tuple[str, str]:
            label = _by_name(window.conversation.last_assistant(), QLabel, "Reply statistics")
            return label.text(), label.toolTip()

        line, tip = shown()
        assert "2 tokens" in line and f"{timings['cache_n']:,} cached" in line
        assert "reused from the cache" in tip and "Time to first token" in tip
        session = window.session_id
        window.new_session()
        window.open_session(session)
        assert shown() == (line, tip)

    def test_context_quick_window_refuses_what_cannot_fit_and_keeps_the_question(
        self, quick, router, qtbot
    ) -> None:
        """The quick window checks before sending: it says why, the question stays; the
        answer before does not count against the next question."""

        router.models["test-model"].n_ctx = 1024
        window, _history = quick(default_model="test-model")
        window.present()
        qtbot.waitUntil(lambda: window.chat.context.context_size() == 1024)
        _quick_ask(qtbot, window, "word " * 300)
        asked = len(router.chat_requests())
        long = "word " * 900
        window.composer.set_text(long)
        window.send()
        assert len(router.chat_requests()) == asked and window.composer.text() == long
        assert "Not sent" in window.notice.text() and "1,024" in window.notice.text()
        window.composer.set_text("word " * 300)
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        assert len(router.chat_requests()) == asked + 1

    def test_context_ask_print_refuses_what_cannot_fit_with_exit_2(self, router, tmp_path) -> None:
        """`ask --print` checks too: exit 2, the numbers on stderr, nothing sent."""

        router.models["test-model"].n_ctx = 512
        config = _quick_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        done = _llamachat(config, "ask", "--print", "word " * 600)
        assert done.returncode == 2, done.stderr
        assert "Not sent" in done.stderr and "512" in done.stderr and "message:" in done.stderr
        assert router.chat_requests() == [] and done.stdout == ""

    def test_context_skills_catalog_shortens_descriptions_then_leaves_skills_out(
        self, tmp_path, qtbot
    ) -> None:
        """The load_skill catalog keeps to its budget: shorter descriptions first, then skills
        left out (of the catalog and the enum), which the Skills panel lists."""

        root = tmp_path / "skills"
        for n in range(10):
            _write_skill(root, f"skill-{n:02}", _skill_md(f"skill-{n:02}", "Does things. " * 30))
        store = SkillStore(root)

        def catalog(max_chars: int | None) -> tuple[str, list[str]]:
            schema = store.tool_schema(max_chars=max_chars)
            function = schema["function"]
            return function["description"], function["parameters"]["properties"]["name"]["enum"]

        full, names = catalog(None)
        short, short_names = catalog(800)
        assert short_names == names and len(short) < len(full)
        assert "- skill-00: Does things." in short and store.left_out(800) == []
        tight, kept = catalog(60)
        left = store.left_out(60)
        assert kept and left and kept + left == names
        assert all(f"- {name}" in tight for name in kept) and left[0] not in tight

        cfg = Config(skills_dir=root)
        turned = turn.build_turn(cfg, model="m", system=(), n_ctx=2048, store=store)
        assert turn.skills_catalog_budget(cfg, 2048) == int(2048 * 0.02 / 0.3)
        assert turned.skills_cfg is not None and turned.skills_cfg.catalog_chars == 136
        panel = SkillsPanel(store, list, import_dir=root, catalog_budget=lambda: 60)
        qtbot.addWidget(panel)
        assert panel.left_out() == left and panel.left_out_label.isVisibleTo(panel)

    def test_context_without_a_tokenizer_estimates_and_learns_from_usage(self, router) -> None:
        """A server with no /tokenize is asked once; estimates follow the usage it reports."""

        client = Client(router.url + "/elsewhere")  # every llama.cpp endpoint answers 404
        tokenizer = context.Tokenizer(client, "test-model")
        assert tokenizer.count("one two three") == (round(13 * context.TOKENS_PER_CHAR), False)
        assert not tokenizer.can_count
        asked = len(router.requests)
        assert tokenizer.count("four five")[1] is False and len(router.requests) == asked
        tokenizer.learn(1000, 500)
        assert tokenizer.tokens_per_char == 0.5 and tokenizer.estimate("x" * 10) == 5
        client.close()

    def test_context_raise_offers_the_trained_size_and_writes_the_models_preset(
        self, tmp_path, qtbot
    ) -> None:
        """Raising the context: the next usual size that fits, at most the trained size, written
        as ctx-size into that model's section of the preset, the rest of the file kept."""

        parts = context.Breakdown((("history", 5000), ("user", 100)), exact=True)
        overflow = context.Overflow("smol", parts, 4096, 1024, trained=8192)
        assert raised_context(overflow) == 8192
        assert raised_context(dataclasses.replace(overflow, trained=6000)) is None
        panel = OverflowPanel()
        qtbot.addWidget(panel)
        with qtbot.waitSignal(panel.raise_context) as raised:
            panel.show_overflow(overflow, managed=True)
            button = next(
                b for b in panel.findChildren(QPushButton) if b.text().startswith("Raise")
            )
            assert button.text() == "Raise the context to 8,192"
            button.click()
        assert raised.args == ["smol", 8192]
        panel.show_overflow(overflow, managed=False)
        assert not any(b.text().startswith("Raise") for b in panel.findChildren(QPushButton))

        preset = tmp_path / "preset.ini"
        preset.write_text("[other]\nmodel = /m/other.gguf\n[smol]\nmodel = /m/smol.gguf\n")
        set_preset_context(preset, "smol", 8192)
        set_preset_context(preset, "new-one", 2048)
        written = preset.read_text()
        assert "[other]\nmodel = /m/other.gguf" in written
        assert "[smol]\nmodel = /m/smol.gguf\nctx-size = 8192" in written
        assert "[new-one]\nctx-size = 2048" in written

    @pytest.mark.real_router
    def test_context_real_router_counts_the_prompt_and_refuses_what_cannot_fit(
        self, chat_window, real_router, qtbot
    ) -> None:
        """SmolLM2 at --ctx-size 2048: the meter's total for a request is llama-server's
        prompt_n + cache_n within 2%; a message too long is refused and kept; the stream
        reports the prompt's progress."""

        client = Client(real_router.url)
        models = Models(client)
        models.load(SMOL_ID)
        assert models.wait_until_loaded(SMOL_ID, timeout=60).status == "loaded"
        window, history = chat_window(url=real_router.url, default_model=SMOL_ID)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048, timeout=10_000)
        window.chat.load_skill("weather")
        window.composer.set_text("Tell me about the history of Paris in three sentences.")
        # A busy machine may keep a count from the server: the watch counts it again.
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=60_000)
        counted = window.meter.used()

        request = dataclasses.replace(
            window.chat.next_turn(),
            question=turn.user_parts(window.composer.text(), [], images=False),
        )
        events = list(
            client.stream_chat(
                SMOL_ID,
                request.messages(),
                params={**backend.LLAMA_PARAMS, "max_tokens": 2, "tools": list(request.tools)},
            )
        )
        client.close()
        timings = next(value for kind, value in events if kind == "stats")["timings"]
        read = timings["prompt_n"] + timings["cache_n"]
        offered = [tool["function"]["name"] for tool in request.tools]
        assert abs(counted - read) <= 0.02 * read, (
            counted,
            read,
            timings,
            watch.breakdown(),
            offered,
        )
        progress = [value for kind, value in events if kind == "progress"]
        assert progress and progress[-1]["processed"] == progress[-1]["total"] == read

        long = "word " * 2500
        window.composer.set_text(long)
        qtbot.waitUntil(lambda: window.meter.state == "over", timeout=30_000)
        window.send()
        assert window.overflow.isVisible() and window.composer.text() == long
        assert window.session_id is None and history.list_sessions() == []

    def test_context_a_skill_the_message_loads_is_counted_before_send_and_retry(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A skill loaded by the message itself (its estimate fits, its count does not) is
        counted by the server before the send: refused with the panel, and so is a Retry."""

        router.models["test-model"].n_ctx = 2048
        # One token a character for the scripted tokenizer: the estimate is a third of it.
        _write_skill(
            tmp_path / "skills",
            "big-skill",
            "---\nname: big-skill\ndescription: Big.\n---\n" + "a." * 900 + "\n",
        )
        window, history = chat_window()
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and watch.breakdown().exact)
        _send(qtbot, window, "hello")
        reply_id = history.messages(window.session_id)[-1]["id"]
        asked = len(router.chat_requests())

        window.composer.set_text("/big-skill say hello")
        window.send()
        assert window.overflow.isVisible()
        unload = [b.text() for b in window.overflow.findChildren(QPushButton)]
        assert any(text.startswith("Unload big-skill (−1,8") for text in unload), unload
        assert len(router.chat_requests()) == asked
        assert window.loaded_skills() == ["big-skill"]

        window.overflow.hide()
        window.retry(reply_id)
        assert window.overflow.isVisible() and not window.is_streaming()
        assert len(router.chat_requests()) == asked
        assert history.messages(window.session_id)[-1]["id"] == reply_id

    def test_context_size_is_asked_as_soon_as_the_model_loads(self, chat_window, qtbot) -> None:
        """A model not loaded has no size; loading it (not a send) brings the size at once."""

        with ScriptedRouter([Model("test-model", n_ctx=4096)]) as cold:
            window, _history = chat_window(url=cold.url)
            qtbot.waitUntil(lambda: tasks.manager().running() == 0)
            assert window.meter.context_size() is None
            Models(Client(cold.url)).load("test-model")
            qtbot.waitUntil(lambda: window.meter.context_size() == 4096, timeout=10_000)
            assert cold.chat_requests() == []

    def test_context_model_that_cannot_take_tools_is_sent_none_and_told(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """`/props` says the template takes no tools: the Turn has none (MCP's neither, once
        its server is up), the meter counts none and says why, the panels say so."""

        router.models["test-model"].tools = False
        window, _history = _mcp_window(chat_window, router, tmp_path, _mcp_time_toml())
        watch = window.chat.context
        qtbot.waitUntil(lambda: not watch.takes_tools() and watch.breakdown().exact)
        assert window.chat.next_turn().tools == ()
        assert watch.breakdown().get("tools") == 0
        assert "tools: none sent (this model's chat template cannot take tools)" in (
            window.meter.toolTip()
        )
        _send(qtbot, window, "What time is it?")
        qtbot.waitUntil(lambda: window.app.mcp.ready_schemas() != (), timeout=30_000)
        _send(qtbot, window, "And now?")
        for request in router.chat_requests():
            assert "tools" not in request.json
        assert window.chat.next_turn().tools == ()
        mcp_panel = window.open_mcp_panel()
        assert "None of these tools is sent" in mcp_panel.total.text()
        skills_panel = window.skills.open_panel()
        assert skills_panel is not None and skills_panel.tools_label.isVisible()
        assert "no skill tools" in skills_panel.tools_label.text()

    @pytest.mark.real_router
    def test_context_real_router_smollm2_is_sent_no_tools(
        self, chat_window, real_router, qtbot
    ) -> None:
        """llama-server says SmolLM2's template takes no tools (chat_template_caps): once it
        is loaded the meter knows its size and the request offers no tools."""

        models = Models(Client(real_router.url))
        if _status(real_router.url, SMOL_ID) != "loaded":
            models.load(SMOL_ID)
        assert models.wait_until_loaded(SMOL_ID, timeout=60).status == "loaded"
        assert models.takes_tools(SMOL_ID) is False
        window, _history = chat_window(url=real_router.url, default_model=SMOL_ID)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and not watch.takes_tools())
        assert window.chat.next_turn().tools == ()
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=30_000)
        assert watch.breakdown().get("tools") == 0

    def test_compact_split_keeps_the_last_exchanges_and_trim_leaves_whole_exchanges_out(
        self,
    ) -> None:
        """`compact.split` summarizes all but the last `keep` exchanges (an earlier summary's
        count carries on); `trim_count` leaves out whole exchanges, the fewest that make room."""

        rows = [
            {"role": "system", "content": "old", "usage": {"summary_of": 10}},
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2"},
            {"role": "user", "content": "q3"},
            {"role": "assistant", "content": "a3"},
        ]
        cut = compact.split(rows, 2)
        assert [r["content"] for r in cut.kept] == ["q2", "a2", "q3", "a3"]
        assert cut.count() == 12 and compact.summary_title(cut.count()).endswith(
            "12 earlier messages"
        )
        assert compact.split(rows, 3).earlier == compact.split(rows, 5).earlier == ()
        assert compact.transcript(cut.earlier) == [
            "Summary of what came before:\nold",
            "User: q1",
            "Assistant: a1",
        ]
        cost = {"old": 0, "q1": 5, "a1": 5, "q2": 5, "a2": 5, "q3": 5, "a3": 5}
        count = compact.trim_count(rows[1:], 6, lambda row: cost[row["content"]])
        assert count == 2  # q1 and its reply: the request starts at a question
        assert compact.trim_count(rows[1:], 31, lambda row: cost[row["content"]]) is None
        lines = "a\nb\nc\n"
        assert compact.trim_text(lines, 1, lambda _line: 20) == (
            "[1 earlier line not sent]\nb\nc\n",
            1,
        )
        assert compact.trim_text(lines, 20, lambda _line: 20) == (
            "[2 earlier lines not sent]\nc\n",
            2,
        )
        assert compact.trim_text(lines, 60, lambda _line: 20) is None

    def test_compact_summarizes_a_60000_token_history_in_pieces_within_a_small_context(
        self, router
    ) -> None:
        """A 60,000-token history against a 2,048-token context: every summarizing request
        fits the context with its answer, the history is summarized in pieces, then the
        pieces' summaries in one last request, with the fixed prompt and the focus."""

        router.models["test-model"].n_ctx = 2048
        rows: list[dict] = []
        for n in range(100):
            rows.append({"role": "user", "content": f"question {n} " + "alpha beta " * 200})
            rows.append({"role": "assistant", "content": f"answer {n} " + "gamma " * 198})
        words = sum(len(re.findall(r"\w+|[^\w\s]", r["content"])) for r in rows)
        assert words >= 60_000
        router.script(*[Reply(content=f"Part {n} said little.") for n in range(400)])
        client = Client(router.url)
        tokenizer = context.Tokenizer(client, "test-model")
        budget = compact.Budget.for_context(2048, tokenizer.quick(compact.instructions("API")))
        seen: list[tuple[int, int]] = []
        summary = compact.summarize(
            compact.transcript(rows),
            compact.ask_model(client, "test-model"),
            budget=budget,
            cost=tokenizer.quick,
            focus="API",
            on_piece=lambda n, total: seen.append((n, total)),
        )
        client.close()
        requests = [r.json for r in router.chat_requests()]
        assert summary.startswith("Part ") and len(requests) == len(seen) > 2
        assert seen[-1] == (1, 1) and seen[0][1] == len(requests) - 1
        for body in requests:
            tokens = len(re.findall(r"\w+|[^\w\s]", render(body["messages"])))
            assert tokens + body["max_tokens"] <= 2048, tokens
            assert body["messages"][0]["content"].startswith(compact.SUMMARY_PROMPT)
            assert "Pay particular attention to: API" in body["messages"][0]["content"]
        assert "part 1 of" in requests[0]["messages"][0]["content"]
        assert requests[-1]["messages"][1]["content"].count("said little") == len(requests) - 1


class TestSkills:
    """`llamachat.skills`: discovery, parsing, the catalog, loading."""

    def test_skills_are_found_one_level_deep_and_plain_folders_are_not_problems(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "alpha", _skill_md("alpha"))
        _put_skill(root / "outer", "inner", _skill_md("inner"))
        (root / "empty").mkdir()
        (root / "notes.md").write_text("not a skill\n")
        _put_skill(root, ".git", _skill_md("git"))

        store = skills.SkillStore(root)

        assert store.names() == ["alpha"]
        assert store.problems() == []
        assert store.load("inner") is None
        assert store.roots() == [root]

    def test_skills_symlinked_skill_folder_is_followed(self, tmp_path: Path) -> None:

        real = tmp_path / "elsewhere" / "linked"
        _put_skill(real.parent, "linked", _skill_md("linked", body="Linked body.\n"))
        root = tmp_path / "skills"
        root.mkdir()
        (root / "linked").symlink_to(real, target_is_directory=True)

        skill = skills.SkillStore(root).load("linked")

        assert skill is not None
        assert skill.text == "Linked body."
        assert skill.folder == root / "linked"
        assert skill.path == root / "linked" / "SKILL.md"

    def test_skills_earlier_root_wins_a_name_clash_and_the_hidden_copy_is_a_problem(
        self,
        tmp_path: Path,
    ) -> None:

        first, second = tmp_path / "agents", tmp_path / "claude"
        _put_skill(first, "dup", _skill_md("dup", "From the first root."))
        shadowed = _put_skill(second, "dup", _skill_md("dup", "From the second root."))
        _put_skill(second, "only-second", _skill_md("only-second"))
        # A broken skill claims no name: the later root's good copy is used.
        _put_skill(first, "fixme", "no frontmatter\n")
        _put_skill(second, "fixme", _skill_md("fixme", "The working copy."))

        store = skills.SkillStore([first, second])

        assert store.names() == ["dup", "fixme", "only-second"]
        assert store.load("dup").description == "From the first root."
        assert store.load("fixme").description == "The working copy."
        problem = _problem_for(store, shadowed)
        assert str(first / "dup" / "SKILL.md") in problem.message
        assert problem.skipped
        # The same folder given twice (skills_dir also in skills_dirs) shadows nothing.
        twice = skills.SkillStore([first, first])
        assert twice.problems() == skills.SkillStore(first).problems()
        assert len(twice.roots()) == 1

    def test_skills_plain_quoted_and_folded_descriptions_give_the_same_text(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        want = "Summarise PDF files, tables and forms."
        forms = {
            "plain": f"description: {want}\n",
            "double": f'description: "{want}"\n',
            "single": f"description: '{want}'\n",
            "folded": "description: >-\n  Summarise PDF files,\n  tables and forms.\n",
            "wrapped": "description: Summarise PDF files,\n  tables and forms.\n",
        }
        for name, line in forms.items():
            _put_skill(root, name, f"---\nname: {name}\n{line}---\nBody.\n")

        store = skills.SkillStore(root)

        assert store.problems() == []
        assert {name: store.load(name).description for name in forms} == dict.fromkeys(forms, want)

    def test_skills_values_with_colons_parse_and_a_body_with_dashes_stays_whole(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        body = "# Steps\n\n---\n\nname: not-frontmatter\n---\nThe end.\n"
        _put_skill(
            root,
            "quoted",
            '---\nname: quoted\ndescription: "Use when: the user asks"\n'
            "homepage: https://example.org/x\n---\n" + body,
        )
        unquoted = _put_skill(root, "unquoted", _skill_md("unquoted", "Use when: the user asks"))

        store = skills.SkillStore(root)

        quoted = store.load("quoted")
        assert quoted.description == "Use when: the user asks"
        assert quoted.metadata["homepage"] == "https://example.org/x"
        assert quoted.text == body.strip()
        # YAML rejects the bare second colon; people write it anyway, so it is read
        # as text and the file gets a warning telling them to quote it.
        assert store.load("unquoted").description == "Use when: the user asks"
        warning = _problem_for(store, unquoted)
        assert not warning.skipped
        assert "quotes" in warning.message

    def test_skills_crlf_line_endings_and_a_byte_order_mark_are_handled(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        text = _skill_md("windows", "Saved on Windows.", "Line one.\nLine two.\n")
        _put_skill(root, "windows", b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())

        store = skills.SkillStore(root)
        skill = store.load("windows")

        assert store.problems() == []
        assert skill.description == "Saved on Windows."
        assert skill.text == "Line one.\nLine two."

    def test_skills_undecodable_bytes_load_with_replacement_characters_and_are_reported(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        head = _put_skill(
            root, "latin-head", b"---\nname: latin-head\ndescription: Caf\xe9 menu.\n---\nBody.\n"
        )
        body = _put_skill(
            root,
            "latin-body",
            b"---\nname: latin-body\ndescription: Fine.\n---\nCaf\xe9 au lait.\n",
        )

        store = skills.SkillStore(root)

        assert store.load("latin-head").description == "Caf\ufffd menu."
        assert not _problem_for(store, head).skipped
        # The body is read only when loaded, so its warning appears from then on.
        assert store.load("latin-body").text == "Caf\ufffd au lait."
        warning = _problem_for(store, body)
        assert not warning.skipped
        assert "UTF-8" in warning.message

    def test_skills_unknown_and_optional_keys_are_kept_in_metadata(self, tmp_path: Path) -> None:

        root = tmp_path / "skills"
        _put_skill(
            root,
            "full",
            _skill_md(
                "full",
                extra="license: Apache-2.0\ncompatibility: Needs git and network access\n"
                "metadata:\n  author: example.org\n  version: '1.0'\n"
                "allowed-tools: Bash(git:*) Read\nx-harness-option: 7\n",
            ),
        )
        odd = _put_skill(root, "odd", _skill_md("odd", extra="metadata: just a string\n"))

        store = skills.SkillStore(root)
        full = store.load("full")

        assert full.metadata == {
            "license": "Apache-2.0",
            "compatibility": "Needs git and network access",
            "metadata": {"author": "example.org", "version": "1.0"},
            "allowed-tools": "Bash(git:*) Read",
            "x-harness-option": 7,
        }
        # A wrongly shaped optional key is a warning; the skill still loads.
        assert store.load("odd").metadata["metadata"] == "just a string"
        assert not _problem_for(store, odd).skipped

    def test_skills_broken_folder_reports_each_bad_skill_by_path_and_loads_the_good_ones(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        good = {
            "good-one": _put_skill(root, "good-one", _skill_md("good-one", body="One.\n")),
            "good-two": _put_skill(root, "good-two", _skill_md("good-two", body="Two.\n")),
        }
        undecodable = _put_skill(
            root, "undecodable", b"---\nname: undecodable\ndescription: Bad \xff byte.\n---\nOk.\n"
        )
        huge = _put_skill(root, "huge", _skill_md("huge", "A very long skill.", "Start.\n"))
        with huge.open("ab") as f:
            chunk = b"Reference material that nobody should paste into a prompt whole.\n" * 16384
            for _ in range(50 * 1024 * 1024 // len(chunk) + 1):
                f.write(chunk)
        folder_as_file = root / "is-a-folder" / "SKILL.md"
        folder_as_file.mkdir(parents=True)
        dangling = root / "dangling" / "SKILL.md"
        dangling.parent.mkdir()
        dangling.symlink_to(tmp_path / "nowhere.md")
        bad = {  # path -> a word the diagnosis must contain
            _put_skill(root, "no-frontmatter", "# Just markdown\n"): "frontmatter",
            _put_skill(root, "no-description", "---\nname: no-description\n---\nBody\n"): (
                "description"
            ),
            _put_skill(
                root, "bad-yaml", _skill_md("bad-yaml", extra="metadata:\n  a: 1\n b: 2\n")
            ): "YAML",
            _put_skill(root, "Bad_Slug", _skill_md("Bad_Slug")): "not a valid skill name",
            _put_skill(
                root, "unclosed", "---\nname: unclosed\ndescription: Open.\n"
            ): "never closed",
            _put_skill(root, "utf-sixteen", _skill_md("utf-sixteen").encode("utf-16")): "UTF-16",
            _put_skill(root, "a-list", "---\n- name\n- description\n---\n"): "key: value",
            folder_as_file: "not a regular file",
            dangling: "does not exist",
        }

        # Loaded all the same, with a warning saying what to fix (lenient as other harnesses).
        warned = {
            _put_skill(root, "no-name", "---\ndescription: Nameless.\n---\nBody\n"): "`name:`",
            _put_skill(root, "mismatch", _skill_md("other-name")): "`name: other-name`",
            _put_skill(root, "too-long", _skill_md("too-long", "x" * 1025)): "1025",
        }

        store = skills.SkillStore(root)

        assert store.names() == [
            "good-one",
            "good-two",
            "huge",
            "no-name",
            "other-name",
            "too-long",
            "undecodable",
        ]
        for path, word in warned.items():
            assert not _problem_for(store, path).skipped
            assert word in _problem_for(store, path).message
        assert store.load("good-one").text == "One."
        assert store.load("good-two").text == "Two."
        assert store.load("undecodable").description == "Bad \ufffd byte."
        loaded_huge = store.load("huge")
        assert loaded_huge.text.startswith("Start.\nReference material")
        assert "only the first 64 KB are loaded" in loaded_huge.text
        assert len(loaded_huge.text.encode()) < skills.BODY_MAX + 200
        for path, word in bad.items():
            problem = _problem_for(store, path)
            assert problem.skipped, problem
            assert word in problem.message, problem
            assert str(path) in str(problem)
        for path in (undecodable, huge):
            assert not _problem_for(store, path).skipped
        assert not any(problem.path in good.values() for problem in store.problems())
        messages = [problem.message for problem in store.problems()]
        assert len(set(messages)) == len(messages)

    def test_skills_huge_skill_md_is_scanned_and_loaded_without_reading_it_whole(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        path = _put_skill(root, "huge", _skill_md("huge", "Fifty megabytes.", ""))
        with path.open("ab") as f:
            chunk = b"0123456789abcdef" * 65536
            for _ in range(50):
                f.write(chunk)
        assert path.stat().st_size > 50 * 1024 * 1024

        tracemalloc.start()
        try:
            store = skills.SkillStore(root)
            assert store.names() == ["huge"]
            assert len(store.load("huge").text) < skills.BODY_MAX + 200
            _current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

        assert peak < 2 * 1024 * 1024

    @pytest.mark.parametrize(
        ("folder", "valid"),
        [
            ("a", True),
            ("pdf-tools", True),
            ("x2-y3", True),
            ("a" * 64, True),
            ("a" * 65, False),
            ("Pdf", False),
            ("pdf--tools", False),
            ("-pdf", False),
            ("pdf-", False),
            ("pdf_tools", False),
            ("pdf.tools", False),
            ("café", False),
        ],
    )
    def test_skills_name_must_be_a_lowercase_slug_of_at_most_64_characters(
        self, tmp_path: Path, folder: str, valid: bool
    ) -> None:

        path = _put_skill(tmp_path / "skills", folder, _skill_md(folder))

        store = skills.SkillStore(tmp_path / "skills")

        assert store.names() == ([folder] if valid else [])
        if not valid:
            assert "not a valid skill name" in _problem_for(store, path).message

    def test_skills_description_must_hold_text_and_over_1024_characters_is_a_warning(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "longest", _skill_md("longest", "d" * 1024))
        too_long = _put_skill(root, "too-long", _skill_md("too-long", "d" * 1025))
        empty = _put_skill(root, "empty", _skill_md("empty", '""'))
        number = _put_skill(root, "number", _skill_md("number", "42"))

        store = skills.SkillStore(root)

        assert store.names() == ["longest", "too-long"]
        assert len(store.load("longest").description) == 1024
        assert len(store.load("too-long").description) == 1025
        assert "1025" in _problem_for(store, too_long).message
        assert not _problem_for(store, too_long).skipped
        assert "no `description:`" in _problem_for(store, empty).message
        assert "not text" in _problem_for(store, number).message

    def test_skills_disable_model_invocation_keeps_a_skill_from_the_model_but_slash_loads_it(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "auto", _skill_md("auto", "Anyone may load me."))
        _put_skill(
            root,
            "manual",
            _skill_md("manual", "Only the user.", extra="disable-model-invocation: true\n"),
        )

        store = skills.SkillStore(root)
        function = store.tool_schema()["function"]

        assert function["parameters"]["properties"]["name"]["enum"] == ["auto"]
        assert "manual" not in function["description"]
        assert "manual" not in store.directory()
        assert store.user_names() == ["auto", "manual"]
        assert skills.parse_commands("/manual go", store.user_names()) == ("go", ["manual"])
        manual = store.load("manual")
        assert manual is not None and not manual.model_invocable
        refused = skills.tool_message("call_1", manual)["content"]
        assert refused.startswith("error:") and "/manual" in refused
        assert "Do it." not in refused

        only_manual = tmp_path / "only-manual"
        _put_skill(
            only_manual, "manual", _skill_md("manual", extra="disable-model-invocation: true\n")
        )
        assert skills.SkillStore(only_manual).tool_schema() is None

    def test_skills_user_invocable_false_blocks_slash_and_mentions_but_not_the_model(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "hidden", _skill_md("hidden", extra="user-invocable: false\n"))
        _put_skill(root, "open", _skill_md("open"))

        store = skills.SkillStore(root)

        assert store.names() == ["hidden", "open"]
        assert store.user_names() == ["open"]
        assert skills.parse_commands("/hidden now", store.user_names()) == ("/hidden now", [])
        assert store.match_mentions("use hidden and open") == ["open"]
        assert store.tool_schema()["function"]["parameters"]["properties"]["name"]["enum"] == [
            "hidden",
            "open",
        ]
        assert not store.load("hidden").user_invocable

    def test_skills_names_are_looked_up_never_joined_into_paths(self, tmp_path: Path) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "alpha", _skill_md("alpha"))
        _put_skill(tmp_path, "secret", _skill_md("secret", body="Outside the root.\n"))

        store = skills.SkillStore(root)

        for name in (
            "../secret",
            str(tmp_path / "secret"),
            "alpha/../../secret",
            "alpha/SKILL.md",
            "",
            "ALPHA",
            skills.parse_name('{"name": "../secret"}'),
        ):
            assert store.load(name) is None, name
        assert store.load(None) is None
        assert store.load("alpha").name == "alpha"

    def test_skills_tool_schema_offers_a_load_skill_enum_and_none_without_skills(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "zeta", _skill_md("zeta", "Last one."))
        _put_skill(root, "alpha", _skill_md("alpha", "First one."))

        store = skills.SkillStore(root)
        schema = store.tool_schema()

        assert schema["type"] == "function"
        function = schema["function"]
        assert function["name"] == skills.LOAD_SKILL_NAME == "load_skill"
        assert function["parameters"]["required"] == ["name"]
        assert function["parameters"]["properties"]["name"]["enum"] == ["alpha", "zeta"]
        assert function["description"].endswith("- alpha: First one.\n- zeta: Last one.")
        assert store.directory() == "- alpha: First one.\n- zeta: Last one."
        (tmp_path / "empty").mkdir()
        assert skills.SkillStore(tmp_path / "empty").tool_schema() is None
        assert skills.SkillStore(tmp_path / "missing").tool_schema() is None

    def test_skills_catalog_caps_each_description_and_counts_the_skills_left_out(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        total = 300
        for index in range(total):
            _put_skill(root, f"skill-{index:03}", _skill_md(f"skill-{index:03}", "word " * 180))

        store = skills.SkillStore(root)
        catalog = store.directory()
        lines = catalog.splitlines()
        listed = [line for line in lines if line.startswith("- skill-")]

        assert all(
            len(line) <= len("- skill-000: ") + skills.CATALOG_DESCRIPTION_CHARS for line in listed
        )
        assert all(line.endswith("\N{HORIZONTAL ELLIPSIS}") for line in listed)
        assert 0 < len(listed) < total
        assert sum(len(line) + 1 for line in listed) <= skills.CATALOG_CHARS
        assert lines[-1].startswith(f"({total - len(listed)} more skills not listed")
        enum = store.tool_schema()["function"]["parameters"]["properties"]["name"]["enum"]
        assert len(enum) == total

    def test_skills_tool_message_names_the_folder_and_the_files_in_it(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        folder = root / "tools"
        (folder / "scripts").mkdir(parents=True)
        (folder / "scripts" / "run.sh").write_text("echo\n")
        (folder / "reference.md").write_text("ref\n")
        (folder / "assets").mkdir()
        (tmp_path / "outside.txt").write_text("secret\n")
        (folder / "link-out.txt").symlink_to(tmp_path / "outside.txt")
        body = (
            "Run `scripts/run.sh` first, then read ./reference.md and the assets/ folder.\n"
            "Never ../outside.txt, link-out.txt, missing.md, /etc/hostname or "
            "https://example.org/reference.md. Again: scripts/run.sh.\n"
        )
        _put_skill(root, "tools", _skill_md("tools", body=body))

        content = skills.tool_message("call_9", skills.SkillStore(root).load("tools"))["content"]

        header, _, rest = content.partition("\n\n")
        assert header.splitlines() == [
            "[skill: tools]",
            f"Folder: {folder} (relative paths below are inside it)",
            "Files in its folder, read with read_skill_file: reference.md, scripts/run.sh",
        ]
        assert rest == body.strip()

    def test_skills_tool_message_carries_errors_and_the_last_round_note(self) -> None:

        skill = skills.Skill(name="finance-cli", description="d", text="body text")
        message = skills.tool_message("call_1", skill)
        assert message == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "[skill: finance-cli]\n\nbody text",
        }
        assert skills.tool_message("call_1", None, error="No such skill")["content"] == (
            "error: No such skill"
        )
        assert skills.tool_message("call_1", None)["content"].startswith("error:")
        last = skills.tool_message("call_1", skill, last=True)["content"]
        assert last.endswith("\n\n" + skills.NO_MORE_TOOLS)

        assert skills.parse_name('{"name": " finance-cli "}') == "finance-cli"
        assert skills.parse_name('"finance-cli"') == "finance-cli"
        for arguments in ("not json", '{"query": "x"}', '{"name": 3}', "[]", "", None):
            assert skills.parse_name(arguments) == "", arguments

    def test_skills_system_part_is_the_header_line_then_the_body(self) -> None:

        skill = skills.Skill(name="finance-cli", description="d", text="Run `finance auth test`.")

        assert skills.system_part(skill) == "[skill: finance-cli]\nRun `finance auth test`."

    def test_skills_body_over_64_kb_is_cut_at_a_character_boundary_with_a_note(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        # One ASCII byte first, so the cap falls in the middle of a two-byte "é".
        path = _put_skill(root, "long", _skill_md("long", body="a" + "é" * 100_000 + "\nTHE END\n"))

        store = skills.SkillStore(root)
        text = store.load("long").text

        body, _, note = text.rpartition("\n\n")
        assert body == "a" + "é" * ((skills.BODY_MAX - 1) // 2)
        assert "THE END" not in text
        assert note.startswith("[Cut here") and "64 KB" in note
        assert "64 KB" in _problem_for(store, path).message

    def test_skills_parse_commands_removes_known_commands_and_keeps_the_rest_exactly(self) -> None:

        known = {"review", "finance-cli"}
        message = (
            "/review please check\n\n```python\ndef f():\n    return  1   # two spaces\n\n\n"
            "    /review\n```\nand `cd /review` too\n\t  indented /unknown\n"
        )

        assert skills.parse_commands(message, known) == (message[len("/review ") :], ["review"])
        cases = {
            "/finance-cli fix my budget /unknown stays": "fix my budget /unknown stays",
            "look at this /review\nline two": "look at this\nline two",
            "/review\nline one\n  indented": "line one\n  indented",
            "a\n/review\nb": "a\nb",
            "a\r\n/review\r\nb": "a\r\nb",
            "fix  /review  this": "fix   this",
            "tabs\t/review\tx": "tabs\tx",
            "/review /finance-cli /review": "",
        }
        for text, rest in cases.items():
            assert skills.parse_commands(text, known)[0] == rest, text
        assert skills.parse_commands("/review /finance-cli /review", known)[1] == [
            "review",
            "finance-cli",
        ]
        for unchanged in (
            "no commands here",
            "/nope",
            "/review.",
            "see https://example.org/review and /tmp/review",
            "x/review",
        ):
            assert skills.parse_commands(unchanged, known) == (unchanged, []), unchanged
        assert skills.parse_commands("/review go", ["review"]) == ("go", ["review"])

    def test_skills_mentions_match_whole_words_in_any_case_in_store_order(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        for name in ("zeta", "pdf-tools", "pdf", "finance-cli"):
            _put_skill(root, name, _skill_md(name))

        store = skills.SkillStore(root)

        assert store.match_mentions("Use ZETA, then PDF-Tools and (finance-cli).") == [
            "finance-cli",
            "pdf-tools",
            "zeta",
        ]
        assert store.match_mentions("the pdf, twice: pdf") == ["pdf"]
        for text in ("finance-cli2", "xpdf", "pdf_tools", "pdfs", "pdf-toolsy", "zetas", ""):
            assert store.match_mentions(text) == [], text

    def test_skills_refresh_picks_up_new_edited_deleted_and_fixed_skills(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "alpha", _skill_md("alpha", "First.", "Old body.\n"))
        store = skills.SkillStore(root)
        assert store.names() == ["alpha"]
        assert store.refresh() is False

        _put_skill(root, "beta", _skill_md("beta"))
        assert store.refresh() is True
        assert store.names() == ["alpha", "beta"]

        _put_skill(root, "alpha", _skill_md("alpha", "First, edited.", "New, longer body.\n"))
        assert store.refresh() is True
        assert store.load("alpha").description == "First, edited."
        assert store.load("alpha").text == "New, longer body."

        shutil.rmtree(root / "beta")
        assert store.refresh() is True
        assert store.names() == ["alpha"]

        broken = _put_skill(root, "gamma", "---\nname: gamma\n---\n")
        assert store.refresh() is True
        assert _problem_for(store, broken).skipped
        _put_skill(root, "gamma", _skill_md("gamma", "Fixed."))
        assert store.refresh() is True
        assert store.problems() == []
        assert store.names() == ["alpha", "gamma"]
        assert store.refresh() is False

        later = tmp_path / "later"
        late_store = skills.SkillStore([root, later])
        assert late_store.names() == ["alpha", "gamma"]
        _put_skill(later, "delta", _skill_md("delta"))
        assert late_store.refresh() is True
        assert late_store.names() == ["alpha", "delta", "gamma"]

    def test_skills_load_rereads_a_skill_edited_since_the_last_scan(self, tmp_path: Path) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "alpha", _skill_md("alpha", body="Version one.\n"))
        store = skills.SkillStore(root)
        assert store.load("alpha").text == "Version one."

        _put_skill(root, "alpha", _skill_md("alpha", body="Version two, longer.\n"))

        assert store.load("alpha").text == "Version two, longer."

    def test_skills_are_read_once_and_an_unchanged_refresh_only_stats(self, tmp_path: Path) -> None:
        """Counts real file opens and folder listings with an audit hook in a fresh interpreter."""

        root = tmp_path / "skills"
        for name in ("alpha", "beta", "gamma"):
            _put_skill(root, name, _skill_md(name, body=f"{name} body\n"))
        # Installed skills are older than the two seconds during which a fresh mtime
        # is distrusted (and re-checked) because of coarse filesystem clocks.
        past = time.time() - 3600
        for path in [root, *root.rglob("*")]:
            os.utime(path, (past, past))
        code = (
            "import json, sys\n"
            "from pathlib import Path\n"
            "from llamachat import skills\n"
            "root = Path(sys.argv[1])\n"
            "events = []\n"
            "recording = [False]\n"
            "def hook(event, args):\n"
            "    if recording[0] and event in ('open', 'os.scandir', 'os.listdir'):\n"
            "        events.append([event, str(args[0])])\n"
            "sys.addaudithook(hook)\n"
            "store = skills.SkillStore(root)\n"
            "store.names(); store.load('alpha')\n"
            "recording[0] = True\n"
            "store.names(); store.user_names(); store.match_mentions('use alpha and beta')\n"
            "store.tool_schema(); store.load('alpha'); store.directory()\n"
            "described = store.descriptions()\n"
            "changes = [store.refresh(), store.refresh()]\n"
            "recording[0] = False\n"
            "quiet = list(events); events.clear()\n"
            "(root / 'beta' / 'SKILL.md').write_text("
            "'---\\nname: beta\\ndescription: Edited.\\n---\\nbeta body, edited\\n')\n"
            "recording[0] = True\n"
            "changes.append(store.refresh())\n"
            "recording[0] = False\n"
            "print(json.dumps({'quiet': quiet, 'changes': changes, 'after_edit': events,\n"
            "                  'beta': store.load('beta').description, 'described': described}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(root)],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        ).stdout
        result = json.loads(out)

        assert result["quiet"] == []
        assert result["described"] == dict.fromkeys(
            ["alpha", "beta", "gamma"], "Does one thing well."
        )
        assert result["changes"] == [False, False, True]
        opened = [path for event, path in result["after_edit"] if event == "open"]
        assert opened == [str(root / "beta" / "SKILL.md")]
        assert result["beta"] == "Edited."

    def test_skills_import_folder_copies_a_skill_or_a_folder_of_skills(
        self, tmp_path: Path
    ) -> None:

        dest = tmp_path / "home" / ".agents" / "skills"
        downloaded = tmp_path / "downloads" / "pdf-skill-main"
        _put_skill(downloaded.parent, downloaded.name, _skill_md("pdf", body="See forms.md.\n"))
        (tmp_path / "shared-forms.md").write_text("Form notes.\n")
        (downloaded / "forms.md").symlink_to(tmp_path / "shared-forms.md")

        assert skills.import_folder(downloaded, dest) == [dest / "pdf"]
        copied = dest / "pdf" / "forms.md"
        assert copied.read_text() == "Form notes." + "\n"
        assert not copied.is_symlink()
        assert skills.SkillStore(dest).load("pdf").text == "See forms.md."

        collection = tmp_path / "claude-skills"
        _put_skill(collection, "alpha", _skill_md("alpha"))
        _put_skill(collection, "beta", _skill_md("beta"))
        (collection / "not-a-skill").mkdir()
        assert skills.import_folder(collection, dest) == [dest / "alpha", dest / "beta"]
        assert skills.SkillStore(dest).names() == ["alpha", "beta", "pdf"]

    def test_skills_import_folder_refuses_invalid_and_existing_skills_and_copies_the_rest(
        self,
        tmp_path: Path,
    ) -> None:

        dest = tmp_path / "skills"
        existing = _put_skill(dest, "dup", _skill_md("dup", "Mine, keep me."))
        source = tmp_path / "incoming"
        _put_skill(source, "good", _skill_md("good"))
        broken = _put_skill(source, "broken", "---\nname: broken\n---\nNo description.\n")
        _put_skill(source, "dup", _skill_md("dup", "Theirs."))

        with pytest.raises(skills.SkillImportError) as caught:
            skills.import_folder(source, dest)

        error = caught.value
        assert isinstance(error, skills.SkillError)
        assert error.imported == [dest / "good"]
        assert {problem.path for problem in error.problems} == {broken, source / "dup"}
        assert "never overwritten" in str(error)
        assert "description" in str(error)
        assert "Mine, keep me." in existing.read_text()
        assert not (dest / "broken").exists()
        assert sorted(path.name for path in dest.iterdir()) == ["dup", "good"]

        (tmp_path / "nothing").mkdir()
        with pytest.raises(skills.SkillImportError, match="holds no SKILL.md"):
            skills.import_folder(tmp_path / "nothing", dest)

    def test_skills_missing_root_is_quiet_and_a_file_as_root_is_a_problem(
        self, tmp_path: Path
    ) -> None:

        missing = skills.SkillStore(tmp_path / "nope")
        assert missing.names() == [] and missing.problems() == []
        assert missing.refresh() is False

        not_a_folder = tmp_path / "skills.txt"
        not_a_folder.write_text("oops\n")
        store = skills.SkillStore(not_a_folder)
        assert store.names() == []
        assert "not a folder" in _problem_for(store, not_a_folder).message

    def test_skills_problems_warn_once_per_change_across_stores(
        self, tmp_path: Path, caplog
    ) -> None:
        """The first store to see a set of problems warns; later stores (later runs) with the
        same set log them at info level; fixed then broken again, they warn again."""

        root = tmp_path / "skills"
        reported = tmp_path / "state" / "skill-problems"
        _put_skill(root, "broken", "no frontmatter\n")
        caplog.set_level(logging.INFO, logger="llamachat.skills")

        def levels() -> list[str]:
            store = skills.SkillStore(root, reported=reported)
            caplog.clear()
            store.names()
            return [r.levelname for r in caplog.records if "skill problem" in r.getMessage()]

        assert levels() == ["WARNING"] and reported.exists()
        assert levels() == ["INFO"]
        assert skills.reported_problems_path().parent.name == "llamachat"
        (root / "broken" / "SKILL.md").unlink()
        assert levels() == [] and not reported.exists()
        _put_skill(root, "broken", "no frontmatter\n")
        assert levels() == ["WARNING"]

        store = skills.SkillStore(root, reported=reported)
        store.names()
        _put_skill(root, "worse", "---\nname: worse\n---\n")
        caplog.clear()
        assert store.refresh()
        assert [(r.levelname, "worse" in r.getMessage()) for r in caplog.records] == [
            ("WARNING", True)
        ]

    def test_skills_watch_paths_name_roots_skill_folders_and_skill_files(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        _put_skill(root, "alpha", _skill_md("alpha"))
        (root / "empty").mkdir()

        store = skills.SkillStore([root, tmp_path / "missing"])

        assert store.watch_paths() == [
            root,
            root / "alpha",
            root / "alpha" / "SKILL.md",
            root / "empty",
        ]

    def test_skills_yaml_alias_bomb_loads_and_refreshes_without_expanding(
        self, tmp_path: Path
    ) -> None:

        lines = ["---", "name: bomb", "description: Nested aliases.", "a0: &a0 [x, x, x, x, x]"]
        for level in range(1, 16):
            lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 5) + "]")
        _put_skill(tmp_path / "skills", "bomb", "\n".join([*lines, "---", "Body."]) + "\n")

        store = skills.SkillStore(tmp_path / "skills")

        assert store.load("bomb").text == "Body."
        # A fresh file is re-parsed on refresh; telling the two parses apart must
        # not walk 5**16 list items.
        assert store.refresh() is False

    def test_skills_benchmark_reports_send_refresh_and_scan_figures(self) -> None:

        result = bench_skills.run(n_skills=30, repeats=5)

        assert result["n_skills"] == 30 and result["repeats"] == 5
        for key in ("send_ms", "refresh_ms", "tool_message_ms", "cold_scan_ms"):
            assert set(result[key]) == {"median", "p95"}, key
        assert set(result["ops_ms"]) == {
            "names",
            "parse_commands",
            "match_mentions",
            "load",
            "tool_schema",
        }
        assert result["catalog_chars"] > 0

    # Typing `/` pops the skill completer up, which the offscreen platform cannot raise.
    @pytest.mark.qt_log_ignore(r"This plugin does not support (raise\(\)|grabbing the keyboard)")
    def test_fault_broken_skills_folder_and_a_50_mb_skill_leave_the_window_working(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Every kind of broken skill plus a 50 MB SKILL.md: the window builds, good skills load,
        the huge one is cut to 64 KB in the prompt, and the panel lists each problem by path."""

        root = tmp_path / "broken-skills"
        _put_skill(root, "good-one", _skill_md("good-one", "A good skill.", "Be good.\n"))
        huge = _put_skill(root, "huge", _skill_md("huge", "Fifty megabytes.", "Start here.\n"))
        with huge.open("ab") as f:
            chunk = b"Reference material nobody should paste whole into a prompt.\n" * 16384
            while f.tell() < 50 * 1024 * 1024:
                f.write(chunk)
        broken = [
            _put_skill(root, "no-frontmatter", "# Just markdown\n"),
            _put_skill(root, "no-name", "---\ndescription: Nameless.\n---\nBody\n"),
            _put_skill(root, "bad-yaml", _skill_md("bad-yaml", extra="metadata:\n  a: 1\n b: 2\n")),
            _put_skill(root, "mismatch", _skill_md("other-name")),
            _put_skill(root, "Bad_Slug", _skill_md("Bad_Slug")),
            _put_skill(root, "unclosed", "---\nname: unclosed\ndescription: Open.\n"),
            _put_skill(root, "utf-sixteen", _skill_md("utf-sixteen").encode("utf-16")),
            _put_skill(root, "binary", os.urandom(4096)),
            _put_skill(root, "empty", b""),
        ]
        as_folder = root / "is-a-folder" / "SKILL.md"
        as_folder.mkdir(parents=True)
        dangling = root / "dangling" / "SKILL.md"
        dangling.parent.mkdir()
        dangling.symlink_to(tmp_path / "nowhere.md")
        loop = root / "loop" / "SKILL.md"
        loop.parent.mkdir()
        loop.symlink_to(loop)
        broken += [as_folder, dangling, loop]

        # Room in the context for the 64 KB the huge skill is cut to.
        router.models["test-model"].n_ctx = 131072
        window, _history = chat_window(skills_dir=root)
        _send(qtbot, window, "/good-one hello")
        _send(qtbot, window, "/huge check this")
        assert window.loaded_skills() == ["good-one", "huge"]
        system = router.chat_requests()[-1].json["messages"][0]["content"]
        assert "[skill: good-one]\nBe good." in system
        assert "[skill: huge]\nStart here." in system
        assert len(system.encode()) < skills.BODY_MAX + 4096

        panel = SkillsPanel(skills.SkillStore(root), window.loaded_skills, import_dir=root)
        qtbot.addWidget(panel)
        # Without a name, and with a name its folder does not have: loaded, with a warning.
        assert sorted(panel.skill_names()) == ["good-one", "huge", "no-name", "other-name"]
        problems = "\n".join(panel.problem_texts())
        for path in broken:
            assert str(path) in problems, path


class TestSkillsFirstTime:
    """Skills that work the first time (issue 16): discovery, resources, lenient parsing,
    shadowing, precise mentions, the `/` completer and loading twice."""

    # ---------------------------------------------------------------- 1. discovery

    @offscreen_popup
    def test_first_time_a_skills_folder_made_after_start_up_reaches_panel_and_completer(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Not even ~/.agents exists at start: the nearest existing parent is watched, so a
        skill created later, then edited and deleted, shows in the panel and the `/` list
        within 2 s, without a restart."""

        home = Path.home()  # the test's own, where ~/.agents does not exist
        root = home / ".agents" / "skills"
        assert not root.parent.exists()
        window, _history = chat_window(skills_dir=root)
        panel = window.skills.open_panel()
        assert panel is not None and panel.skill_names() == []
        assert str(home) in window.skills._watcher.watched()

        _write_skill(root, "gardening", _skill_md("gardening", "When to plant what."))
        qtbot.waitUntil(lambda: "gardening" in _completions(window), timeout=2000)
        qtbot.waitUntil(lambda: panel.skill_names() == ["gardening"], timeout=2000)
        (root / "gardening" / "SKILL.md").write_text(
            _skill_md("gardening", "Edited."), encoding="utf-8"
        )
        qtbot.waitUntil(lambda: panel.rows()[0][1] == "Edited.", timeout=2000)
        shutil.rmtree(root / "gardening")
        qtbot.waitUntil(lambda: panel.skill_names() == [], timeout=2000)
        qtbot.waitUntil(lambda: "gardening" not in _completions(window), timeout=2000)

    def test_first_time_refresh_in_the_panel_reads_the_folders_at_once(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Refresh re-reads the folders there and then, without waiting for the watcher."""

        root = tmp_path / "skills"
        _put_skill(root, "alpha", _skill_md("alpha"))
        panel = SkillsPanel(SkillStore(root), list, import_dir=root)
        qtbot.addWidget(panel)
        _put_skill(root, "beta", _skill_md("beta"))
        assert panel.skill_names() == ["alpha"]
        qtbot.mouseClick(panel.refresh_button, Qt.MouseButton.LeftButton)
        assert panel.skill_names() == ["alpha", "beta"]

    # ---------------------------------------------------------------- 2. resources

    def test_first_time_read_skill_file_reads_text_inside_the_folder_only(
        self, tmp_path: Path
    ) -> None:
        """Relative paths only, resolved (symlinks too) and kept inside the folder; text only;
        the 256 KB cap said in the result; a miss answered with the closest paths."""

        folder = _pdf_skill(tmp_path / "skills")
        (tmp_path / "secret.txt").write_text("secret\n")
        (folder / "out.md").symlink_to(tmp_path / "secret.txt")
        (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
        (folder / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
        (folder / "big.md").write_text("x" * (skills.FILE_MAX + 10))
        os.mkfifo(folder / "pipe")
        skill = SkillStore(tmp_path / "skills").load("pdf")

        text, summary = skills.read_skill_file(skill, "forms.md")
        assert text.startswith("[pdf/forms.md: 44 bytes, whole (files over 256 KB are cut)]\n\n")
        assert text.endswith("Field names are in the form's XFA.\n")
        assert summary == "pdf/forms.md, 44 bytes"
        assert skills.read_skill_file(skill, "./scripts/fill.py")[0].endswith("print('filled')\n")
        big, big_summary = skills.read_skill_file(skill, "big.md")
        assert "cut at 256 KB" in big.splitlines()[0] and big_summary.endswith("cut at 256 KB")
        assert len(big) < skills.FILE_MAX + 200
        refused = {
            "/etc/hostname": "relative",
            "../secret.txt": "outside",
            "scripts/../../secret.txt": "outside",
            "out.md": "outside",
            "logo.png": "not a text file",
            "latin1.txt": "not UTF-8",
            "pipe": "not a regular file",
            "scripts": "scripts/fill.py",
            "": "relative",
        }
        for path, words in refused.items():
            with pytest.raises(skills.SkillFileError, match=re.escape(words)):
                skills.read_skill_file(skill, path)
        with pytest.raises(skills.SkillFileError) as missed:
            skills.read_skill_file(skill, "form.md")
        assert "Closest existing files: forms.md" in str(missed.value)
        with pytest.raises(skills.SkillFileError, match="scripts/fill.py"):
            skills.read_skill_file(skill, "fill.py")

    def test_first_time_loaded_skill_text_names_its_files_and_the_tool(
        self, tmp_path: Path
    ) -> None:
        """The model is told which files the folder holds, in the system message and in the
        load_skill result; dot-files and links out of the folder are left out."""

        folder = _pdf_skill(tmp_path / "skills")
        (folder / ".hidden").write_text("x")
        (tmp_path / "outside.md").write_text("x")
        (folder / "link.md").symlink_to(tmp_path / "outside.md")
        skill = SkillStore(tmp_path / "skills").load("pdf")

        assert skills.resource_files(skill) == ["forms.md", "scripts/fill.py"]
        line = "Files in its folder, read with read_skill_file: forms.md, scripts/fill.py"
        assert system_part(skill).splitlines()[:2] == ["[skill: pdf]", line]
        assert line in skills.tool_message("c1", skill)["content"].splitlines()

    def test_first_time_read_skill_file_is_offered_once_a_skill_with_files_is_loaded(
        self, router, tmp_path: Path
    ) -> None:
        """Not offered before; offered in the round after load_skill loads a skill with
        files; its call is answered with the file and a tool_done event for the window."""

        root = tmp_path / "skills"
        _pdf_skill(root)
        _put_skill(root, "plain", _skill_md("plain"))
        store = SkillStore(root)
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "pdf"}', id="k1")]),
            Reply(
                tool_calls=[
                    ToolCall("read_skill_file", '{"skill": "pdf", "path": "forms.md"}', id="r1")
                ]
            ),
            Reply(content="The fields are in the XFA."),
        )
        cfg = tools.SkillsConfig(enabled=True, store=store, max_searches=2)
        events = _ask(router.url, {"messages": _user(), "skills": cfg})

        first, second, third = (r.json for r in router.chat_requests())
        assert [t["function"]["name"] for t in first["tools"]] == ["load_skill"]
        assert [t["function"]["name"] for t in second["tools"]] == ["load_skill", "read_skill_file"]
        assert second["tools"][1]["function"]["parameters"]["properties"]["skill"]["enum"] == [
            "pdf"
        ]
        result = third["messages"][-1]
        assert result["tool_call_id"] == "r1"
        assert "Field names are in the form's XFA." in result["content"]
        done = [value for kind, value in events if kind == "tool_done"]
        assert done == [
            {
                "title": "Read skill file",
                "query": "pdf/forms.md, 44 bytes",
                "results": [],
                "error": "",
            }
        ]
        # Loaded in the system message already: offered from the first round; a skill
        # without files offers nothing to read.
        _offer, _rounds = tools.offered(None, turn.skills_config(Config(), store, loaded=["pdf"]))
        assert [t.name for t in _offer if t.schema] == ["load_skill", "read_skill_file"]
        _offer, _rounds = tools.offered(None, turn.skills_config(Config(), store, loaded=["plain"]))
        assert [t.name for t in _offer if t.schema] == ["load_skill"]

    def test_first_time_read_skill_file_refuses_skills_not_loaded_as_a_result(
        self, tmp_path: Path
    ) -> None:
        """A call for a skill that is not loaded, or with bad arguments, is a result the
        model reads, never an exception."""

        store = SkillStore(_pdf_skill(tmp_path / "skills").parent)
        offer, _rounds = tools.offered(None, turn.skills_config(Config(), store, loaded=["pdf"]))
        _announced, result = tools.answer(offer, "read_skill_file", '{"skill": "x", "path": "a"}')
        assert result.text == (
            "error: the skill x is not loaded; files can be read from the loaded skills only (pdf)."
        )
        _announced, result = tools.answer(offer, "read_skill_file", '{"path": 3}')
        assert result.text.startswith("error: give the skill's name and a relative path")
        _announced, result = tools.answer(
            offer, "read_skill_file", '{"skill": "pdf", "path": "../../etc/passwd"}'
        )
        assert "outside the pdf folder" in result.text
        assert result.events[0][1]["error"] and result.events[0][1]["query"].startswith("pdf/")

    @offscreen_popup
    def test_first_time_window_shows_the_file_read_like_a_search(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The model loads pdf, reads forms.md and answers: the reply shows the read, as a
        search is shown, with the file and its size."""

        _pdf_skill(tmp_path / "skills")
        window, _history = chat_window()
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "pdf"}')]),
            Reply(tool_calls=[ToolCall("read_skill_file", '{"skill": "pdf", "path": "forms.md"}')]),
            Reply(content="Done."),
        )
        _send(qtbot, window, "fill my tax form")
        assert window.loaded_skills() == ["pdf"]
        # A label added to a shown view is shown by Qt on the next turn of the event loop.
        qtbot.waitUntil(
            lambda: any(
                label.isVisible() and label.accessibleName() == "Read skill file"
                for label in window.conversation.findChildren(QLabel)
            )
        )
        label = _by_name(window.conversation, QLabel, "Read skill file")
        assert label.text() == "<b>Read skill file:</b> pdf/forms.md, 44 bytes"
        assert label.textFormat() == Qt.TextFormat.RichText

    # ---------------------------------------------------------------- 3. lenient parsing

    def test_first_time_every_skill_of_the_published_shapes_loads_with_its_description(
        self, tmp_path: Path
    ) -> None:
        """A corpus of SKILL.md files in the shapes public collections use: every one loads,
        with its whole description; what breaks a rule is a warning, never a skip."""

        root = tmp_path / "skills"
        for entry in CORPUS:
            _put_skill(root, entry.folder, entry.text.encode("utf-8"))

        store = SkillStore(root)

        assert store.names() == sorted(entry.name for entry in CORPUS)
        for entry in CORPUS:
            skill = store.load(entry.name)
            assert skill is not None, entry.name
            assert skill.description == entry.description, entry.name
        assert [problem for problem in store.problems() if problem.skipped] == []
        long = next(entry for entry in CORPUS if len(entry.description) > skills.DESCRIPTION_MAX)
        line = next(x for x in store.directory().splitlines() if x.startswith(f"- {long.name}:"))
        assert len(line) < skills.CATALOG_DESCRIPTION_CHARS + 40

    def test_first_time_lenient_parsing_warns_with_the_path_and_the_fix(
        self, tmp_path: Path
    ) -> None:
        """Over-long descriptions, unquoted `: `, unreadable flow values and a name unlike its
        folder load with a warning; no usable name or description is still an error."""

        root = tmp_path / "skills"
        long = _put_skill(root, "long", _skill_md("long", "word " * 300))
        colon = _put_skill(
            root, "colon", "---\nname: colon\ndescription: Use when: a colon\n  and: more\n---\n"
        )
        flow = _put_skill(root, "flow", _skill_md("flow", "[never closed"))
        renamed = _put_skill(root, "folder-name", _skill_md("front-name"))
        invalid = _put_skill(root, "fallback", _skill_md("Fall Back"))
        hopeless = _put_skill(root, "Bad Folder", _skill_md("Also Bad"))
        nothing = _put_skill(root, "nothing", "---\nname: nothing\n---\n")

        store = SkillStore(root)

        assert store.names() == ["colon", "fallback", "flow", "front-name", "long"]
        assert store.load("colon").description == "Use when: a colon and: more"
        assert store.load("flow").description == "[never closed"
        assert len(store.load("long").description) == len(("word " * 300).strip())
        expected = {
            long: "1499 characters",
            colon: "it was read as text, but put the value in quotes",
            flow: "`description:`",
            renamed: "loads as front-name. Rename the folder to `front-name`",
            invalid: "loads under its folder's name, fallback. Set `name: fallback`",
        }
        for path, words in expected.items():
            problem = _problem_for(store, path)
            assert not problem.skipped and words in problem.message, problem
        assert _problem_for(store, hopeless).skipped
        assert "no usable name" in _problem_for(store, hopeless).message
        assert _problem_for(store, nothing).skipped

    def test_first_time_panel_shows_errors_and_warnings_and_the_whole_description(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The panel says which problems kept a skill out (errors) and which did not
        (warnings), each with its path; a long description is whole there."""

        root = tmp_path / "skills"
        long = _put_skill(root, "long", _skill_md("long", "word " * 300))
        broken = _put_skill(root, "broken", "no frontmatter\n")
        panel = SkillsPanel(SkillStore(root), list, import_dir=root)
        qtbot.addWidget(panel)

        assert panel.rows()[0][1] == ("word " * 300).strip()
        texts = panel.problem_texts()
        assert f"Error, not loaded: {broken}: does not start with frontmatter" in texts[0]
        assert texts[1].startswith(f"Warning, loaded: {long}: has a description of 1499")
        assert panel.problems_label.text() == "Problems (1 error, 1 warning)"

    # ---------------------------------------------------------------- 4. shadowing

    def test_first_time_panel_shows_which_folder_wins_and_which_copy_is_hidden(
        self, qtbot, tmp_path: Path
    ) -> None:

        first, second = tmp_path / "agents", tmp_path / "claude"
        _put_skill(first, "dup", _skill_md("dup", "From the first folder."))
        hidden = _put_skill(second, "dup", _skill_md("dup", "From the second folder."))
        store = SkillStore([first, second])
        assert store.hidden() == {"dup": [hidden]}
        panel = SkillsPanel(store, list, import_dir=first)
        qtbot.addWidget(panel)

        assert panel.rows() == [
            ["dup", "From the first folder.", str(first), f"wins over {second}", ""],
            ["dup", "(hidden copy)", str(second), f"hidden by {first}", ""],
        ]
        assert panel.skill_names() == ["dup"]
        panel.tree.setCurrentItem(panel.tree.topLevelItem(1))
        assert not panel.load_button.isEnabled()

    # ---------------------------------------------------------------- 5. mentions

    def test_first_time_mention_rule_loads_only_unambiguous_names(self, tmp_path: Path) -> None:
        """A hyphenated name as written loads; a one-word name, or another case, is only
        suggested, unless mentions are on for that skill."""

        root = tmp_path / "skills"
        for name in ("pdf", "pdf-tools", "zeta"):
            _put_skill(root, name, _skill_md(name))
        store = SkillStore(root)

        assert store.mentions("What does PDF stand for?") == ([], ["pdf"])
        assert store.mentions("use pdf-tools and zeta") == (["pdf-tools"], ["zeta"])
        assert store.mentions("use PDF-Tools") == ([], ["pdf-tools"])
        assert store.mentions("what does pdf mean", always=["pdf"]) == (["pdf"], [])
        assert store.mentions("nothing here") == ([], [])

    @offscreen_popup
    def test_first_time_a_common_word_mention_is_a_one_click_suggestion(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """ "What does PDF stand for?" is sent without the skill; a chip offers it with its
        cost; one click loads it, one click on its chip unloads it."""

        _pdf_skill(tmp_path / "skills")
        window, history = chat_window()
        _send(qtbot, window, "What does PDF stand for?")
        assert window.loaded_skills() == []
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]
        assert window.skill_suggestions.names() == ["pdf"]
        chip = _by_name(window, QPushButton, "Load skill pdf")
        pdf = window.chat.store.load("pdf")
        # An estimate until the server counted the skill (the ratio learns as it counts).
        offered = re.fullmatch(r"Load pdf\? ~([\d,]+) tokens", chip.text())
        assert offered is not None and int(offered.group(1).replace(",", "")) > 10

        qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == ["pdf"]
        assert history.get_session(window.session_id)["skills"] == ["pdf"]
        assert not window.skill_suggestions.isVisible()
        assert re.search(
            r"Loaded skill pdf \(~[\d,]+ tokens\)", window.statusBar().currentMessage()
        )
        # Once the meter has the server's count of the skill, its chip says that figure.
        counted = httpx.post(
            f"{router.url}/tokenize",
            json={"model": "test-model", "content": system_part(pdf)},
        ).json()["tokens"]
        qtbot.waitUntil(
            lambda: (
                f"~{len(counted):,} tokens"
                in _by_name(window, QPushButton, "Unload skill pdf").toolTip()
            )
        )
        assert skills_chips.skill_tokens(pdf, window.chat.context.quick_tokens) == len(counted)
        unload = _by_name(window, QPushButton, "Unload skill pdf")
        qtbot.mouseClick(unload, Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == []

        _send(qtbot, window, "and finance-cli?")
        assert window.loaded_skills() == ["finance-cli"]
        assert not window.skill_suggestions.isVisible()
        _send(qtbot, window, "a pdf again")
        assert window.skill_suggestions.isVisible()
        window.new_session()
        assert not window.skill_suggestions.isVisible()

    @offscreen_dialogs
    def test_first_time_load_when_mentioned_is_saved_and_then_loads_at_once(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The panel's "Load when mentioned" writes skill_mentions to config.toml; after it a
        one-word mention loads the skill."""

        path = tmp_path / "config.toml"
        config.update_file(path, {"skills_dir": str(tmp_path / "skills")})
        window, _history = chat_window(path=path)
        panel = window.skills.open_panel()
        panel.tree.setCurrentItem(panel.tree.topLevelItem(1))
        assert panel.skill_names()[1] == "weather"
        qtbot.mouseClick(panel.mention_button, Qt.MouseButton.LeftButton)
        assert window.app.config.skill_mentions == ("weather",)
        saved = tomllib.loads(window.app.file_config.path.read_text(encoding="utf-8"))
        assert saved["skill_mentions"] == ["weather"]
        assert "loads when mentioned" in panel.rows()[1][3]
        panel.close()
        _send(qtbot, window, "what is the weather tomorrow")
        assert window.loaded_skills() == ["weather"]

    @quick_offscreen
    def test_first_time_quick_window_and_ask_print_say_a_mention_was_not_loaded(
        self, quick, router, qtbot, tmp_path: Path
    ) -> None:
        """Where no chip can be clicked, the one-word mention is named with the `/name` that
        loads it: in the quick window's notice, and on ask --print's stderr."""

        window, _history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=["Sunny."]))
        _quick_ask(qtbot, window, "is the weather nice")
        assert router.chat_requests()[-1].json["messages"][0]["role"] == "system"
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]
        assert window.notice.text() == (
            "Mentioned, not loaded: skill weather (add /weather to the question to use it)."
        )

        done = _llamachat(_quick_config_file(tmp_path, router.url), "ask", "--print", "weather?")
        assert done.returncode == 0, done.stderr
        assert "mentioned, not loaded: skill weather (add /weather to load it)" in done.stderr
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]

    # ---------------------------------------------------------------- 6. the `/` completer

    @offscreen_popup
    def test_first_time_completer_is_as_wide_as_the_box_and_esc_closes_it(
        self, chat_window, router, qtbot
    ) -> None:

        window, _history = chat_window()
        # Narrower than the offscreen screen (800 px), which caps a popup's width.
        window.resize(700, 600)
        editor = _by_name(window, QPlainTextEdit, "Message")
        popup = window.composer.completer.popup()
        qtbot.keyClicks(editor, "/")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        assert popup.width() == editor.width()
        assert (
            popup.mapToGlobal(popup.rect().topLeft()).x()
            == editor.mapToGlobal(editor.rect().topLeft()).x()
        )
        qtbot.keyClick(editor, Qt.Key.Key_Escape)
        assert not popup.isVisible()
        assert window.composer.text() == "/"

    @offscreen_popup
    def test_first_time_a_whole_slash_name_and_one_enter_loads_it(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """`/weather` typed out, one Enter: loaded, nothing sent, the box empty. A partial
        name and Enter completes it first, as before."""

        window, _history = chat_window()
        editor = _by_name(window, QPlainTextEdit, "Message")
        popup = window.composer.completer.popup()
        qtbot.keyClicks(editor, "/weather")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.loaded_skills() == ["weather"]
        assert window.composer.text() == ""
        assert router.chat_requests() == []

        qtbot.keyClicks(editor, "/fin")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.composer.text() == "/finance-cli "
        assert window.loaded_skills() == ["weather"]

        # A whole name that begins a longer one: the name picked with the arrows wins.
        _write_skill(tmp_path / "skills", "weather-alerts", _skill_md("weather-alerts"))
        window.composer.clear()
        window.skills.refresh_names()
        qtbot.keyClicks(editor, "/weather")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        qtbot.keyClick(popup, Qt.Key.Key_Down)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.composer.text() == "/weather-alerts "

    @offscreen_dialogs
    @offscreen_popup
    def test_first_time_slash_skills_opens_the_panel_where_enter_loads_nothing(
        self, chat_window, router, qtbot
    ) -> None:

        window, _history = chat_window()
        assert "skills" in _completions(window)
        editor = _by_name(window, QPlainTextEdit, "Message")
        qtbot.keyClicks(editor, "/skills")
        qtbot.keyClick(window.composer.completer.popup(), Qt.Key.Key_Return)
        panel = window.skills._panel
        assert panel is not None and panel.isVisible()
        panel.tree.setFocus()
        panel.tree.setCurrentItem(panel.tree.topLevelItem(0))
        qtbot.keyClick(panel.tree, Qt.Key.Key_Return)
        assert window.loaded_skills() == []
        assert panel.isVisible()

    # ---------------------------------------------------------------- 7. loading twice

    def test_first_time_loading_twice_answers_already_loaded_without_a_second_copy(
        self, router, tmp_path: Path
    ) -> None:
        """A skill in the system message, or one loaded earlier in the turn, is answered
        "already loaded" and its text is not sent again."""

        store = _skill_store(tmp_path)
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="a")]),
            Reply(content="ok"),
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="b")]),
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="c")]),
            Reply(content="ok"),
        )
        loaded = tools.SkillsConfig(
            enabled=True, store=store, max_searches=2, loaded=("finance-cli",)
        )
        events = _ask(router.url, {"messages": _user(), "skills": loaded})
        assert ("skill_loaded", "finance-cli") not in events
        answer = router.chat_requests()[1].json["messages"][-1]["content"]
        assert answer.startswith("The skill finance-cli is already loaded")
        assert "Run `finance auth test` first." not in answer

        fresh = tools.SkillsConfig(enabled=True, store=store, max_searches=2)
        events = _ask(router.url, {"messages": _user(), "skills": fresh})
        assert events.count(("skill_loaded", "finance-cli")) == 1
        convo = router.chat_requests()[-1].json["messages"]
        results = [m["content"] for m in convo if m["role"] == "tool"]
        assert "Run `finance auth test` first." in results[0]
        assert results[1].startswith("The skill finance-cli is already loaded")

    @offscreen_popup
    def test_first_time_a_loaded_skill_deleted_from_disk_is_listed_as_missing(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:

        window, _history = chat_window()
        _send(qtbot, window, "/weather hi")
        shutil.rmtree(tmp_path / "skills" / "weather")
        panel = window.skills.open_panel()
        panel.refresh()
        assert panel.rows()[-1] == [
            "weather",
            "Deleted from disk: the model no longer gets it.",
            "",
            "missing",
            "loaded",
        ]
        qtbot.waitUntil(lambda: window.skill_chips.missing() == ["weather"], timeout=2000)
        panel.tree.setCurrentItem(panel.tree.topLevelItem(panel.tree.topLevelItemCount() - 1))
        qtbot.mouseClick(panel.unload_button, Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == []


class TestScriptedRouter:
    """`llamachat.dev.scripted_router`: the router the tests and benchmarks talk to."""

    def test_scripted_router_streams_pieces_then_usage_timings_and_done(self, router) -> None:

        router.script(
            Reply(
                reasoning=["think ", "hard"],
                content=["Hel", "lo"],
                tool_calls=[ToolCall("web_search", '{"query": "abc"}', fragments=3)],
            )
        )
        body = {
            "model": "test-model",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi there"}],
        }
        r = httpx.post(router.url + "/v1/chat/completions", json=body)
        assert r.headers["content-type"].startswith("text/event-stream")
        objs = _sse_objects(r.text)
        assert objs[-1] == "[DONE]"
        deltas = [o["choices"][0]["delta"] for o in objs[:-1] if o["choices"]]
        assert "".join(d.get("reasoning_content") or "" for d in deltas) == "think hard"
        assert "".join(d.get("content") or "" for d in deltas) == "Hello"
        frags = [tc for d in deltas for tc in d.get("tool_calls", [])]
        assert len(frags) == 3 and frags[0]["function"]["name"] == "web_search"
        assert all("name" not in f.get("function", {}) for f in frags[1:])
        assert "".join(f["function"]["arguments"] for f in frags) == '{"query": "abc"}'
        assert objs[-3]["choices"][0]["finish_reason"] == "tool_calls"
        usage_chunk = objs[-2]
        assert usage_chunk["choices"] == []
        assert usage_chunk["usage"]["completion_tokens"] == 5
        assert usage_chunk["timings"]["predicted_per_second"] > 0

    def test_scripted_router_echoes_last_user_message_and_records_requests(self, router) -> None:

        body = {
            "model": "test-model",
            "stream": False,
            "messages": [{"role": "user", "content": "ping"}],
        }
        r = httpx.post(
            router.url + "/v1/chat/completions", json=body, headers={"Authorization": "Bearer k"}
        )
        assert r.json()["choices"][0]["message"]["content"] == "echo: ping"
        recorded = router.chat_requests()[-1]
        assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
        assert recorded.json == body
        assert recorded.headers["authorization"] == "Bearer k"

    def test_scripted_router_load_goes_loading_then_loaded_and_unload_resets(self) -> None:

        with ScriptedRouter([Model("a", aliases=("alpha",))], load_delay=0.3) as r:
            assert httpx.post(r.url + "/models/load", json={"model": "a"}).json() == {
                "success": True
            }
            statuses = {
                m["id"]: m["status"]["value"] for m in httpx.get(r.url + "/models").json()["data"]
            }
            assert statuses == {"a": "loading"}
            while r.status("a") == "loading":
                httpx.get(r.url + "/health")
            assert r.status("a") == "loaded"
            listed = httpx.get(r.url + "/v1/models").json()["data"][0]
            assert listed["aliases"] == ["alpha"]
            assert httpx.post(r.url + "/models/unload", json={"model": "a"}).status_code == 200
            assert r.status("a") == "unloaded"

    def test_scripted_router_failing_model_reports_failed_with_exit_code(self) -> None:

        with ScriptedRouter([Model("broken", fail_exit_code=3)]) as r:
            resp = httpx.post(r.url + "/models/load", json={"model": "broken"})
            assert resp.status_code == 500
            assert "exit code 3" in resp.json()["error"]["message"]
            status = httpx.get(r.url + "/models").json()["data"][0]["status"]
            assert status == {"value": "unloaded", "failed": True, "exit_code": 3}

    def test_scripted_router_props_with_autoload_false_never_loads(self) -> None:

        with ScriptedRouter([Model("a", n_ctx=8192)]) as r:
            resp = httpx.get(r.url + "/props", params={"model": "a", "autoload": "false"})
            assert resp.status_code == 400
            assert r.status("a") == "unloaded"
            resp = httpx.get(r.url + "/props", params={"model": "a"})
            assert resp.json()["default_generation_settings"]["n_ctx"] == 8192
            assert r.status("a") == "loaded"

    def test_scripted_router_http_error_and_mid_stream_error_chunk(self, router) -> None:

        router.script(
            Reply(
                status=400,
                error={
                    "type": "exceed_context_size_error",
                    "message": "too big",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 4096,
                },
            ),
            Reply(content=["a", "b", "c"], error_after=2, error={"message": "boom"}),
        )
        body = {"model": "test-model", "stream": True, "messages": []}
        resp = httpx.post(router.url + "/v1/chat/completions", json=body)
        assert resp.status_code == 400
        assert resp.json()["error"]["n_ctx"] == 4096
        objs = _sse_objects(httpx.post(router.url + "/v1/chat/completions", json=body).text)
        assert objs[-1] == {"error": {"code": 500, "message": "boom", "type": "server_error"}}
        assert len(objs) == 3

    def test_scripted_router_die_after_closes_socket_mid_body(self, router) -> None:

        router.script(Reply(content=["x"] * 10, die_after=3))
        body = {"model": "test-model", "stream": True, "messages": []}
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(router.url + "/v1/chat/completions", json=body)

    def test_scripted_router_stall_holds_until_released_and_sees_client_leave(self, router) -> None:

        body = {"model": "test-model", "stream": True, "messages": []}
        router.script(Reply(content=["a", "b"], stall_after=2))
        with (
            httpx.Client(timeout=httpx.Timeout(5.0, read=0.3)) as client,
            pytest.raises(httpx.ReadTimeout),
        ):
            client.post(router.url + "/v1/chat/completions", json=body)

        deadline = time.monotonic() + 10
        while router.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.disconnects == 1

        router.script(Reply(content=["a", "b"], stall_after=2))
        with httpx.stream("POST", router.url + "/v1/chat/completions", json=body) as resp:
            events = (line for line in resp.iter_lines() if line)
            first_two = [next(events), next(events)]
            router.release()
            rest = list(events)
        assert '"content":"a"' in first_two[1]
        assert rest[-1] == "data: [DONE]"

    def test_scripted_router_streams_twenty_thousand_tokens_intact(self, router) -> None:

        router.script(Reply.tokens(20_000, word="w "))
        body = {"model": "test-model", "stream": True, "messages": []}
        objs = _sse_objects(httpx.post(router.url + "/v1/chat/completions", json=body).text)
        text = "".join(
            o["choices"][0]["delta"].get("content") or "" for o in objs[:-1] if o["choices"]
        )
        assert text == "w " * 20_000

    def test_scripted_router_api_key_guards_all_but_health(self) -> None:

        with ScriptedRouter(api_key="sekrit") as r:
            assert httpx.get(r.url + "/health").status_code == 200
            denied = httpx.get(r.url + "/v1/models")
            assert denied.status_code == 401
            assert denied.json()["error"]["type"] == "authentication_error"
            ok = httpx.get(r.url + "/v1/models", headers={"Authorization": "Bearer sekrit"})
            assert ok.status_code == 200


class TestWebSearch:
    """`llamachat.tools.web_search`: SearXNG web search, the tool and its toggle."""

    def test_search_lists_top_results_compactly_deduplicated_and_capped(self, searx) -> None:
        from llamachat.tools import web_search

        searx.results.insert(1, dict(searx.results[0]))
        found = web_search.search(searx.url, "llamas", max_results=3)
        assert [r["url"] for r in found] == [f"https://example.org/{n}" for n in (1, 2, 3)]
        assert found[0] == {
            "title": "Result 1",
            "url": "https://example.org/1",
            "snippet": "Snippet number 1 with spaces",
        }
        assert searx.queries == ["llamas"]
        text = web_search.result_text("llamas", found)
        assert text.splitlines()[0] == 'Search results for "llamas":'
        assert "1. Result 1\n   https://example.org/1\n   Snippet number 1 with spaces" in text
        assert "Result 4" not in text

    def test_search_long_snippets_are_cut_with_an_ellipsis(self, searx) -> None:
        from llamachat.tools import web_search

        searx.results[0]["content"] = "word " * 500
        snippet = web_search.search(searx.url, "q")[0]["snippet"]
        assert len(snippet) == web_search.SNIPPET_CHARS and snippet.endswith("…")

    @pytest.mark.parametrize(
        ("mode", "reason"),
        [
            ("error", "answered HTTP 500"),
            ("html", "did not answer with JSON"),
            ("forbidden", "enable the json format"),
            ("slow", "did not answer within 0.3 s"),
        ],
    )
    def test_search_failures_raise_search_error_saying_why(self, searx, mode, reason) -> None:
        from llamachat.tools import web_search

        searx.mode = mode
        with pytest.raises(web_search.SearchError, match=reason):
            web_search.search(searx.url, "q", timeout=0.3)

    def test_search_unreachable_engine_raises_search_error(self) -> None:

        from llamachat.tools import web_search

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(web_search.SearchError, match="could not be reached"):
            web_search.search(f"http://127.0.0.1:{port}", "q")

    def test_search_empty_results_give_a_clear_tool_result(self, searx) -> None:
        from llamachat.tools import web_search

        searx.mode = "empty"
        assert web_search.search(searx.url, "nothing") == []
        assert web_search.result_text("nothing", []).startswith('No results for "nothing".')

    def test_search_date_note_has_day_granularity(self) -> None:

        from llamachat.tools import web_search

        assert (
            web_search.date_note(dt.date(2026, 11, 30))
            == "Today's date is Monday, 30 November 2026."
        )
        assert web_search.date_note() == web_search.date_note(dt.date.today())

    def test_search_parse_query_rejects_malformed_arguments(self) -> None:
        from llamachat.tools import web_search

        assert web_search.parse_query('{"query": " llamas "}') == "llamas"
        for bad in ("{not json", "[]", '{"q": "x"}', '{"query": ""}'):
            with pytest.raises(ValueError):
                web_search.parse_query(bad)

    def test_chrome_window_web_search_toggle_offers_the_tool_and_date_note(
        self, chat_window, router, qtbot
    ) -> None:
        """Turning Web search off drops the web_search tool and the date note from requests."""

        window, _history = chat_window(search_url="http://127.0.0.1:9")
        toggle = _by_name(window, QToolButton, "Web search")
        assert toggle.isChecked()
        _send(qtbot, window, "one")
        first = router.chat_requests()[-1].json
        assert "Today's date is" in first["messages"][0]["content"]
        assert "web_search" in [t["function"]["name"] for t in first.get("tools", [])]

        qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
        assert not window.web_search.is_on()
        _send(qtbot, window, "two")
        second = router.chat_requests()[-1].json
        assert "Today's date is" not in second["messages"][0]["content"]
        assert "web_search" not in [t["function"]["name"] for t in second.get("tools", [])]


class TestClient:
    """`llamachat.router.client`: streaming replies, and the faults of a server mid-reply."""

    def test_backend_request_meeting_a_closed_kept_alive_connection_is_sent_again(
        self,
    ) -> None:
        """A server that closes an idle kept-alive connection without answering the request
        that met it (as llama-server does): a GET or an idempotent POST goes out again on a
        fresh connection; any other POST says what happened."""

        body = b'{"ok": true}'
        answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        answered: list[str] = []

        def request_line(conn: socket.socket) -> str:
            """Read one whole request (its body too); its first line, or '' at EOF."""
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return ""
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            while length and len(rest) < int(length[1]):
                rest += conn.recv(65536)
            return head.split(b"\r\n")[0].decode()

        def serve() -> None:
            # Each connection answers its first request; the next one it reads whole, and
            # closes without an answer.
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    answered.append(request_line(conn))
                    conn.sendall(answer)
                    request_line(conn)

        threading.Thread(target=serve, daemon=True).start()
        client = Client(f"http://127.0.0.1:{port}", api_key="")
        try:
            for method, idempotent in (("GET", None), ("POST", True)):
                for path in ("/a", "/b"):
                    assert client.request_json(
                        method, path, root=True, idempotent=idempotent, json={}
                    ) == {"ok": True}
            with pytest.raises(backend.StreamError, match="RemoteProtocolError"):
                client.request_json("POST", "/c", root=True, json={})
        finally:
            client.close()
            listener.close()
        # Each /b met the connection /a left, and went out again on a fresh one.
        assert answered == [
            "GET /a HTTP/1.1",
            "GET /b HTTP/1.1",
            "POST /a HTTP/1.1",
            "POST /b HTTP/1.1",
        ]

    def test_backend_keeps_reasoning_and_content_apart_and_ends_with_stats(self, router) -> None:

        router.script(
            Reply(
                reasoning=["Think", "ing"],
                content=["Hel", "lo"],
                usage={"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11},
                timings={"predicted_per_second": 42.0, "cache_n": 3},
            )
        )
        events = _ask(router.url, {"messages": _user()})
        assert events[:4] == [
            ("reasoning", "Think"),
            ("reasoning", "ing"),
            ("content", "Hel"),
            ("content", "lo"),
        ]
        kind, stats = events[-1]
        assert kind == "stats"
        assert stats == {
            "usage": {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11},
            "timings": {"predicted_per_second": 42.0, "cache_n": 3},
            "model": "test-model",
        }
        sent = router.chat_requests()[0].json
        assert sent["stream"] is True
        assert sent["stream_options"] == {"include_usage": True}
        assert "tools" not in sent

    def test_backend_sse_tolerates_comments_empty_deltas_null_content_and_bare_usage(
        self, router
    ) -> None:

        router.script(
            Reply(
                raw=[
                    ": keep-alive comment\n\n",
                    "event: message\n",
                    'data: {"choices":[{"index":0,"delta":{}}]}\n\n',
                    'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}\n\n',
                    'data: {"choices":[]}\n\n',
                    'data:{"choices":[{"index":0,"delta":{"content":"ok"}}]}\r\n\r\n',
                    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
                    'data: {"choices":[],"usage":{"total_tokens":5},"timings":{"predicted_n":1}}\n\n',
                ]
            )
        )
        events = _ask(router.url, {"messages": _user()})
        assert events == [
            ("content", "ok"),
            (
                "stats",
                {
                    "usage": {"total_tokens": 5},
                    "timings": {"predicted_n": 1},
                    "model": "test-model",
                },
            ),
        ]

    def test_backend_error_chunk_mid_stream_raises_stream_error_with_server_message(
        self, router
    ) -> None:

        router.script(
            Reply(
                content=["a", "b", "c"],
                error_after=2,
                error={"message": "slot crashed", "type": "server_error"},
            )
        )
        client = backend.Client(router.url)
        got = []
        with pytest.raises(backend.StreamError) as info:
            got.extend(client.stream_chat("test-model", _user()))
        assert info.value.message == "slot crashed"
        assert info.value.error_type == "server_error"
        assert got == [("content", "a")]
        client.close()

    def test_backend_http_error_raises_server_error_with_type_and_token_counts(
        self, router
    ) -> None:

        message = "request (9412 tokens) exceeds the available context size (8192 tokens)"
        router.script(
            Reply(
                status=400,
                error={
                    "type": "exceed_context_size_error",
                    "message": message,
                    "n_prompt_tokens": 9412,
                    "n_ctx": 8192,
                },
            )
        )
        with pytest.raises(backend.ServerError) as info:
            _ask(router.url, {"messages": _user()})
        err = info.value
        assert (err.status, err.error_type, err.message) == (
            400,
            "exceed_context_size_error",
            message,
        )
        assert err.details == {"n_prompt_tokens": 9412, "n_ctx": 8192}
        assert str(err) == message

    def test_backend_non_json_http_error_keeps_status_and_body_text(self, router) -> None:

        router.script(Reply(status=502, body="Bad Gateway from the proxy"))
        with pytest.raises(backend.ServerError, match="HTTP 502: Bad Gateway from the proxy"):
            _ask(router.url, {"messages": _user()})

    def test_backend_model_that_fails_to_load_gives_the_servers_message(self) -> None:

        with ScriptedRouter([Model("broken", fail_exit_code=1)]) as r:
            with pytest.raises(backend.ServerError, match="failed to load") as info:
                _ask(r.url, {"model": "broken", "messages": _user()})
            assert info.value.status == 500

    def test_backend_connection_refused_names_the_url_and_what_to_do(self) -> None:

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(backend.RouterUnreachable) as info:
            _ask(url, {"messages": _user()})
        assert url in str(info.value)
        assert "Start llama-server" in str(info.value)
        assert "router_url" in str(info.value)

    def test_backend_api_key_goes_in_the_header_only(self, caplog) -> None:

        caplog.set_level(logging.DEBUG)
        key = "sk-test-0123456789"
        with ScriptedRouter(api_key=key) as r:
            events = _ask(r.url, {"messages": _user()}, api_key=key)
            assert events[0] == ("content", "echo: ")
            assert r.chat_requests()[0].headers["authorization"] == f"Bearer {key}"
            assert key not in repr(r.chat_requests()[0].json)
            r.script(Reply(status=500, error={"message": "boom"}))
            with pytest.raises(backend.ServerError) as server_err:
                _ask(r.url, {"messages": _user()}, api_key=key)
            with pytest.raises(backend.ServerError) as auth_err:
                _ask(r.url, {"messages": _user()}, api_key="wrong-key-987")
            assert auth_err.value.status == 401
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(backend.RouterUnreachable) as unreachable:
            _ask(url, {"messages": _user()}, api_key=key)
        for err in (server_err.value, auth_err.value, unreachable.value):
            assert key not in str(err) and key not in repr(err.args)
        assert "wrong-key-987" not in str(auth_err.value)
        assert key not in caplog.text

    def test_backend_reuses_one_connection_across_turns(self, router) -> None:

        client = backend.Client(router.url)
        for _ in range(3):
            list(client.stream_chat("test-model", _user()))
        client.close()
        peers = {r.peer for r in router.chat_requests()}
        assert len(router.chat_requests()) == 3 and len(peers) == 1

    def test_backend_closing_the_generator_closes_the_response(self, router) -> None:

        router.script(Reply(content=["x"] * 2000, delay=0.01))
        client = backend.Client(router.url)
        stream = client.stream_chat("test-model", _user())
        assert next(stream) == ("content", "x")
        stream.close()
        deadline = time.monotonic() + 10
        while router.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.disconnects == 1
        client.close()

    def test_backend_cancel_event_ends_a_silent_stream_and_keeps_what_arrived(self, router) -> None:

        router.script(Reply(content=["a", "b", "c"], stall_after=3))
        cancel = threading.Event()
        client = backend.Client(router.url, idle_timeout=None)
        got = []
        for event in client.stream_chat("test-model", _user(), cancel=cancel):
            got.append(event)
            if event == ("content", "b"):
                cancel.set()
        assert got == [("content", "a"), ("content", "b")]
        client.close()

    def test_backend_cancel_while_the_router_loads_the_model_returns_at_once(self) -> None:

        with ScriptedRouter([Model("huge")], load_delay=60) as r:
            cancel = threading.Event()
            client = backend.Client(r.url)
            timer = threading.Timer(0.2, cancel.set)
            timer.start()
            events = list(client.stream_chat("huge", _user(), cancel=cancel))
            # The reply cannot exist before the load ends: returning now proves the wait
            # for the response headers itself was cut short.
            assert events == []
            assert r.status("huge") == "loading"
            client.close()

    def test_backend_idle_timeout_mid_stream_raises_stall_error(self, router) -> None:

        router.script(Reply(content=["a", "b", "c"], stall_after=2))
        client = backend.Client(router.url, idle_timeout=0.3)
        got = []
        with pytest.raises(backend.StallError, match="sent nothing for 0.3 s"):
            got.extend(client.stream_chat("test-model", _user()))
        assert got == [("content", "a")]
        client.close()

    def test_backend_model_load_silence_before_the_reply_is_not_a_stall(self) -> None:

        with ScriptedRouter([Model("big")], load_delay=0.5) as r:
            events = _ask(r.url, {"model": "big", "messages": _user("x")}, idle_timeout=0.2)
            assert events[0] == ("content", "echo: ")
            assert r.status("big") == "loaded"

    def test_backend_socket_closed_mid_reply_raises_stream_error(self, router) -> None:

        router.script(Reply(content=["a"] * 10, die_after=4))
        with pytest.raises(backend.StreamError, match="broke in the middle of the reply"):
            _ask(router.url, {"messages": _user()})

    def test_backend_stream_ending_without_finish_raises_stream_error(self, router) -> None:

        router.script(Reply(raw=['data: {"choices":[{"index":0,"delta":{"content":"half"}}]}\n\n']))
        client = backend.Client(router.url)
        got = []
        with pytest.raises(backend.StreamError, match="ended before it was complete"):
            got.extend(client.stream_chat("test-model", _user()))
        assert got == [("content", "half")]
        client.close()

    @pytest.mark.parametrize(
        ("raw", "match"),
        [
            ("<html><body>502 Bad Gateway</body></html>\n", "not an event stream"),
            ("data: {not json}\n\n", "not JSON"),
            ('data: ["a list"]\n\n', "unexpected chunk"),
            ("data: " + "x" * 3_000_000 + "\n\n", "line longer than 1,000,000 bytes"),
            ("data: " + "y" * 3_000_000, "line longer than 1,000,000 bytes"),
        ],
    )
    def test_backend_garbage_streams_raise_stream_error_not_a_crash(
        self, router, raw, match
    ) -> None:

        router.script(Reply(raw=[raw]))
        with pytest.raises(backend.StreamError, match=match):
            _ask(router.url, {"messages": _user()}, max_line_bytes=1_000_000)

    def test_backend_ten_megabyte_single_delta_arrives_whole(self, router) -> None:

        big = "é" * (5 * 1024 * 1024)  # 10 MB of UTF-8, 30 MB once JSON-escaped
        router.script(Reply(content=[big, "!"]))
        events = _ask(router.url, {"messages": _user()})
        assert events[0] == ("content", big)
        assert events[1] == ("content", "!")

    def test_backend_server_ignoring_stream_true_still_answers(self, router, searx) -> None:

        whole = {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "reasoning_content": "hm",
                        "tool_calls": [
                            {
                                "id": "w1",
                                "type": "function",
                                "function": {"name": "web_search", "arguments": '{"query": "q"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"total_tokens": 3},
        }
        router.script(Reply(body=json.dumps(whole)), Reply(content=["fine"]))
        events = _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        assert events[:2] == [("reasoning", "hm"), ("search_start", "q")]
        assert ("content", "fine") in events
        assert router.chat_requests()[1].json["messages"][-1]["tool_call_id"] == "w1"

    def test_backend_base_url_with_v1_suffix_reaches_the_same_endpoints(self, router) -> None:

        client = backend.Client(router.url + "/v1/")
        assert client.api_base == router.url + "/v1" and client.root == router.url
        events = list(client.stream_chat("test-model", _user("v1")))
        assert events[0] == ("content", "echo: ")
        assert router.chat_requests()[0].path == "/v1/chat/completions"
        client.close()

    def test_backend_an_error_web_page_shows_its_status_and_title_and_logs_the_page(
        self, router, caplog
    ) -> None:
        """A proxy's 502 page: the error is the status and the page's title (else its first
        line of text), not its HTML; the whole page goes to the log, the key masked."""
        key = "sk-page-secret-0123456789"
        filler = "x" * 5000
        page = (
            "<!DOCTYPE html>\n<html><head><meta charset=utf-8>"
            f"<title>502 Bad Gateway &amp; more</title><style>{filler}</style></head>"
            f"<body><h1>Bad Gateway</h1><p>upstream said {key}</p><p>the end</p></body></html>"
        )
        untitled = "<html><body>\n<h1>Internal <b>Server</b> Error</h1><p>details</p></body></html>"
        router.script(Reply(status=502, body=page), Reply(status=500, body=untitled))
        client = backend.Client(router.url, api_key=key)
        seen = []
        try:
            for _ in range(2):
                with pytest.raises(ServerError) as caught:
                    list(client.stream_chat("test-model", _user()))
                seen.append((caught.value.status, caught.value.message))
        finally:
            client.close()
        url = router.url + "/v1/chat/completions"
        assert seen == [
            (502, f"{url} answered HTTP 502 with an error page: 502 Bad Gateway & more"),
            (500, f"{url} answered HTTP 500 with an error page: Internal Server Error"),
        ]
        logged = caplog.text
        assert filler in logged and "<p>the end</p>" in logged and "details" in logged
        assert key not in logged

    def test_fault_router_killed_mid_reply_keeps_partial_error_and_retry_recovers(
        self, chat_window, qtbot
    ) -> None:
        """The router dies mid-reply: text kept as 'error' with Retry; Retry on a live router works."""

        doomed = ScriptedRouter()
        window, history = chat_window(url=doomed.url)
        doomed.script(Reply(content=["kept ", "text ", "never ", "sent"], stall_after=3))
        _fault_start(qtbot, window, "Tell me")
        qtbot.waitUntil(lambda: window.conversation.last_assistant().content() == "kept text ")
        doomed.close()  # the router process is gone: its sockets close mid-body
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)

        failed = _fault_row(history, window)
        assert (failed["content"], failed["status"]) == ("kept text ", "error")
        assert "ended before it was complete" in failed["error"] or "broke" in failed["error"]
        view = window.conversation.last_assistant()
        assert failed["error"] in _fault_status_label(view)

        # Retry while nothing listens: a clear message naming the URL, still no crash, and the
        # earlier text stays (the attempt produced none to replace it).
        qtbot.mouseClick(_by_name(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        kept = _fault_row(history, window)
        assert (kept["content"], kept["status"]) == ("kept text ", "error")
        said = window.problem_bar.text()  # a notice that stays: the user must act on it
        assert doomed.url in said and "router_url" in said
        assert window.conversation.last_assistant().content() == "kept text "

        with ScriptedRouter() as revived:
            revived.script(Reply(content="Back again."))
            window.app.use_router(revived.url)
            view = window.conversation.last_assistant()
            qtbot.mouseClick(_by_name(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
            rows = history.messages(window.session_id)
            assert [(m["role"], m["content"], m["status"]) for m in rows] == [
                ("user", "Tell me", "complete"),
                ("assistant", "Back again.", "complete"),
            ]
            window.close()

    def test_fault_stalled_router_is_stopped_by_the_user_or_ended_by_idle_timeout(
        self, chat_window, router, qtbot
    ) -> None:
        """Headers then silence: Stop ends it at once; else cfg.idle_timeout ends it with a message."""

        window, history = chat_window(idle_timeout=0.5)
        router.script(Reply(content=["first ", "lost"], stall_after=2))
        _fault_start(qtbot, window, "stall")
        qtbot.waitUntil(lambda: window.conversation.last_assistant().content() == "first ")
        qtbot.mouseClick(_by_name(window, QAbstractButton, "Stop"), Qt.MouseButton.LeftButton)
        assert not window.is_streaming()
        assert (_fault_row(history, window)["content"], _fault_row(history, window)["status"]) == (
            "first ",
            "stopped",
        )
        qtbot.waitUntil(lambda: router.disconnects == 1, timeout=5000)

        # Nothing at all after the headers, and nobody presses Stop.
        router.script(Reply(content=["never"], stall_after=0))
        _fault_start(qtbot, window, "stall again")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        row = _fault_row(history, window)
        assert (row["content"], row["status"]) == ("", "error")
        assert "sent nothing for 0.5 s" in row["error"] and "idle_timeout" in row["error"]
        assert row["error"] in _fault_status_label(window.conversation.last_assistant())
        router.release()

    @pytest.mark.parametrize(
        ("raw", "says"),
        [
            pytest.param([_OK_CHUNK, b"data: {not json\n\n"], "not JSON", id="invalid-json"),
            pytest.param(
                [_OK_CHUNK, b"data: [1, 2, 3]\n\n"], "unexpected chunk", id="json-not-object"
            ),
            pytest.param(
                [_OK_CHUNK, b"<html>502 Bad Gateway</html>\n\n"],
                "not an event stream",
                id="html-in-stream",
            ),
            pytest.param(
                [_OK_CHUNK, b"\x00\xff\xfe\x80garbage\n\n"],
                "not an event stream",
                id="binary-garbage",
            ),
            pytest.param([_OK_CHUNK], "ended before it was complete", id="no-finish"),
            pytest.param(
                [_OK_CHUNK, b"data: " + b"x" * (64 * 1024 * 1024 + 16)],
                "longer than",
                id="oversized-line",
            ),
        ],
    )
    def test_fault_garbage_sse_ends_the_reply_with_a_message_and_the_window_goes_on(
        self, chat_window, router, qtbot, raw, says
    ) -> None:
        """Broken streams: the text before the damage is kept, the reply says what broke."""

        window, history = chat_window()
        router.script(Reply(raw=raw))
        _send(qtbot, window, "garbage please")
        row = _fault_row(history, window)
        assert (row["content"], row["status"]) == ("ok ", "error")
        assert says in row["error"]
        assert len(row["error"]) < 400, "the message quotes a whole garbage line"
        assert row["error"] in _fault_status_label(window.conversation.last_assistant())

        _send(qtbot, window, "still there?")
        row = _fault_row(history, window)
        assert (row["content"], row["status"]) == ("echo: still there?", "complete")

    def test_fault_a_socket_that_accepts_and_never_answers_is_a_hang_not_a_wait(
        self,
        tmp_path: Path,
    ) -> None:
        """Something takes the connection and never says a byte: the reply ends with a message
        once idle_timeout passes and a status check gets no answer either."""

        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel accepts; nobody ever reads or answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        try:
            pieces, error = _fault_stream_outcome(url, idle_timeout=0.3)
        finally:
            listener.close()
        assert pieces == []
        assert isinstance(error, backend.StallError) and error.error_type == "hung"
        assert url in error.message and "stopped or stuck" in error.message

    def test_fault_a_stopped_router_process_is_a_hang(self, tmp_path: Path) -> None:
        """A router process that got SIGSTOP mid-conversation: the next reply ends with a message
        instead of waiting forever; once it runs again, replies work."""
        import signal

        proc = subprocess.Popen(
            [sys.executable, "-m", "llamachat.dev.scripted_router"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = proc.stdout.readline().strip()
            assert _fault_stream_outcome(url, idle_timeout=0.3) == (["echo: ", "hi"], None)
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                pieces, error = _fault_stream_outcome(url, idle_timeout=0.3)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            assert pieces == [] and isinstance(error, backend.StallError), error
            assert error.error_type == "hung"
            assert _fault_stream_outcome(url, idle_timeout=0.3) == (["echo: ", "hi"], None)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stdin.close()

    def test_fault_a_model_loading_longer_than_idle_timeout_is_waited_for(self) -> None:
        """The router takes many idle_timeouts to load the model before it answers: the model
        status says `loading`, so the reply waits and arrives."""

        with ScriptedRouter([Model("test-model", "unloaded")], load_delay=1.5) as slow:
            slow.script(Reply(content=["loaded ", "at last"]))
            pieces, error = _fault_stream_outcome(slow.url, idle_timeout=0.2)
            assert (pieces, error) == (["loaded ", "at last"], None)
            assert slow.status("test-model") == "loaded"
            # The wait was checked on, not merely outlasted.
            assert any(r.path.endswith("/models") for r in slow.requests)

    def test_fault_a_router_that_never_begins_the_reply_but_answers_status_checks_is_a_hang(
        self,
    ) -> None:
        """The chat request is taken and its headers never come, while /models (the model
        loaded, not loading) and /props answer: the reply ends once idle_timeout passes."""
        never = threading.Event()
        with _fault_raw_router(lambda handler: never.wait(30)) as url:
            try:
                pieces, error = _fault_stream_outcome(url, idle_timeout=0.3, limit=10)
            finally:
                never.set()
        assert pieces == [] and isinstance(error, backend.StallError), error
        assert error.error_type == "hung" and url in error.message
        assert "not loading the model" in error.message and "idle_timeout" in error.message

    def test_fault_a_redirect_elsewhere_is_not_followed_and_says_where_it_points(self) -> None:
        """A 307 to another host: the request is not sent there, and the error says it was
        redirected and where to (credentials and the key masked), not that the server crashed."""
        key = "sk-0123456789-qwertzuiop"
        location = f"https://bob:hunter2-pass@elsewhere.example:8443/v1/chat/completions?key={key}"

        def redirect(handler) -> None:
            handler.send_response(307)
            handler.send_header("Location", location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        with _fault_raw_router(redirect) as url:
            client = backend.Client(url, api_key=key)
            try:
                with pytest.raises(backend.ServerError) as caught:
                    list(client.stream_chat("test-model", _user()))
            finally:
                client.close()
        error = caught.value
        assert error.status == 307 and error.error_type == "redirect"
        assert "redirected" in error.message and "crashed" not in error.message
        where = "https://bob:***@elsewhere.example:8443/v1/chat/completions?key=***"
        assert where in error.message, error.message
        assert key not in error.message and "hunter2" not in error.message


class TestTools:
    """`llamachat.tools` and the tool loop of `backend`."""

    def test_backend_search_round_runs_search_and_answers_the_call(self, router, searx) -> None:
        from llamachat.tools import web_search

        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "llama news"}', id="c1")]),
            Reply(content="Here you go."),
        )
        events = _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        kinds = [k for k, _ in events]
        assert kinds == ["search_start", "search_done", "content", "content", "content", "stats"]
        assert events[0] == ("search_start", "llama news")
        done = events[1][1]
        assert done["query"] == "llama news" and done["error"] == ""
        assert [r["url"] for r in done["results"]] == [
            f"https://example.org/{n}" for n in range(1, 6)
        ]
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [web_search.TOOL_SCHEMA]
        assert second["tools"] == [web_search.TOOL_SCHEMA]  # round 2 of 2 still offers tools
        assistant, tool = second["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert assistant["tool_calls"] == [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "web_search", "arguments": '{"query": "llama news"}'},
            }
        ]
        assert tool["role"] == "tool" and tool["tool_call_id"] == "c1"
        assert "1. Result 1\n   https://example.org/1" in tool["content"]
        assert "last available tool use" not in tool["content"]

    def test_backend_after_max_searches_a_final_round_offers_no_tools(self, router, searx) -> None:

        call = ToolCall("web_search", '{"query": "again"}')
        router.script(
            Reply(tool_calls=[call]),
            Reply(tool_calls=[call]),
            Reply(tool_calls=[call]),
            Reply(content="never asked"),
        )
        events = _ask(router.url, {"messages": _user(), "search": _search_cfg(searx, 2)})
        requests = [r.json for r in router.chat_requests()]
        assert len(requests) == 3
        assert "tools" in requests[0] and "tools" in requests[1]
        assert "tools" not in requests[2]
        assert [k for k, _ in events].count("search_start") == 2
        tool_results = [m for m in requests[2]["messages"] if m["role"] == "tool"]
        assert len(tool_results) == 2
        assert skills.NO_MORE_TOOLS not in tool_results[0]["content"]
        assert tool_results[1]["content"].endswith("\n\n" + skills.NO_MORE_TOOLS)
        assert router.pending() == 1

    def test_backend_tool_call_fragments_accumulate_by_index(self, router, searx) -> None:

        def delta(tc: dict) -> str:
            return (
                "data: "
                + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]})
                + "\n\n"
            )

        router.script(
            Reply(
                raw=[
                    delta(
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "web_search", "arguments": ""},
                        }
                    ),
                    delta(
                        {
                            "index": 1,
                            "id": "b",
                            "type": "function",
                            "function": {"name": "web_search", "arguments": '{"qu'},
                        }
                    ),
                    delta({"index": 0, "function": {"arguments": '{"query": '}}),
                    delta({"index": 1, "function": {"arguments": 'ery": "second"}'}}),
                    delta({"index": 0, "function": {"arguments": '"first"}'}}),
                    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
                ]
            ),
            Reply(content="done"),
        )
        events = _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        assert [p for k, p in events if k == "search_start"] == ["first", "second"]
        second = router.chat_requests()[1].json["messages"]
        calls = second[-3]["tool_calls"]
        assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
            ("a", '{"query": "first"}'),
            ("b", '{"query": "second"}'),
        ]
        assert [(m["tool_call_id"], m["content"].splitlines()[0]) for m in second[-2:]] == [
            ("a", 'Search results for "first":'),
            ("b", 'Search results for "second":'),
        ]
        assert searx.queries == ["first", "second"]

    def test_backend_unknown_tool_and_malformed_arguments_get_error_results(
        self, router, searx
    ) -> None:

        router.script(
            Reply(
                tool_calls=[
                    ToolCall("calculator", '{"x": 1}', id="u1"),
                    ToolCall("web_search", "{not json", id="m1"),
                ]
            ),
            Reply(content="ok"),
        )
        events = _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        assert ("content", "ok") in events
        assert not any(k == "search_start" for k, _ in events)
        messages = router.chat_requests()[1].json["messages"]
        assistant, unknown, malformed = messages[-3:]
        assert unknown["tool_call_id"] == "u1"
        assert unknown["content"].startswith("error: unknown tool 'calculator'")
        assert "web_search" in unknown["content"]
        assert malformed["tool_call_id"] == "m1"
        assert malformed["content"].startswith("error: the web_search arguments could not be used")
        # Garbage arguments are not replayed: llama.cpp would reject the whole request.
        assert assistant["tool_calls"][1]["function"]["arguments"] == "{}"
        assert searx.queries == []

    @pytest.mark.parametrize(
        ("mode", "reason"),
        [
            ("error", "answered HTTP 500"),
            ("html", "did not answer with JSON"),
            ("slow", "did not answer within 0.3 s"),
            ("forbidden", "HTTP 403"),
        ],
    )
    def test_backend_search_failures_become_tool_results(self, router, searx, mode, reason) -> None:

        searx.mode = mode
        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "q"}', id="s1")]),
            Reply(content=["answered anyway"]),
        )
        cfg = tools.SearchConfig(enabled=True, url=searx.url, max_searches=1, timeout=0.3)
        events = _ask(router.url, {"messages": _user(), "search": cfg})
        done = dict(events)["search_done"]
        assert reason in done["error"] and done["results"] == []
        assert ("content", "answered anyway") in events
        tool = router.chat_requests()[1].json["messages"][-1]
        assert tool["tool_call_id"] == "s1"
        assert tool["content"].startswith('error: the web search for "q" failed:')
        assert reason in tool["content"]

    def test_backend_empty_search_results_tell_the_model(self, router, searx) -> None:

        searx.mode = "empty"
        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "zzz"}')]), Reply(content="nothing")
        )
        events = _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        assert dict(events)["search_done"] == {"query": "zzz", "results": [], "error": ""}
        tool = router.chat_requests()[1].json["messages"][-1]
        assert tool["content"].startswith('No results for "zzz".')

    def test_backend_reasoning_is_replayed_on_the_tool_call_message(self, router, searx) -> None:

        router.script(
            Reply(
                reasoning=["I should ", "search."],
                content=["Let me look."],
                tool_calls=[ToolCall("web_search", '{"query": "q"}')],
            ),
            Reply(content="done"),
        )
        _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        assistant = router.chat_requests()[1].json["messages"][-2]
        assert assistant["reasoning_content"] == "I should search."
        assert assistant["content"] == "Let me look."

    def test_backend_never_mutates_the_callers_messages(self, router, searx) -> None:

        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
        before = copy.deepcopy(messages)
        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "q"}')]), Reply(content="done")
        )
        _ask(router.url, {"messages": messages, "search": _search_cfg(searx)})
        assert messages == before
        assert len(router.chat_requests()[1].json["messages"]) == 4

    def test_backend_search_puts_todays_date_in_the_system_prompt_once(self, router, searx) -> None:
        from llamachat.tools import web_search

        note = web_search.date_note()
        _ask(
            router.url,
            {
                "messages": [{"role": "system", "content": "Be brief."}, *_user()],
                "search": _search_cfg(searx),
            },
        )
        _ask(
            router.url,
            {
                "messages": [{"role": "system", "content": f"Be brief.\n\n{note}"}, *_user()],
                "search": _search_cfg(searx),
            },
        )
        _ask(router.url, {"messages": _user(), "search": _search_cfg(searx)})
        _ask(router.url, {"messages": _user()})
        first, second, third, plain = (r.json["messages"] for r in router.chat_requests())
        assert first[0]["content"] == f"Be brief.\n\n{note}"
        assert second[0]["content"] == first[0]["content"]
        assert third[0] == {"role": "system", "content": note}
        assert plain[0]["role"] == "user"

    def test_backend_disabled_search_offers_no_tools_and_runs_no_loop(self, router, searx) -> None:

        cfg = tools.SearchConfig(enabled=False, url=searx.url)
        _ask(router.url, {"messages": _user(), "search": cfg})
        assert "tools" not in router.chat_requests()[0].json

    def test_backend_load_skill_yields_skill_loaded_and_sends_the_body(
        self, router, tmp_path
    ) -> None:

        store = _skill_store(tmp_path)
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="k1")]),
            Reply(content="Done."),
        )
        cfg = tools.SkillsConfig(enabled=True, store=store, max_searches=1)
        events = _ask(router.url, {"messages": _user(), "skills": cfg})
        assert events[0] == ("skill_loaded", "finance-cli")
        assert ("content", "Done.") in events
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [store.tool_schema()]
        assert "tools" not in second
        tool = second["messages"][-1]
        assert tool["tool_call_id"] == "k1"
        assert "[skill: finance-cli]" in tool["content"]
        assert "Run `finance auth test` first." in tool["content"]

    def test_backend_unknown_skill_is_answered_with_an_error_and_no_event(
        self, router, tmp_path
    ) -> None:

        router.script(
            Reply(
                tool_calls=[
                    ToolCall("load_skill", '{"name": "notes-keeper"}', id="k2"),
                    ToolCall("load_skill", "{oops", id="k3"),
                ]
            ),
            Reply(content="ok"),
        )
        cfg = tools.SkillsConfig(enabled=True, store=_skill_store(tmp_path), max_searches=2)
        events = _ask(router.url, {"messages": _user(), "skills": cfg})
        assert not any(k == "skill_loaded" for k, _ in events)
        unknown, malformed = router.chat_requests()[1].json["messages"][-2:]
        assert unknown["tool_call_id"] == "k2"
        assert unknown["content"].startswith("error: No such skill: notes-keeper.")
        assert "finance-cli" in unknown["content"]
        assert malformed["tool_call_id"] == "k3"
        assert malformed["content"].startswith("error: the load_skill arguments were not valid")

    def test_backend_search_and_skills_share_one_dispatcher(self, router, searx, tmp_path) -> None:
        from llamachat.tools import web_search

        store = _skill_store(tmp_path)
        router.script(
            Reply(
                tool_calls=[
                    ToolCall("load_skill", '{"name": "finance-cli"}', id="k"),
                    ToolCall("web_search", '{"query": "rates"}', id="s"),
                ]
            ),
            Reply(content="Both."),
        )
        events = _ask(
            router.url,
            {
                "messages": _user(),
                "search": _search_cfg(searx, 1),
                "skills": tools.SkillsConfig(enabled=True, store=store, max_searches=1),
            },
        )
        assert [k for k, _ in events][:3] == ["skill_loaded", "search_start", "search_done"]
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [web_search.TOOL_SCHEMA, store.tool_schema()]
        assert "tools" not in second
        skill_msg, search_msg = second["messages"][-2:]
        assert (skill_msg["tool_call_id"], search_msg["tool_call_id"]) == ("k", "s")
        assert skills.NO_MORE_TOOLS not in skill_msg["content"]
        assert search_msg["content"].endswith(skills.NO_MORE_TOOLS)

    def test_backend_skills_config_without_store_offers_nothing(self, router) -> None:

        _ask(router.url, {"messages": _user(), "skills": tools.SkillsConfig(enabled=True)})
        assert "tools" not in router.chat_requests()[0].json

    def test_backend_third_tool_registered_without_touching_backend_is_offered_and_run(
        self,
        router,
    ) -> None:

        clock = _clock_tool()
        router.script(
            Reply(tool_calls=[ToolCall("clock", '{"city": "Lima"}', id="c1")]),
            Reply(content=["Noon."]),
        )
        events = _ask_with(router.url, [clock], rounds=1)
        assert ("clock_read", "Lima") in events and ("content", "Noon.") in events
        assert clock.calls == ["Lima"]
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [clock.schema]
        assert "tools" not in second
        result = second["messages"][-1]
        assert result["tool_call_id"] == "c1"
        assert result["content"] == "It is noon in Lima.\n\n" + skills.NO_MORE_TOOLS

    def test_backend_exception_inside_a_tool_becomes_a_result_the_model_reads(self, router) -> None:

        clock = _clock_tool(broken=True)
        router.script(
            Reply(
                tool_calls=[
                    ToolCall("clock", '{"city": "Oslo"}', id="boom"),
                    ToolCall("clock", "[1, 2]", id="bad"),
                ]
            ),
            Reply(content=["Sorry, no clock."]),
        )
        events = _ask_with(router.url, [clock], rounds=2)
        assert ("content", "Sorry, no clock.") in events
        assert clock.calls == ["Oslo"]
        broken, bad = router.chat_requests()[1].json["messages"][-2:]
        assert broken["tool_call_id"] == "boom"
        assert broken["content"].startswith("error: the clock tool failed (OSError: the clock is")
        assert bad["tool_call_id"] == "bad"
        assert bad["content"].startswith("error: the arguments were not a JSON object")
        # Round 2 still offers the tool: a failure is an answer, not the end of the turn.
        assert router.chat_requests()[1].json["tools"] == [clock.schema]


class TestModels:
    """`llamachat.router.models`: the router's model list and management."""

    def test_models_lists_status_aliases_and_modalities(self) -> None:
        from llamachat.router import models

        with _models_router() as r:
            client = backend.Client(r.url)
            listed = models.Models(client).list()
            assert [(m.id, m.status, m.aliases, m.accepts_images) for m in listed] == [
                ("qwen", "loaded", ("q",), True),
                ("smol", "unloaded", (), False),
                ("broken", "unloaded", (), False),
            ]
            assert models.Models(client).is_router()
            client.close()

    def test_models_parse_failed_sleeping_downloading_and_unknown_statuses(self) -> None:
        from llamachat.router import models

        def status(raw):
            return models.parse_model({"id": "m", "status": raw})

        failed = status({"value": "unloaded", "failed": True, "exit_code": 1})
        assert (failed.status, failed.error) == ("failed", "the model failed to load (exit code 1)")
        assert status({"value": "sleeping"}).status == "sleeping"
        assert status({"value": "downloading", "progress": {}}).status == "downloading"
        assert status({"value": "teleporting"}).status == "unknown"
        assert status("loaded").status == "loaded"
        assert models.parse_model({"id": "m"}).status == "unknown"
        assert models.parse_model({"object": "model"}) is None

    def test_models_load_polls_from_loading_to_loaded_and_unload(self) -> None:
        from llamachat.router import models

        with _models_router(load_delay=0.3) as r:
            m = models.Models(backend.Client(r.url))
            assert m.load("smol") is True
            assert m.get("smol").status == "loading"
            assert m.wait_until_loaded("smol", timeout=10, interval=0.02).status == "loaded"
            assert m.unload("smol") is True
            assert m.get("smol").status == "unloaded"
            assert [q.path for q in r.requests if q.method == "POST"] == [
                "/models/load",
                "/models/unload",
            ]

    def test_models_failed_load_raises_the_servers_message_and_lists_failed(self) -> None:
        from llamachat.router import models

        with _models_router() as r:
            m = models.Models(backend.Client(r.url))
            with pytest.raises(backend.ServerError, match=r"failed to load \(exit code 1\)"):
                m.load("broken")
            info = m.get("broken")
            assert (info.status, info.error) == ("failed", "the model failed to load (exit code 1)")

    def test_models_context_size_and_token_count_never_start_a_load(self) -> None:
        from llamachat.router import models

        with _models_router() as r:
            m = models.Models(backend.Client(r.url))
            assert m.context_size("qwen") == 32768
            assert m.context_size("smol") is None
            assert context.Tokenizer(m.client, "qwen").count("Hello, world") == (3, True)
            assert context.Tokenizer(m.client, "smol").count("Hello")[1] is False
            assert r.status("smol") == "unloaded"
            assert {
                q.query.get("autoload") for q in r.requests if q.path in ("/props", "/tokenize")
            } == {"false"}

    def test_models_plain_llama_server_lists_without_status_and_never_loads(self) -> None:
        from llamachat.router import models

        with ScriptedRouter([Model("single.gguf", "loaded", n_ctx=4096)], router=False) as r:
            m = models.Models(backend.Client(r.url))
            listed = m.list()
            assert [(x.id, x.status) for x in listed] == [("single.gguf", "unknown")]
            assert not m.is_router()
            assert m.load("single.gguf") is False and m.unload("single.gguf") is False
            assert m.context_size("single.gguf") == 4096
            assert not any(q.path.startswith("/models/") for q in r.requests)

    def test_models_unreachable_server_raises_router_unreachable(self) -> None:

        from llamachat.router import models

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(backend.RouterUnreachable, match=url):
            models.Models(backend.Client(url)).list()


class TestRouter:
    """The router's model management: events, states, parameters, downloads, idle sleep."""

    def test_router_events_parse_documented_and_released_shapes(self) -> None:
        from llamachat.router.models import parse_event

        def event(name, data=None, model="m"):
            obj = {"model": model, "event": name}
            if data is not None:
                obj["data"] = data
            return parse_event(obj)

        loading = event(
            "status_change",
            {
                "status": "loading",
                "progress": {"stages": ["text_model"], "current": "text_model", "value": 0.5},
            },
        )
        assert (loading.kind, loading.status, loading.progress, loading.stage) == (
            "status",
            "loading",
            0.5,
            "text_model",
        )
        assert event("model_status", {"status": "sleeping"}).status == "sleeping"
        failed = event("status_change", {"status": "unloaded", "exit_code": 1})
        assert (failed.status, failed.error) == ("failed", "the model failed to load (exit code 1)")
        assert event("status_change", {"status": "unloaded", "exit_code": 0}).status == "unloaded"
        download = event(
            "download_progress",
            {
                "https://x/a.gguf": {"done": 25, "total": 100},
                "https://x/b.gguf": {"done": 25, "total": 100},
            },
        )
        assert (download.kind, download.progress) == ("download", 0.25)
        assert event("download_failed", {"message": "disk full"}).error == "disk full"
        assert event("model_remove").kind == "removed"
        assert event("models_reload", model="*").kind == "reload"
        assert event("something_new") is None and parse_event({"event": "x"}) is None

    def test_router_picker_shows_load_progress_from_events_then_loaded(self, qtbot) -> None:
        with ScriptedRouter([Model("qwen", "loaded"), Model("smol")], load_delay=1.0) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2 and picker.watching())
            qtbot.waitUntil(lambda: any(q.path == "/models/sse" for q in r.requests))
            picker.load("smol")
            qtbot.waitUntil(lambda: picker.progress("smol") == 0.5, timeout=5000)
            picker.set_current("smol")
            assert picker.status_label.text() == "Loading… 50%"
            assert (picker.busy.maximum(), picker.busy.value()) == (100, 50)
            qtbot.waitUntil(lambda: picker.status("smol") == "loaded", timeout=5000)
            picker.shutdown()
            registry.close()

    def test_router_picker_without_event_stream_falls_back_to_polling(self, qtbot) -> None:
        with ScriptedRouter([Model("smol")], load_delay=0.3, events=False) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry, poll_ms=100)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: any(q.path == "/models/sse" for q in r.requests))
            qtbot.waitUntil(lambda: picker._watch is not None and not picker._watch.supported)
            picker.choose("smol")
            qtbot.waitUntil(lambda: picker.status("smol") == "loaded", timeout=5000)
            assert not picker.watching()
            assert len([q for q in r.requests if q.path == "/models/sse"]) == 1
            picker.shutdown()
            registry.close()

    def test_router_event_stream_stops_at_once_on_shutdown(self, qtbot) -> None:
        with ScriptedRouter([Model("smol")]) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: len(r._subscribers) == 1)
            picker.shutdown()
            qtbot.waitUntil(lambda: not r._subscribers, timeout=2000)
            registry.close()

    @pytest.mark.real_router
    def test_real_router_load_events_parsed(self, real_router) -> None:
        client = Client(real_router.url)
        models = Models(client)
        if _status(real_router.url, SMOL_ID) != "unloaded":
            models.unload(SMOL_ID)
            _wait_for(lambda: _status(real_router.url, SMOL_ID) == "unloaded", 30, "the unload")
        events: list = []
        stop = threading.Event()
        reader = threading.Thread(target=models.watch, args=(events.append, stop), daemon=True)
        reader.start()
        try:
            time.sleep(0.3)  # the stream is open before the load starts
            models.load(SMOL_ID)
            _wait_for(
                lambda: any(e.model == SMOL_ID and e.status == "loaded" for e in events),
                60,
                "the loaded event",
            )
        finally:
            stop.set()
            reader.join(5)
            client.close()
        assert not reader.is_alive()
        mine = [e for e in events if e.model == SMOL_ID]
        assert mine[0].status == "loading"
        assert any(e.progress is not None and e.stage == "text_model" for e in mine)

    @pytest.mark.real_router
    def test_real_router_broken_gguf_shows_failed_with_the_logs_reason(
        self, qtbot, real_router
    ) -> None:
        registry = _chrome_registry(real_router.url)
        picker = ModelPicker(registry, poll_ms=500)
        qtbot.addWidget(picker)
        picker.set_failure_log(real_router.server.load_failure)
        qtbot.waitUntil(lambda: "broken" in _combo_ids(picker.combo), timeout=10000)
        picker.choose("broken")
        qtbot.waitUntil(lambda: picker.status("broken") == "failed", timeout=30000)
        error = picker.error("broken")
        assert "exit code 1" in error
        assert "GGUF" in error or "failed to read" in error, error
        assert picker.combo.itemText(picker.combo.findData("broken")).startswith("⚠")
        assert "failed to load" in picker.status_label.toolTip()
        picker.shutdown()
        registry.close()

    def test_router_params_layer_model_preset_and_chat_and_check_ranges(self) -> None:
        from llamachat import params

        cfg = Config(
            model_params={"m": {"temperature": 0.6, "top_k": 20}},
            preset_params={"Coder": {"temperature": 0.2}},
        )
        body = turn.request_params(cfg, model="m", preset="Coder", chat={"seed": 7})
        assert body == {"temperature": 0.2, "top_k": 20, "seed": 7}
        assert turn.request_params(cfg, model="other") == {}
        effort = params.request_fields({"reasoning_effort": "high"})
        assert effort["chat_template_kwargs"] == {"reasoning_effort": "high"}
        assert params.request_fields({"reasoning_budget": 0}) == {"thinking_budget_tokens": 0}
        assert "from 0 to 1" in params.problem({"top_p": 1.5}, "model_params.m")
        assert "unknown parameter 'x.temp'" in params.problem({"temp": 1}, "x")
        assert "one of low, medium, high" in params.problem({"reasoning_effort": "max"}, "x")
        assert params.problem({"top_k": True}, "x") == "x.top_k must be an integer, got True"

    def test_router_params_bad_config_names_the_key(self, tmp_path: Path) -> None:
        path = _write_config(tmp_path, "[model_params.m]\ntop_p = 2\n")
        with pytest.raises(config.ConfigError, match=r"model_params\.m\.top_p must be from 0"):
            config.load(path)

    def test_router_chat_params_reach_the_next_request_and_stay_with_the_chat(
        self, chat_window, qtbot, router
    ) -> None:
        from llamachat.ui.views.params_panel import ChatParams

        window, history = chat_window(model_params={"test-model": {"temperature": 0.6}})
        panel = window.chat_params.panel
        assert isinstance(window.chat_params, ChatParams)
        assert "Default: 0.6 (config)" in panel.editors["temperature"].toolTip()
        _send(qtbot, window, "first")
        body = router.chat_requests()[-1].json
        assert body["temperature"] == 0.6 and "top_k" not in body
        panel.editors["temperature"].setValue(1.3)
        panel.editors["top_k"].setValue(12)
        panel.editors["reasoning_effort"].setCurrentIndex(2)
        assert window.chat_params.button.text() == "⚙ 3"
        _send(qtbot, window, "second")
        body = router.chat_requests()[-1].json
        assert (body["temperature"], body["top_k"], body["reasoning_effort"]) == (1.3, 12, "medium")
        assert body["chat_template_kwargs"] == {"reasoning_effort": "medium"}
        session = window.chat.session_id
        assert history.session_params(session) == {
            "temperature": 1.3,
            "top_k": 12,
            "reasoning_effort": "medium",
        }
        # Another chat starts from the defaults; reopening this one brings its values back.
        window.new_session()
        assert panel.values() == {} and window.chat_params.button.text() == "⚙"
        window.open_session(session)
        assert panel.values()["top_k"] == 12
        panel.reset_button.click()
        assert history.session_params(session) == {}
        assert not any(q.path == "/models/load" for q in router.requests)

    def test_router_session_params_survive_reopening_the_history(self, tmp_path: Path) -> None:
        path = tmp_path / "h.db"
        with History(path) as history:
            sid = history.create_session("chat", "m")
            assert history.session_params(sid) == {}
            history.set_session_params(sid, {"seed": 3})
            history.set_session_params(sid, {"seed": 4, "top_p": 0.5})
        with History(path) as history:
            assert history.session_params(sid) == {"seed": 4, "top_p": 0.5}
            history.delete_session(sid)
            history.purge_deleted([sid])
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT COUNT(*) FROM session_params").fetchone()[0] == 0
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        conn.close()

    @pytest.mark.real_router
    def test_real_router_param_change_reaches_request_without_reloading(self, real_router) -> None:
        question = [{"role": "user", "content": "Count to five."}]
        _chat(real_router.url, SMOL_ID, question, max_tokens=4)
        log_file = real_router.server.log_file
        spawns = log_file.tail(1 << 22).count(f"spawning server instance with name={SMOL_ID} ")
        cfg = Config(model_params={SMOL_ID: {"temperature": 0.0}})
        first = turn.request_params(cfg, model=SMOL_ID, chat={"max_tokens": 3})
        second = turn.request_params(cfg, model=SMOL_ID, chat={"max_tokens": 6, "seed": 5})
        _pieces, stats1 = _chat(real_router.url, SMOL_ID, question, **first)
        _pieces, stats2 = _chat(real_router.url, SMOL_ID, question, **second)
        assert stats1["usage"]["completion_tokens"] == 3
        assert stats2["usage"]["completion_tokens"] == 6
        assert _status(real_router.url, SMOL_ID) == "loaded"
        after = log_file.tail(1 << 22).count(f"spawning server instance with name={SMOL_ID} ")
        assert after == spawns

    def _get_model(self, qtbot, r):
        from llamachat.ui.models.download import GetModelDialog

        registry = _chrome_registry(r.url)
        picker = ModelPicker(registry, poll_ms=60000)
        qtbot.addWidget(picker)
        qtbot.waitUntil(lambda: picker.watching() and len(r._subscribers) == 1)
        dialog = GetModelDialog(registry, picker)
        qtbot.addWidget(dialog)
        return registry, picker, dialog

    def test_router_get_model_downloads_with_progress_into_the_picker(self, qtbot) -> None:
        from llamachat.dev.scripted_router import Download

        ref = "ggml-org/tiny-GGUF:Q4_K_M"
        plan = Download(size=4_000_000, steps=4, step_delay=0.15)
        with ScriptedRouter([Model("qwen", "loaded")], downloads={ref: plan}) as r:
            registry, picker, dialog = self._get_model(qtbot, r)
            dialog.reference.setText(f"  {ref} ")
            seen: list[int] = []
            dialog.progress.valueChanged.connect(seen.append)
            with qtbot.waitSignal(dialog.downloaded, timeout=10000) as done:
                dialog.download_button.click()
                assert dialog.downloading() and dialog.cancel_button.isVisibleTo(dialog)
            assert done.args == [ref]
            assert [v for v in seen if v > 0] == [25, 50, 75, 100]
            assert "is ready" in dialog.status.text() and not dialog.downloading()
            qtbot.waitUntil(lambda: ref in _combo_ids(picker.combo))
            assert [q.json for q in r.requests if q.path == "/models"] == [{"model": ref}]
            picker.shutdown()
            registry.close()

    def test_router_get_model_cancel_stops_the_download(self, qtbot) -> None:
        from llamachat.dev.scripted_router import Download

        ref = "ggml-org/big-GGUF"
        with ScriptedRouter(downloads={ref: Download(steps=50, step_delay=0.05)}) as r:
            registry, picker, dialog = self._get_model(qtbot, r)
            dialog.reference.setText(ref)
            dialog.start()
            qtbot.waitUntil(lambda: dialog.progress.value() > 0, timeout=5000)
            dialog.cancel_button.click()
            qtbot.waitUntil(lambda: not dialog.downloading(), timeout=5000)
            assert dialog.status.text() == f"The download of {ref} was cancelled."
            assert ref not in r.models and ref not in _combo_ids(picker.combo)
            assert [q.json for q in r.requests if q.path == "/models/unload"] == [{"model": ref}]
            picker.shutdown()
            registry.close()

    def test_router_get_model_faults_are_said_and_leave_no_model(self, qtbot) -> None:
        from llamachat.dev.scripted_router import Download

        broken = "someone/flaky-GGUF:Q8_0"
        plan = Download(steps=4, step_delay=0.02, fail_at=0.5, error="No space left on device")
        with ScriptedRouter(downloads={broken: plan}) as r:
            registry, picker, dialog = self._get_model(qtbot, r)
            dialog.reference.setText("not a reference")
            dialog.start()
            assert "is not a Hugging Face model reference" in dialog.status.text()
            assert not any(q.path == "/models" and q.method == "POST" for q in r.requests)
            dialog.reference.setText(broken)
            dialog.start()
            qtbot.waitUntil(lambda: not dialog.downloading(), timeout=5000)
            assert dialog.status.text() == (
                f"The download of {broken} failed: No space left on device"
            )
            # llama-server says "finished" for a repository that does not exist.
            dialog.reference.setText("nobody/nothing-GGUF")
            dialog.start()
            qtbot.waitUntil(lambda: not dialog.downloading(), timeout=5000)
            assert "finished without a model nobody/nothing-GGUF" in dialog.status.text()
            assert set(r.models) == {"test-model"}
            picker.shutdown()
            registry.close()

    def test_router_get_model_without_router_support_says_so(self, qtbot) -> None:
        from llamachat.ui.models.download import NO_EVENTS, GetModelDialog

        with ScriptedRouter(events=False) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: not picker._watch.supported)
            dialog = GetModelDialog(registry, picker)
            qtbot.addWidget(dialog)
            dialog.reference.setText("ggml-org/tiny-GGUF")
            dialog.start()
            assert dialog.status.text() == NO_EVENTS and not dialog.downloading()
            picker.shutdown()
            registry.close()

    def test_router_delete_model_asks_first_and_says_why_it_cannot(self, qtbot) -> None:
        from llamachat.ui.models.download import delete_model

        models = [Model("qwen", "loaded"), Model("cached", removable=True)]
        with ScriptedRouter(models) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: "cached" in _combo_ids(picker.combo))
            asked: list[str] = []
            said: list[str] = []

            def no(question: str) -> bool:
                asked.append(question)
                return False

            assert not delete_model(picker, picker, registry, "cached", ask=no, said=said.append)
            assert "Delete cached from the router's cache?" in asked[0]
            assert not any(q.method == "DELETE" for q in r.requests)
            delete_model(picker, picker, registry, "cached", ask=lambda q: True, said=said.append)
            qtbot.waitUntil(lambda: said == ["Deleted cached."])
            qtbot.waitUntil(lambda: "cached" not in _combo_ids(picker.combo))
            delete_model(picker, picker, registry, "qwen", ask=lambda q: True, said=said.append)
            qtbot.waitUntil(lambda: len(said) == 2)
            assert said[1] == (
                "Could not delete qwen: model name=qwen is not removable (not from cache)"
            )
            assert [q.query for q in r.requests if q.method == "DELETE"] == [
                {"model": "cached"},
                {"model": "qwen"},
            ]
            picker.shutdown()
            registry.close()

    def test_router_sleeping_event_shows_sleeping(self, qtbot) -> None:
        with ScriptedRouter([Model("qwen", "loaded")]) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 1 and len(r._subscribers) == 1)
            r.sleep("qwen")
            qtbot.waitUntil(lambda: picker.status("qwen") == "sleeping")
            assert picker.combo.itemText(0) == "◑ qwen"
            assert picker.unload_button.isVisibleTo(picker)
            picker.shutdown()
            registry.close()

    def test_router_idle_unload_for_routers_that_cannot_sleep(self, qtbot) -> None:
        with ScriptedRouter([Model("qwen", "loaded"), Model("smol")]) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2)
            picker.idle.set_seconds(0.4)
            picker.idle.note_activity()
            qtbot.waitUntil(lambda: r.status("qwen") == "unloaded", timeout=5000)
            assert [q.json for q in r.requests if q.path == "/models/unload"] == [{"model": "qwen"}]
            picker.idle.set_seconds(0)
            picker.shutdown()
            registry.close()

    def test_router_managed_server_sleeps_when_configured(self, tmp_path: Path) -> None:
        binary = find_binary(Config())
        if binary is None:
            _need("no llama-server binary: pip install 'llamachat[server]'")
        cfg = Config(models_dir=tmp_path / "models", sleep_idle_seconds=30)
        server = ManagedServer(cfg, lock_path=tmp_path / "lock", log_path=tmp_path / "log")
        cmd = server.command()
        assert cmd[cmd.index("--sleep-idle-seconds") + 1] == "30" and server.sleeps_when_idle()
        assert "--sleep-idle-seconds" not in ManagedServer(Config(models_dir=tmp_path)).command()
        fake, _marker = _fake_server(tmp_path / "fake")
        old = ManagedServer(
            Config(llama_server=str(fake), sleep_idle_seconds=30, models_dir=tmp_path),
            lock_path=tmp_path / "lock2",
        )
        # A llama-server whose --help does not list the option gets none (llamachat unloads).
        assert not old.sleeps_when_idle()

    @pytest.mark.real_router
    def test_real_router_idle_sleep_shows_sleeping(self, qtbot, tmp_path: Path) -> None:
        _binary, model = _real_assets()
        models = _models_folder(tmp_path, model)
        cfg = Config(models_dir=models, sleep_idle_seconds=1, server_args=("-t", "2", "-c", "512"))
        server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
        server.start()
        try:
            assert server.wait_ready(60), server.log_file.tail()
            registry = _chrome_registry(server.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.watching() and picker.combo.count() == 1, timeout=10000)
            _chat(server.url, SMOL_ID, [{"role": "user", "content": "Hi"}], max_tokens=2)
            qtbot.waitUntil(lambda: picker.status(SMOL_ID) == "sleeping", timeout=30000)
            assert picker.combo.itemText(0) == f"◑ {SMOL_ID}"
            picker.shutdown()
            registry.close()
        finally:
            server.stop()

    def test_router_finds_the_single_llama_binary_and_passes_host_and_port(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from llamachat.router.binary import binary_version

        folder = tmp_path / "bin"
        folder.mkdir()
        llama = folder / "llama"
        llama.write_text(
            "#!/bin/sh\n"
            'case "$2" in --help) echo "  --models-dir PATH";; --version) echo "version: 42 (abc)";;'
            " esac\n"
        )
        llama.chmod(0o755)
        monkeypatch.setenv("PATH", str(folder))
        assert find_binary(Config()) == llama
        assert binary_version(llama) == "version: 42 (abc)"
        server = ManagedServer(Config(models_dir=tmp_path / "m"), port=18123)
        assert server.command()[:6] == [
            str(llama),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "18123",
        ]
        # Another program called llama is not taken for llama.cpp's.
        llama.write_text("#!/bin/sh\necho 'a llama game'\n")
        other = folder / "sub"
        other.mkdir()
        (other / "llama").write_text(llama.read_text())
        (other / "llama").chmod(0o755)
        monkeypatch.setenv("PATH", str(other))
        assert find_binary(Config()) == wheel_binary()

    def test_router_about_names_both_versions(self, chat_window, qtbot) -> None:
        window, _history = chat_window()
        window.router_guide.show_about()
        qtbot.waitUntil(lambda: window.router_guide.about_box is not None, timeout=5000)
        text = window.router_guide.about_box.text()
        assert f"llamachat {llamachat.__version__}" in text
        assert "Server build: b0-scripted" in text
        window.router_guide.about_box.close()

    @pytest.mark.real_router
    def test_real_router_reports_its_version(self, qtbot, real_router) -> None:
        client = Client(real_router.url)
        try:
            built = Models(client).server_version()
        finally:
            client.close()
        assert re.fullmatch(r"b\d+-[0-9a-f]+", built), built
        version = real_router.server.version
        assert version.startswith("version: ") and built.split("-")[1] in version
        dialog = ServerLogDialog(real_router.server)
        qtbot.addWidget(dialog)
        assert version in dialog.path_label.text()

    def test_router_second_config_starts_its_own_server(self, tmp_path: Path) -> None:
        def _mkdir(folder: Path) -> Path:
            folder.mkdir()
            return folder

        from llamachat.router import lock as server_module
        from llamachat.router.lock import config_suffix, managed_key
        from llamachat.router.server import default_log_path

        if find_binary(Config()) is None:
            _need("no llama-server binary: pip install 'llamachat[server]'")
        assert config_suffix(None) == "" and config_suffix(config.default_path()) == ""
        configs = []
        for name in ("a", "b"):
            port = free_port()
            path = _write_config(
                _mkdir(tmp_path / name),
                f'router_url = "http://127.0.0.1:{port}"\nmodels_dir = "models"\n'
                'server_args = ["-t", "1"]\n',
            )
            configs.append(config.load(path))
        assert default_lock_path(configs[0].path) != default_lock_path(configs[1].path)
        assert default_log_path(configs[0].path) != default_log_path(configs[1].path)
        assert socket_name(configs[0].path) != socket_name(configs[1].path)
        started = []
        try:
            for cfg in configs:
                url, managed = ensure_router(cfg, ready_timeout=60)
                assert managed is not None, "the second config was answered by the first server"
                started.append(managed)
                assert url == cfg.router_url
            first, second = started
            assert first.pid != second.pid and first.url != second.url
            # A client that only has the URL finds the key in that config's lock.
            key = server_module._MANAGED_KEYS.pop(second.url)
            try:
                assert managed_key(second.url) == key
            finally:
                server_module._MANAGED_KEYS[second.url] = key
        finally:
            for managed in started:
                managed.stop()

    def test_router_preset_options_are_written_read_and_removed(self, tmp_path: Path) -> None:
        from llamachat.router.model_files import preset_options

        preset = tmp_path / "preset.ini"
        preset.write_text("[m]\nmodel = /m/m.gguf\nctx-size = 4096\n")
        set_preset_context(
            preset, "m", 8192, options={"n-gpu-layers": "99", "load-on-startup": "true"}
        )
        assert preset_options(preset, "m") == {
            "model": "/m/m.gguf",
            "ctx-size": "8192",
            "n-gpu-layers": "99",
            "load-on-startup": "true",
        }
        set_preset_context(preset, "m", 0, options={"n-gpu-layers": None})
        assert preset_options(preset, "m") == {"model": "/m/m.gguf", "load-on-startup": "true"}
        assert preset_options(tmp_path / "missing.ini", "m") == {}

    def test_router_managed_server_always_reads_a_preset(self, isolated_home: Path) -> None:
        if find_binary(Config()) is None:
            _need("no llama-server binary: pip install 'llamachat[server]'")
        server = ManagedServer(Config(models_dir=isolated_home / "models"))
        cmd = server.command()
        assert cmd[cmd.index("--models-preset") + 1] == str(server.preset_path.resolve())
        assert server.preset_path.is_relative_to(isolated_home)

    @pytest.mark.real_router
    def test_real_router_model_options_context_size_takes_effect(
        self, qtbot, tmp_path: Path
    ) -> None:
        from llamachat.ui.models.options import ModelOptionsDialog

        _binary, model = _real_assets()
        cfg = Config(models_dir=_models_folder(tmp_path, model), server_args=("-t", "2"))
        server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
        server.start()
        registry = None
        try:
            assert server.wait_ready(60), server.log_file.tail()
            assert server.preset_path.exists()
            registry = _chrome_registry(server.url)
            # Loaded once: the router lists the trained size only for a loaded model.
            _chat(server.url, SMOL_ID, [{"role": "user", "content": "Hi"}], max_tokens=2)
            dialog = ModelOptionsDialog(server, registry, SMOL_ID)
            qtbot.addWidget(dialog)
            qtbot.waitUntil(lambda: "asking" not in dialog.trained.text(), timeout=30000)
            # With what the router said: this failed once on CI, never here.
            assert "8,192" in dialog.trained.text(), (
                dialog.trained.text(),
                _status(server.url, SMOL_ID),
                server.log_file.tail(),
            )
            assert dialog.ctx_size.maximum() == 8192
            dialog.ctx_size.setValue(1024)
            dialog.gpu_layers.setText("lots")
            dialog.save()
            assert "GPU layers must be auto, all or a number" in dialog.status.text()
            dialog.gpu_layers.setText("0")
            with qtbot.waitSignal(dialog.saved, timeout=20000):
                dialog.save()
            assert _status(server.url, SMOL_ID) == "unloaded"  # reloaded at the next message
            _chat(server.url, SMOL_ID, [{"role": "user", "content": "Hi"}], max_tokens=2)
            client = Client(server.url)
            try:
                assert Models(client).context_size(SMOL_ID) == 1024
            finally:
                client.close()
        finally:
            if registry is not None:
                registry.close()
            server.stop()


class TestProviders:
    """`llamachat.router.providers`: external OpenAI-compatible services."""

    def test_providers_route_prefixed_ids_with_their_key_and_list_models(self, monkeypatch) -> None:
        from llamachat import config
        from llamachat.router import providers

        monkeypatch.setenv("TEST_PROVIDER_KEY", "prov-secret-1")
        monkeypatch.setenv("TEST_ROUTER_KEY", "router-secret-2")
        with (
            ScriptedRouter([Model("ggml-org/gemma:Q4", "loaded")], api_key="router-secret-2") as r,
            ScriptedRouter(
                [Model("gpt-x", "loaded"), Model("gpt-y", "loaded")],
                router=False,
                api_key="prov-secret-1",
            ) as p,
        ):
            cfg = config.Config(
                router_url=r.url,
                router_api_key_env="TEST_ROUTER_KEY",
                providers=(
                    config.ProviderConfig("cloud", p.url + "/v1", "TEST_PROVIDER_KEY"),
                    config.ProviderConfig("fixed", "http://127.0.0.1:9/v1", "", ("m1",)),
                ),
            )
            reg = providers.Registry(cfg)
            assert [(m.id, m.provider) for m in reg.models()] == [
                ("ggml-org/gemma:Q4", ""),
                ("cloud/gpt-x", "cloud"),
                ("cloud/gpt-y", "cloud"),
                ("fixed/m1", "fixed"),
            ]
            assert reg.errors == {}
            client, model = reg.client_for("cloud/gpt-x")
            assert model == "gpt-x"
            events = list(client.stream_chat(model, _user("yo")))
            assert events[0] == ("content", "echo: ")
            assert p.chat_requests()[0].headers["authorization"] == "Bearer prov-secret-1"
            assert p.chat_requests()[0].json["model"] == "gpt-x"
            client, model = reg.client_for("ggml-org/gemma:Q4")
            assert model == "ggml-org/gemma:Q4" and client is reg.router()
            list(client.stream_chat(model, _user()))
            assert r.chat_requests()[0].headers["authorization"] == "Bearer router-secret-2"
            assert reg.client_for("cloud/gpt-y")[0] is reg.client_for("cloud/gpt-x")[0]
            reg.close()

    def test_providers_failures_are_kept_per_source_without_leaking_keys(self, monkeypatch) -> None:

        from llamachat import config
        from llamachat.router import providers

        monkeypatch.setenv("BAD_KEY", "wrong-secret-3")
        monkeypatch.delenv("MISSING_KEY", raising=False)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        with ScriptedRouter([Model("m", "loaded")], router=False, api_key="right") as p:
            cfg = config.Config(
                router_url=dead,
                providers=(
                    config.ProviderConfig("bad", p.url, "BAD_KEY"),
                    config.ProviderConfig("nokey", p.url, "MISSING_KEY"),
                    config.ProviderConfig("good", p.url + "/v1", "", ("m",)),
                ),
            )
            reg = providers.Registry(cfg)
            assert [m.id for m in reg.models()] == ["good/m"]
            assert isinstance(reg.errors["router"], backend.RouterUnreachable)
            assert reg.errors["bad"].status == 401
            assert "MISSING_KEY" in str(reg.errors["nokey"])
            assert all("wrong-secret-3" not in str(e) for e in reg.errors.values())
            reg.close()


class TestSecrets:
    """API keys and other secrets: masked wherever text is shown, logged or saved (`router.keys`)."""

    def test_fault_api_keys_never_reach_the_database_the_logs_or_any_message(
        self, chat_window, qtbot, tmp_path: Path, monkeypatch, caplog
    ) -> None:
        """Router and provider keys from the environment: a chat with failures, a server that
        echoes the key in its error, an unreachable router; the keys appear nowhere."""

        router_key = "sk-router-" + "R7x9kQ" * 6
        provider_key = "sk-remote-" + "P3q5mZ" * 6
        monkeypatch.setenv("LLAMACHAT_FAULT_ROUTER_KEY", router_key)
        monkeypatch.setenv("LLAMACHAT_FAULT_REMOTE_KEY", provider_key)
        caplog.set_level(logging.DEBUG)
        shown: list[str] = []
        with (
            ScriptedRouter(api_key=router_key) as keyed,
            ScriptedRouter(api_key=provider_key) as remote,
        ):
            window, history = chat_window(
                url=keyed.url,
                router_api_key_env="LLAMACHAT_FAULT_ROUTER_KEY",
                providers=(
                    ProviderConfig(
                        "remote", remote.url, "LLAMACHAT_FAULT_REMOTE_KEY", ("test-model",)
                    ),
                ),
            )
            window.statusBar().messageChanged.connect(shown.append)
            keyed.script(
                Reply(content="Fine."),
                Reply(status=500, error={"message": "failed to allocate KV cache"}),
                Reply(content=["part "], error_after=1),
            )
            _send(qtbot, window, "one")
            _send(qtbot, window, "two")
            _send(qtbot, window, "three")
            assert [m["status"] for m in history.messages(window.session_id)][1::2] == [
                "complete",
                "error",
                "error",
            ]
            window.set_model("remote/test-model")
            remote.script(
                Reply(content="Remote fine."),
                # Some gateways quote the key they were given in their error.
                Reply(
                    status=401,
                    error={
                        "message": f"Incorrect API key provided: {provider_key}",
                        "type": "invalid_request_error",
                    },
                ),
                Reply(
                    content=["half "],
                    error_after=1,
                    error={"message": f"upstream rejected key {provider_key}"},
                ),
            )
            _send(qtbot, window, "four")
            _send(qtbot, window, "five")
            _send(qtbot, window, "six")
            assert keyed.chat_requests()[0].headers["authorization"] == f"Bearer {router_key}"
            assert remote.chat_requests()[0].headers["authorization"] == f"Bearer {provider_key}"
            window.set_model("test-model")
            window.app.use_router("http://127.0.0.1:9")
            _send(qtbot, window, "seven")

            rows = history.messages(window.session_id)
            assert [m["status"] for m in rows][1::2] == [
                "complete",
                "error",
                "error",
                "complete",
                "error",
                "error",
                "error",
            ]
            errors = [m["error"] for m in rows if m["error"]]
            widgets = [w.text() for w in window.findChildren(QLabel)]
            widgets += [w.toPlainText() for w in window.findChildren(QTextBrowser)]
            window.close()
        history.close()
        files = b"".join(
            p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("history.db")
        )
        for key in (router_key, provider_key):
            assert key.encode() not in files
            assert key not in caplog.text
            for text in [*errors, *shown, *widgets]:
                assert key not in text, text
        assert any("Incorrect API key provided" in e for e in errors)

    @pytest.mark.parametrize(
        ("value", "sent"),
        [
            pytest.param("sk-win-" + "W4k8pT" * 5 + "\r", True, id="trailing-cr"),
            pytest.param("\n sk-win-" + "W4k8pT" * 5 + "\r\n", True, id="surrounding-whitespace"),
            pytest.param(
                "sk-win-" + "W4k8pT" * 3 + "\x01" + "W4k8pT" * 2, False, id="inner-control"
            ),
            pytest.param("sk-win-" + "W4k8pT" * 3 + "é" + "W4k8pT" * 2, False, id="non-ascii"),
        ],
    )
    def test_fault_api_key_with_whitespace_or_control_characters_never_leaks(
        self, chat_window, qtbot, tmp_path: Path, monkeypatch, caplog, value: str, sent: bool
    ) -> None:
        """A key read with a Windows line ending is stripped and works; a key no header can
        carry fails the reply with a message naming its variable; the key shows nowhere."""

        key = value.strip()
        monkeypatch.setenv("LLAMACHAT_FAULT_WIN_KEY", value)
        caplog.set_level(logging.DEBUG)
        with ScriptedRouter(api_key=key) as keyed:
            keyed.script(Reply(content="Keyed answer."))
            window, history = chat_window(
                url=keyed.url, router_api_key_env="LLAMACHAT_FAULT_WIN_KEY", listed=sent
            )
            _send(qtbot, window, "hello")
            row = _fault_row(history, window)
            if sent:
                assert (row["content"], row["status"]) == ("Keyed answer.", "complete")
                assert keyed.chat_requests()[0].headers["authorization"] == f"Bearer {key}"
            else:
                assert row["status"] == "error"
                assert "LLAMACHAT_FAULT_WIN_KEY" in row["error"]
                assert keyed.chat_requests() == []
            widgets = [w.text() for w in window.findChildren(QLabel)]
            widgets += [w.toPlainText() for w in window.findChildren(QTextBrowser)]
            window.close()
        history.close()
        files = b"".join(
            p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("history.db")
        )
        for piece in (key[:12], key[-12:]):
            assert piece.encode() not in files
            assert piece not in caplog.text
            for text in [row["error"], *widgets]:
                assert piece not in text, text

    def test_fault_api_key_pieces_in_any_quoting_are_masked_in_server_errors(self) -> None:
        """A server that quotes part of the key, JSON-escaped or cut short: no 8-character piece
        of the key survives in the error the user reads."""

        key = 'sk-q/uo"te-' + "Z9m2Lx" * 5
        with ScriptedRouter(api_key=key) as keyed:
            keyed.script(
                Reply(
                    status=401,
                    body=f'{{"error": {{"message": "bad key {key[:14]}... '
                    f'(full: {json.dumps(key)[1:-1]})"}}}}',
                ),
            )
            client = backend.Client(keyed.url, api_key=key, api_key_env="K")
            try:
                with pytest.raises(backend.ServerError) as caught:
                    list(client.stream_chat("test-model", [{"role": "user", "content": "hi"}]))
            finally:
                client.close()
        message = caught.value.message
        assert "bad key ***" in message
        for start in range(len(key) - 7):
            assert key[start : start + 8] not in message, message


class TestServer:
    """`llamachat.router.server`: the real llama-server, managed and supervised."""

    @pytest.mark.real_router
    def test_real_router_lists_models_with_status(self, real_router) -> None:

        client = Client(real_router.url)
        try:
            models = Models(client)
            listed = {m.id: m for m in models.list()}
            assert models.is_router()
        finally:
            client.close()
        assert {SMOL_ID, "broken"} <= set(listed)
        assert listed[SMOL_ID].status in {"loaded", "loading", "unloaded"}
        assert "text" in listed[SMOL_ID].modalities

    @pytest.mark.real_router
    def test_real_router_loads_model_on_demand_when_chatting(self, real_router) -> None:

        client = Client(real_router.url)
        try:
            if _status(real_router.url, SMOL_ID) != "unloaded":
                Models(client).unload(SMOL_ID)
            _wait_for(lambda: _status(real_router.url, SMOL_ID) == "unloaded", 30, "the unload")
        finally:
            client.close()

        pieces, _stats = _chat(
            real_router.url, SMOL_ID, [{"role": "user", "content": "Say hello."}], max_tokens=8
        )

        assert "".join(pieces).strip()
        assert _status(real_router.url, SMOL_ID) == "loaded"

    @pytest.mark.real_router
    def test_real_router_streams_reply_with_timings(self, real_router) -> None:
        pieces, stats = _chat(
            real_router.url,
            SMOL_ID,
            [{"role": "user", "content": "Count from one to ten in words."}],
            max_tokens=32,
            temperature=0,
        )

        assert len(pieces) > 1, "the reply arrived in one piece, not streamed"
        timings = stats["timings"]
        assert timings["predicted_n"] > 1
        assert timings["prompt_n"] + timings.get("cache_n", 0) > 0
        assert timings["predicted_per_second"] > 0
        assert stats["usage"]["completion_tokens"] == timings["predicted_n"]

    @pytest.mark.real_router
    def test_real_router_second_turn_reuses_prompt_cache(self, real_router) -> None:
        first = [
            {"role": "system", "content": "You are a terse assistant. Answer in one short line."},
            {"role": "user", "content": "Name three primary colours of light."},
        ]
        pieces, stats1 = _chat(real_router.url, SMOL_ID, first, max_tokens=24, temperature=0)
        second = [
            *first,
            {"role": "assistant", "content": "".join(pieces)},
            {"role": "user", "content": "Now name three farm animals."},
        ]
        _pieces, stats2 = _chat(real_router.url, SMOL_ID, second, max_tokens=24, temperature=0)

        t1, t2 = stats1["timings"], stats2["timings"]
        first_prompt = t1["prompt_n"] + t1["cache_n"]
        second_prompt = t2["prompt_n"] + t2["cache_n"]
        added = second_prompt - first_prompt
        print(
            f"\nprompt cache: turn 1 prompt {first_prompt} tokens (cache_n {t1['cache_n']}); "
            f"turn 2 prompt {second_prompt} tokens = cache_n {t2['cache_n']} + prompt_n "
            f"{t2['prompt_n']}; tokens added by turn 2: {added}"
        )
        assert t2["cache_n"] >= first_prompt, "turn 2 re-evaluated the first turn's prompt"
        assert t2["prompt_n"] <= added

    @pytest.mark.real_router
    def test_real_router_cancel_stops_generation_mid_stream(self, real_router) -> None:

        cancel = threading.Event()
        client = Client(real_router.url)
        received = 0
        try:
            stream = client.stream_chat(
                SMOL_ID,
                [{"role": "user", "content": "Write a very long story about a dragon."}],
                cancel=cancel,
                params={"max_tokens": 1500, "ignore_eos": True},
            )
            for kind, _value in stream:
                if kind == "content":
                    received += 1
                    if received == 3:
                        cancel.set()
        finally:
            client.close()

        assert received < 50, f"{received} pieces arrived after cancelling"

        def idle_slots():
            # The managed server wants its key everywhere but /health.
            key = real_router.server.api_key
            slots = httpx.get(
                f"{real_router.url}/slots",
                params={"model": SMOL_ID},
                headers={"Authorization": f"Bearer {key}"},
            ).json()
            return None if any(s["is_processing"] for s in slots) else slots

        slots = _wait_for(idle_slots, 30, "the server to stop generating")
        last = max((s for s in slots if "id_task" in s), key=lambda s: s["id_task"])
        # The slot holds the prompt and what was generated before the cancel, far from 1500 tokens.
        assert last["n_prompt_tokens"] < 300

    @pytest.mark.real_router
    def test_real_router_unloads_model(self, real_router) -> None:

        client = Client(real_router.url)
        try:
            models = Models(client)
            if _status(real_router.url, SMOL_ID) == "unloaded":
                models.load(SMOL_ID)
            _wait_for(lambda: _status(real_router.url, SMOL_ID) == "loaded", 30, "the load")
            models.unload(SMOL_ID)
            _wait_for(lambda: _status(real_router.url, SMOL_ID) == "unloaded", 30, "the unload")
        finally:
            client.close()

    @pytest.mark.real_router
    def test_real_router_failed_load_gives_server_message(self, real_router) -> None:

        with pytest.raises(ServerError) as raised:
            _chat(real_router.url, "broken", [{"role": "user", "content": "hi"}], max_tokens=4)

        assert "failed to load" in raised.value.message
        assert raised.value.status == 500
        assert _status(real_router.url, "broken") == "failed"

    @pytest.mark.real_router
    def test_real_router_picks_up_added_gguf_after_reload(
        self, real_router, tmp_path: Path
    ) -> None:

        _binary, model = _real_assets()
        offered = tmp_path / "Added-Smol.gguf"
        offered.symlink_to(model)

        placed = add_model_file(offered, real_router.models_dir)
        try:
            reload_models(real_router.url)
            assert _status(real_router.url, "Added-Smol") == "unloaded"
        finally:
            placed.unlink()
            reload_models(real_router.url)
        assert placed.parent == real_router.models_dir

    @pytest.mark.real_router
    def test_server_supervisor_restarts_killed_server_and_stops_without_orphans(
        self,
        tmp_path: Path,
    ) -> None:
        import signal

        _binary, model = _real_assets()
        models = tmp_path / "models"
        models.mkdir()
        preset = tmp_path / "preset.ini"
        preset.write_text(f"[tiny]\nmodel = {model}\nctx-size = 512\n")
        cfg = Config(models_dir=models, models_preset=preset, server_args=("-t", "1"))
        events: list[str] = []
        server = ManagedServer(cfg, on_event=lambda kind, _message: events.append(kind))
        server.start()
        try:
            assert server.wait_ready(60), server.log_file.tail()
            # "tiny" exists only in the preset: chatting with it proves --models-preset was passed.
            assert "".join(
                _chat(server.url, "tiny", [{"role": "user", "content": "Hi"}], max_tokens=4)[0]
            )
            first = server.pid
            members = _live_group_members(first)
            assert len(members) >= 2, "the router and its model server share one process group"

            os.kill(first, signal.SIGKILL)
            _wait_for(
                lambda: server.is_running() and server.pid not in (None, first),
                30,
                "the supervisor to restart the server",
            )

            assert events.count("ready") == 2
            assert {"exited", "restarting"} <= set(events)
            assert server.restarts == 1
            assert "".join(
                _chat(server.url, "tiny", [{"role": "user", "content": "Hi"}], max_tokens=4)[0]
            )
            second = server.pid
        finally:
            server.stop()

        assert events[-1] == "stopped"
        assert not server.is_running()
        assert _refuses_connections(server.port)
        assert _live_group_members(first) == [] and _live_group_members(second) == []
        assert "llama-server" in server.log_path.read_text()

    @pytest.mark.real_router
    def test_server_child_dies_when_llamachat_is_killed(self, tmp_path: Path) -> None:
        import signal

        _binary, model = _real_assets()
        models = _models_folder(tmp_path, model)
        script = (
            "import sys, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import Config\n"
            "from llamachat.router.server import ManagedServer\n"
            "server = ManagedServer(Config(models_dir=Path(sys.argv[1])))\n"
            "server.start()\n"
            "assert server.wait_ready(60)\n"
            "print(server.pid, server.port, flush=True)\n"
            "time.sleep(120)\n"
        )
        app = subprocess.Popen(
            [sys.executable, "-c", script, str(models)], stdout=subprocess.PIPE, text=True
        )
        try:
            pid, port = (int(field) for field in app.stdout.readline().split())
            assert _live_group_members(pid)
            app.send_signal(signal.SIGKILL)
            app.wait()
            _wait_for(
                lambda: not _live_group_members(pid), 30, "llama-server to die with llamachat"
            )
        finally:
            app.kill()
            app.wait()
            app.stdout.close()
        assert _refuses_connections(port)

    def test_server_ensure_router_leaves_running_router_alone(self, router, tmp_path: Path) -> None:

        fake, marker = _fake_server(tmp_path / "bin")
        cfg = Config(router_url=router.url, llama_server=str(fake), models_dir=tmp_path / "models")

        url, server = ensure_router(cfg)

        assert (url, server) == (router.url, None)
        assert not marker.exists(), "a server was started next to a running router"
        assert {(r.method, r.path) for r in router.requests} == {("GET", "/health")}
        assert not default_lock_path().exists()

    @pytest.mark.real_router
    def test_server_ensure_router_starts_server_on_configured_port(self, tmp_path: Path) -> None:

        _binary, model = _real_assets()
        port = free_port()
        cfg = Config(
            router_url=f"http://127.0.0.1:{port}", models_dir=_models_folder(tmp_path, model)
        )
        kinds: list[str] = []

        url, server = ensure_router(cfg, on_event=lambda kind, _message: kinds.append(kind))
        try:
            assert url == f"http://127.0.0.1:{port}"
            assert server is not None and server.is_running()
            assert httpx.get(f"{url}/health").status_code == 200
            assert kinds[:2] == ["starting", "ready"]
        finally:
            if server is not None:
                server.stop()
        assert _refuses_connections(port)

    @pytest.mark.real_router
    def test_server_ensure_router_moves_to_free_port_when_port_is_taken(
        self, tmp_path: Path
    ) -> None:

        _binary, model = _real_assets()
        squatter = socket.create_server(("127.0.0.1", 0))
        taken = squatter.getsockname()[1]

        def hang_up() -> None:
            # Accepts and closes at once: the port is in use, but by nothing that speaks HTTP.
            while True:
                try:
                    conn, _addr = squatter.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        cfg = Config(
            router_url=f"http://127.0.0.1:{taken}", models_dir=_models_folder(tmp_path, model)
        )
        kinds: list[str] = []
        try:
            url, server = ensure_router(cfg, on_event=lambda kind, _message: kinds.append(kind))
            try:
                assert server is not None and server.port != taken
                assert url == server.url and server.is_running()
                assert kinds[0] == "port_taken"
            finally:
                if server is not None:
                    server.stop()
        finally:
            squatter.close()

    @pytest.mark.real_router
    def test_server_lock_lets_only_one_llamachat_start_a_server(self, tmp_path: Path) -> None:

        _binary, model = _real_assets()
        models = _models_folder(tmp_path, model)
        first = ManagedServer(Config(models_dir=models))
        first.start()
        try:
            assert first.wait_ready(60), first.log_file.tail()
            fake, marker = _fake_server(tmp_path / "bin")
            # A second llamachat process whose router_url does not answer would start a server;
            # the lock makes it use the first one's instead.
            script = (
                "import sys\n"
                "from pathlib import Path\n"
                "from llamachat.config import Config\n"
                "from llamachat.router.server import ensure_router\n"
                "cfg = Config(router_url=sys.argv[1], llama_server=sys.argv[2],"
                " models_dir=Path(sys.argv[3]))\n"
                "url, server = ensure_router(cfg)\n"
                "print(url, server)\n"
            )
            other = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    script,
                    f"http://127.0.0.1:{free_port()}",
                    str(fake),
                    str(models),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            assert other.stdout.split() == [first.url, "None"]
            assert not marker.exists()

            with pytest.raises(ServerLocked) as locked:
                ManagedServer(Config(models_dir=models, llama_server=str(fake))).start()
            assert locked.value.url == first.url
            assert not marker.exists()
        finally:
            first.stop()

        # Stopping releases the lock: the next llamachat may start its own server.
        after = ManagedServer(Config(models_dir=models))
        after.start()
        after.stop()

    def test_server_find_binary_prefers_config_then_path_then_wheel(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:

        configured, _ = _fake_server(tmp_path / "configured")
        on_path, _ = _fake_server(tmp_path / "on_path")
        monkeypatch.setenv("PATH", str(on_path.parent))

        assert find_binary(Config(llama_server=str(configured))) == configured
        assert find_binary(Config()) == on_path

        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        assert find_binary(Config()) == wheel_binary()
        assert find_binary(Config(llama_server=str(tmp_path / "missing"))) is None

    def test_server_bundled_binary_runs_with_its_folder_on_the_library_path(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:

        monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/elsewhere")
        bundled, _ = _fake_server(tmp_path / "bundle")
        (bundled.parent / "libggml-base.so.0").write_bytes(b"")
        system, _ = _fake_server(tmp_path / "system")

        assert launch_environment(bundled)["LD_LIBRARY_PATH"] == f"{bundled.parent}:/opt/elsewhere"
        assert launch_environment(system)["LD_LIBRARY_PATH"] == "/opt/elsewhere"

    def test_server_missing_binary_says_how_to_get_one(self, tmp_path: Path) -> None:

        missing = tmp_path / "no-such-llama-server"
        cfg = Config(
            router_url=f"http://127.0.0.1:{free_port()}",
            llama_server=str(missing),
            models_dir=tmp_path / "models",
        )

        with pytest.raises(ServerNotFound) as raised:
            ensure_router(cfg)

        assert "pip install 'llamachat[server]'" in raised.value.message
        assert str(missing) in raised.value.message

    def test_server_ensure_router_does_not_start_server_when_manage_server_off(
        self,
        tmp_path: Path,
    ) -> None:

        fake, marker = _fake_server(tmp_path / "bin")
        url = f"http://127.0.0.1:{free_port()}"
        cfg = Config(
            router_url=url,
            manage_server=False,
            llama_server=str(fake),
            models_dir=tmp_path / "models",
        )

        with pytest.raises(RouterUnavailable) as raised:
            ensure_router(cfg)

        assert url in raised.value.message
        assert "manage_server" in raised.value.message
        assert not marker.exists()

    def test_server_log_rotates_at_size_cap_and_keeps_a_few_old_logs(self, tmp_path: Path) -> None:

        logs = tmp_path / "logs"
        log_file = RotatingLog(logs / "llama-server.log", max_bytes=100, backups=2)
        for n in range(10):
            log_file.write(f"line {n:02d} ".encode() + b"x" * 30 + b"\n")
        log_file.close()

        files = sorted(p.name for p in logs.iterdir())
        assert files == ["llama-server.log", "llama-server.log.1", "llama-server.log.2"]
        assert all((logs / name).stat().st_size <= 100 for name in files)
        assert log_file.tail().splitlines()[-1].startswith("line 09")
        assert (logs / "llama-server.log.1").read_text().startswith("line 06")

        log_file.rotate()
        assert not log_file.path.exists()
        assert log_file.backup_paths()[0].read_text().splitlines()[-1].startswith("line 09")

    def test_server_add_model_file_links_or_copies_a_gguf(self, tmp_path: Path) -> None:

        source = tmp_path / "src"
        source.mkdir()
        gguf = source / "Tiny.gguf"
        gguf.write_bytes(b"GGUF" + b"\x00" * 64)
        models = tmp_path / "models"

        linked = add_model_file(gguf, models)
        assert linked == models / "Tiny.gguf" and linked.is_symlink()
        assert linked.resolve() == gguf.resolve()
        assert add_model_file(gguf, models) == linked

        copied = add_model_file(gguf, tmp_path / "copies", link=False)
        assert not copied.is_symlink() and copied.read_bytes() == gguf.read_bytes()

        other = tmp_path / "other" / "Tiny.gguf"
        other.parent.mkdir()
        other.write_bytes(b"GGUF" + b"\x01" * 64)
        with pytest.raises(ModelFileError, match="already has"):
            add_model_file(other, models)

        text = source / "notes.gguf"
        text.write_text("not a model")
        with pytest.raises(ModelFileError, match="not a GGUF"):
            add_model_file(text, models)

    def test_server_add_model_file_brings_every_part_of_a_split_model(self, tmp_path: Path) -> None:

        parts = [tmp_path / f"Big-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
        for part in parts:
            part.write_bytes(b"GGUF" + part.name.encode())
        models = tmp_path / "models"

        placed = add_model_file(parts[0], models)

        assert placed == models / parts[0].name
        assert sorted(p.name for p in models.iterdir()) == [p.name for p in parts]

    def test_fault_a_hung_managed_server_is_restarted_like_a_dead_one(self, tmp_path: Path) -> None:
        """The managed server gets SIGSTOP: its /health checks go unanswered, the supervisor
        says it hung, and a new server takes its place as after a crash."""
        import signal

        fake = _fault_health_server(tmp_path / "bin")
        cfg = Config(llama_server=str(fake), models_dir=tmp_path / "models")
        kinds: list[str] = []
        server = ManagedServer(
            cfg,
            log_path=tmp_path / "server.log",
            lock_path=tmp_path / "server.lock",
            on_event=lambda kind, _message: kinds.append(kind),
        )
        server.health_interval, server.health_misses = 0.2, 2
        server.start()
        try:
            assert server.wait_ready(30)
            first = server.pid
            assert first is not None
            os.kill(first, signal.SIGSTOP)
            deadline = time.monotonic() + 30
            while not (server.is_running() and server.pid not in (None, first)):
                assert time.monotonic() < deadline, kinds
                time.sleep(0.05)
            assert "hung" in kinds and kinds[-1] == "ready"
            assert kinds.index("hung") < kinds.index("restarting")
        finally:
            server.stop()
        assert server.pid is None

    @pytest.mark.real_router
    def test_fault_managed_server_wants_its_random_key_everywhere_but_health(
        self, real_router
    ) -> None:
        """The llama-server llamachat starts refuses other local programs and web pages: every
        endpoint but /health wants a random key, which llamachat's clients (in this process, or
        a second llamachat reading the 0600 lock file) send, and which no command line or log
        shows."""

        server, url = real_router.server, real_router.url
        key = server.api_key
        assert len(key) >= 32 and server.host == "127.0.0.1"
        assert httpx.get(f"{url}/health").status_code == 200
        chat = {"model": SMOL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        assert httpx.post(f"{url}/v1/chat/completions", json=chat).status_code == 401
        assert httpx.get(f"{url}/props").status_code == 401
        wrong = {"Authorization": "Bearer not-the-key"}
        assert httpx.get(f"{url}/props", headers=wrong).status_code == 401

        client = Client(url)  # no key configured: the managed server's is found
        try:
            assert isinstance(client.request_json("GET", "/props", root=True), dict)
        finally:
            client.close()
        code = (
            "import sys; from pathlib import Path\n"
            "from llamachat.router.client import Client\n"
            "from llamachat.router.lock import managed_key\n"
            "key = managed_key(sys.argv[1], lock_path=Path(sys.argv[2]))\n"
            "c = Client(sys.argv[1], api_key=key)\n"
            "print(isinstance(c.request_json('GET', '/props', root=True), dict))\n"
        )
        second = subprocess.run(
            [sys.executable, "-c", code, url, str(server.lock_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.stdout.strip() == "True", second.stderr

        # A client made before the server's lock exists (the window lists models while the
        # server starts) sends the key once the lock appears: the key is looked up per request.
        early = (
            "import shutil, sys; from pathlib import Path\n"
            "from llamachat.router.client import BackendError, Client\n"
            "from llamachat.router.lock import default_lock_path\n"
            "c = Client(sys.argv[1])\n"
            "try:\n"
            "    c.request_json('GET', '/props', root=True); print('no key needed?')\n"
            "except BackendError as exc:\n"
            "    print(exc.status)\n"
            "shutil.copy(sys.argv[2], default_lock_path())\n"
            "print(isinstance(c.request_json('GET', '/props', root=True), dict))\n"
        )
        runtime = Path(str(server.lock_path) + ".runtime")
        runtime.mkdir(mode=0o700)
        late = subprocess.run(
            [sys.executable, "-c", early, url, str(server.lock_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        )
        assert late.stdout.split() == ["401", "True"], late.stdout + late.stderr

        assert stat.S_IMODE(server.lock_path.stat().st_mode) == 0o600
        assert key not in " ".join(server.command())
        assert key.encode() not in Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert key not in server.log_path.read_text(encoding="utf-8", errors="replace")

    @offscreen_dialogs
    def test_chrome_window_server_log_and_events_of_a_managed_server(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """A managed server's log tail opens from File > Server log…; its events, sent from
        another thread, reach the status bar."""

        window, _history = chat_window()
        assert not window.router_guide.server_log_action.isVisible()
        server = ManagedServer(
            Config(), port=1, log_path=tmp_path / "server.log", lock_path=tmp_path / "server.lock"
        )
        server.log_file.write(b"main: loading model\nmain: server is listening on 127.0.0.1\n")
        try:
            window.app.use_router(window.cfg.router_url, server=server)
            assert window.router_guide.server_log_action.isVisible()
            window.router_guide.server_log_action.trigger()
            [dialog] = [w for w in window.findChildren(ServerLogDialog) if w.isVisible()]
            assert "server is listening" in dialog.text.toPlainText()
            server.log_file.write(b"slot 0: prompt done\n")
            dialog.refresh()
            assert dialog.text.toPlainText().endswith("slot 0: prompt done\n")
            dialog.close()
            sender = threading.Thread(
                target=window.app.post_server_event,
                args=("restarted", "restarted after it stopped"),
            )
            sender.start()
            sender.join()
            qtbot.waitUntil(
                lambda: "restarted after it stopped" in window.statusBar().currentMessage()
            )
        finally:
            server.log_file.close()


class TestMessages:
    """`llamachat.ui.views.messages` and `views.markdown`: the streamed, rendered conversation."""

    def test_markdown_fence_with_blank_lines_inside_stays_one_block(self) -> None:
        text = "Intro line.\n\n```python\na = 1\n\n\nb = 2\n```\n\nAfter the code.\n"
        md, updates = _stream_markdown(text)
        finished = [u.finished for u in updates if u.finished]
        # Intro, the whole fence, the closing paragraph: the blank lines in the fence split nothing.
        assert len(finished) == 3
        assert finished[1].count("Copy code") == 1
        assert "a" in finished[1] and "b" in finished[1]
        assert md.code(0) == "a = 1\n\n\nb = 2\n"
        assert md.code_count() == 1

    def test_markdown_finished_blocks_are_rendered_exactly_once(self) -> None:
        blocks = ["First paragraph, *emphasis*.", "- one\n- two\n- three", "## A heading", "Last."]
        text = "\n\n".join(blocks) + "\n"
        md, updates = _stream_markdown(text)
        finished = [u.finished for u in updates if u.finished]
        for marker in ("First paragraph", "<li>two</li>", "A heading", "Last."):
            assert sum(marker in html for html in finished) == 1, marker
        # Every character went through a finished render once, never twice.
        assert md.stats.finished_chars == len(text)
        assert md.stats.finished_renders == len(finished) <= len(blocks)
        # The tail never held more than one block's worth of text.
        longest = max(len(b) for b in blocks) + 2
        assert md.stats.tail_chars <= md.stats.tail_renders * longest
        assert md.text() == text

    def test_markdown_model_html_is_shown_as_text_not_interpreted(self) -> None:

        out = render_markdown('Say <b>x</b> <script>alert(1)</script> ![pic](/etc/passwd "t")\n')
        assert "&lt;b&gt;x&lt;/b&gt;" in out
        assert "<b>" not in out and "<script" not in out
        # Images are never loaded: they become a plain link.
        assert "<img" not in out and 'href="/etc/passwd"' in out

    @pytest.mark.parametrize(
        "text",
        [
            "a" * 30_000,
            "&" * 3_000,
            "**a**" * 2_000,
            "x`" * 3_000,
            "```\n" + "b" * 3_000 + "\n```\n",
        ],
    )
    def test_markdown_long_unbroken_text_gets_a_break_every_max_run_characters(
        self, text: str
    ) -> None:
        """Qt lays out a run with no break opportunity in quadratic time: runs are broken."""

        out = render_markdown(text)
        shown = _shown_text(out)
        assert _longest_unbroken_run(shown) <= MAX_RUN
        assert _longest_unbroken_run(shown.replace(BREAK, "")) > MAX_RUN  # the breaks did it
        assert "<" not in _shown_text(out.replace(BREAK, "")).replace("&lt;", "")  # tags whole

        pieces, run, shown = [text[i : i + 7] for i in range(0, len(text), 7)], 0, ""
        for piece in pieces:  # streamed plain text, as the reasoning panel gets it
            piece, run = break_text_runs(piece, run)
            shown += piece
        assert shown.replace(BREAK, "") == text and _longest_unbroken_run(shown) <= MAX_RUN

    def test_markdown_prose_and_short_words_get_no_breaks(self) -> None:

        text = "Words, [a link](https://example.com/a/b?c=d) and `code` " * 200
        assert BREAK not in render_markdown(text)

    def test_markdown_code_block_is_highlighted_only_once_closed(self) -> None:

        md = StreamingMarkdown()
        md.append("```python\ndef f():\n    return 1\n")
        open_update = md.flush()
        code_part = open_update.tail.split("<pre")[1]
        assert "def f" in code_part and "<font" not in code_part
        md.append("```\n")
        closed = md.flush()
        assert "<font color=" in closed.finished.split("<pre")[1] and closed.tail == ""

    def test_markdown_copy_links_return_each_blocks_raw_code(self) -> None:

        md = StreamingMarkdown()
        first = 'if a < b and c > "d":\n    x = a & b\n'
        second = "<html>&amp;</html>\n"
        for piece in ("```python\n", first, "```\n\ntext\n\n~~~html\n", second, "~~~\n"):
            md.append(piece)
            md.flush()
        md.finish()
        assert md.code(0) == first and md.code(1) == second
        assert md.code(2) == "" and md.code_count() == 2

    def test_markdown_copy_link_numbers_follow_the_blocks(self) -> None:

        out = render_markdown("```\na\n```\n\n```\nb\n```\n")
        assert out.index('href="copy:0"') < out.index('href="copy:1"')

    def test_conversation_streams_20000_tokens_without_crash(
        self, conversation_view, qtbot
    ) -> None:
        # PySide6 6.12.0 under Python < 3.12 aborted after a few thousand streamed tokens.

        tokens = sample_tokens(20_000)
        reply = conversation_view.append_message(
            {"id": 1, "role": "assistant", "status": "streaming"}
        )
        for start in range(0, len(tokens), 500):
            # The stream worker hands over a burst per frame.
            with qtbot.waitSignal(reply.rendered, timeout=10_000):
                reply.append_content("".join(tokens[start : start + 500]))
        reply.append_content("\n\nThe last words.")
        reply.finish()
        assert reply.content() == "".join(tokens) + "\n\nThe last words."
        assert reply.render_count >= 40
        assert reply.text_document().toPlainText().rstrip().endswith("The last words.")

    def test_conversation_one_character_repeated_is_laid_out_with_breaks_and_copied_without(
        self, conversation_view, qtbot
    ) -> None:
        """A degenerate reply (and reasoning) of one character: its layout has break
        opportunities (rendering stays linear), its text and copies are what the model sent."""

        saved = conversation_view.append_message(
            {"id": 1, "role": "assistant", "content": "a" * 200_000, "reasoning": "r" * 50_000}
        )
        streamed = conversation_view.append_message({"id": 2, "role": "assistant"})
        for _ in range(100):
            streamed.append_reasoning("t" * 997)
        with qtbot.waitSignal(streamed.rendered, timeout=10_000):
            for _ in range(100):
                streamed.append_content("b" * 997)
        streamed.finish()
        for view, content, reasoning in (
            (saved, "a" * 200_000, "r" * 50_000),
            (streamed, "b" * 99_700, "t" * 99_700),
        ):
            assert view.content() == content and view.reasoning() == reasoning
            for document in (view.text_document(), view._reasoning_body.document()):
                assert _longest_unbroken_run(document.toPlainText()) <= MAX_RUN
            body = view._body
            body.selectAll()
            copied = body.createMimeDataFromSelection()
            assert BREAK not in copied.text() and copied.text().strip() == content
            body.setTextCursor(QTextCursor(body.document()))

    def test_streamed_rules_stay_as_a_complete_reply_shows_them(self, qapp) -> None:
        """A thematic break finished while streaming is kept when the text after it streams
        in (its empty block used to take the tail and lose the rule): token by token the
        reply shows the rules a complete one does."""

        text = "***\n\nFirst part.\n\n---\n\nSecond part, **bold**.\n\n- - -\n\nEnd."
        rules = lambda view: sum(
            1
            for n in range(view.text_document().blockCount())
            if view.text_document()
            .findBlockByNumber(n)
            .blockFormat()
            .hasProperty(QTextFormat.Property.BlockTrailingHorizontalRulerWidth)
        )
        live = MessageView({"role": "assistant", "status": "streaming", "content": ""})
        for token in re.findall(r"\S+|\s+", text):
            live.append_content(token)
        assert rules(live) == 3
        live.finish()
        whole = MessageView({"role": "assistant", "status": "complete", "content": text})
        assert rules(live) == rules(whole) == 3
        assert live.text_document().toPlainText() == whole.text_document().toPlainText()

    def test_conversation_append_renders_the_burst_at_once(self, conversation_view, qtbot) -> None:
        reply = conversation_view.append_message(
            {"id": 1, "role": "assistant", "status": "streaming"}
        )
        burst = "".join(f"word{number} " for number in range(1_000))
        reply.append_content(burst)
        assert reply.render_count == 1
        assert "word999" in reply.text_document().toPlainText()

    def test_conversation_model_html_appears_literally(self, conversation_view, qtbot) -> None:
        view = conversation_view.append_message(
            {"id": 1, "role": "assistant", "content": "Use <b>x</b> here.", "status": "complete"}
        )
        assert "Use <b>x</b> here." in view.text_document().toPlainText()

    def test_conversation_streamed_reply_matches_one_shot_render(
        self, conversation_view, qtbot
    ) -> None:
        text = (
            "# Title\n\nA *para* with `code`.\n\n- a\n- b\n\n1. one\n\n2. two\n\n"
            "```python\ndef f(x):\n\n    return x < 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
            "> quote\n\nend\n"
        )
        streamed = conversation_view.append_message(
            {"id": 1, "role": "assistant", "status": "streaming"}
        )
        for char in text:
            streamed.append_content(char)
        streamed.finish()
        whole = conversation_view.append_message(
            {"id": 2, "role": "assistant", "content": text, "status": "complete"}
        )

        def lines(view) -> list[str]:
            return [
                line for line in view.text_document().toPlainText().splitlines() if line.strip()
            ]

        assert lines(streamed) == lines(whole)
        heading = streamed.text_document().begin()
        assert heading.text() == "Title" and heading.blockFormat().headingLevel() == 1

    def test_conversation_copy_code_link_puts_raw_code_on_clipboard(
        self, conversation_view, qtbot
    ) -> None:

        code = "print('<hi>' & 1)\n"
        view = conversation_view.append_message(
            {
                "id": 1,
                "role": "assistant",
                "content": f"```python\n{code}```\n",
                "status": "complete",
            }
        )
        assert 'href="copy:0"' in view.text_document().toHtml()
        view._body.anchorClicked.emit(QUrl("copy:0"))
        assert QGuiApplication.clipboard().text() == code
        # The link says it copied, for a moment.
        assert "✓ Copied!" in view.text_document().toPlainText()
        assert "Copy code" not in view.text_document().toPlainText()
        qtbot.waitUntil(lambda: "Copy code" in view.text_document().toPlainText(), timeout=3000)
        assert "✓ Copied!" not in view.text_document().toPlainText()

    def test_conversation_long_code_lines_wrap_inside_the_reply(
        self, conversation_view, qtbot
    ) -> None:
        """A code line longer than the reply is wide wraps (indentation kept), so none of it is
        cut off at the edge; Copy code still copies it as one line."""

        line = "result = compute(" + ", ".join(f"argument_{n}" for n in range(40)) + ")"
        code = f"def f():\n    {line}\n"
        conversation_view.resize(500, 400)
        view = conversation_view.append_message(
            {
                "id": 1,
                "role": "assistant",
                "content": f"```python\n{code}```\n",
                "status": "complete",
            }
        )
        qtbot.waitUntil(view.isVisible)
        document = view.text_document()
        assert document.size().width() <= view._body.viewport().width() + 1
        assert document.toPlainText().count("argument_39") == 1
        view._body.anchorClicked.emit(QUrl("copy:0"))
        assert QGuiApplication.clipboard().text() == code

    def test_conversation_reasoning_collapses_once_the_answer_starts(
        self, conversation_view, qtbot
    ) -> None:

        reply = conversation_view.append_message(
            {"id": 3, "role": "assistant", "status": "streaming"}
        )
        reply.append_reasoning("Let me think about ")
        reply.append_reasoning("this carefully.")
        qtbot.waitUntil(lambda: reply.reasoning_expanded() is True)
        qtbot.waitUntil(lambda: "carefully" in reply._reasoning_body.toPlainText())
        reply.append_content("The answer is 42.")
        qtbot.waitUntil(lambda: reply.reasoning_expanded() is False)
        toggle = next(
            b for b in reply.findChildren(QToolButton) if b.accessibleName() == "Show reasoning"
        )
        assert toggle.text().startswith("Thought for ")
        qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
        assert reply.reasoning_expanded() is True
        assert reply.reasoning() == "Let me think about this carefully."

    def test_conversation_stop_and_error_show_marks_and_retry_carries_the_id(
        self, conversation_view, qtbot
    ) -> None:

        reply = conversation_view.append_message(
            {"id": 7, "role": "assistant", "status": "streaming"}
        )
        reply.append_content("Partial answ")
        reply.set_status("stopped")
        qtbot.waitUntil(reply._status.isVisible)
        assert reply._status.text() == "Stopped"
        assert "Partial answ" in reply.text_document().toPlainText()
        # One action to ask again, and the figures of what was produced.
        assert not _button(reply, "Retry").isVisible() and _button(reply, "Regenerate").isVisible()
        stats = _button_label(reply, "Reply statistics")
        assert stats.isVisible() and re.fullmatch(r"2 words · \d+\.\d s", stats.text())
        with qtbot.waitSignal(conversation_view.regenerate_requested) as caught:
            qtbot.mouseClick(_button(reply, "Regenerate"), Qt.MouseButton.LeftButton)
        assert caught.args == [7]

        failed = conversation_view.append_message(
            {"id": 8, "role": "assistant", "status": "streaming"}
        )
        failed.set_status("error", "model 'x' failed to load")
        assert failed._status.text() == "model 'x' failed to load"
        assert "d1242f" in failed._status.styleSheet()
        assert (
            _button(failed, "Retry").isVisible() and not _button(failed, "Regenerate").isVisible()
        )
        with qtbot.waitSignal(conversation_view.retry_requested) as caught:
            qtbot.mouseClick(_button(failed, "Retry"), Qt.MouseButton.LeftButton)
        assert caught.args == [8]

        # Reopened, a stopped reply still shows what it produced (no time: it was not timed).
        conversation_view.load_messages(
            [{"id": 9, "role": "assistant", "content": "one two three", "status": "stopped"}]
        )
        [reopened] = conversation_view.views()
        qtbot.waitUntil(reopened.isVisible)
        assert _button_label(reopened, "Reply statistics").text() == "3 words"

    def test_conversation_edit_and_regenerate_signals_carry_the_ids(
        self, conversation_view, qtbot
    ) -> None:

        conversation_view.load_messages(
            [
                {"id": 1, "role": "user", "content": "hi", "status": "complete"},
                {"id": 2, "role": "assistant", "content": "hello", "status": "complete"},
                {"id": 3, "role": "user", "content": "again", "status": "complete"},
                {"id": 4, "role": "assistant", "content": "sure", "status": "complete"},
            ]
        )
        views = conversation_view.views()
        assert [v.accessibleName() for v in views] == ["Message from you", "Reply"] * 2
        assert not _button(views[1], "Regenerate").isVisible()
        with qtbot.waitSignal(conversation_view.regenerate_requested) as caught:
            qtbot.mouseClick(_button(views[3], "Regenerate"), Qt.MouseButton.LeftButton)
        assert caught.args == [4]
        with qtbot.waitSignal(conversation_view.edit_requested) as caught:
            qtbot.mouseClick(_button(views[2], "Edit message"), Qt.MouseButton.LeftButton)
        assert caught.args == [3]
        views[3].set_message_id(40)
        with qtbot.waitSignal(conversation_view.regenerate_requested) as caught:
            qtbot.mouseClick(_button(views[3], "Regenerate"), Qt.MouseButton.LeftButton)
        assert caught.args == [40]

    def test_conversation_links_open_only_for_http_and_https(self, conversation_view) -> None:

        for url in ("file:///etc/passwd", "javascript:alert(1)", "copy:0", "/tmp/x"):
            assert open_link(QUrl(url)) is False

    def test_conversation_stats_line_shows_speed_tokens_and_time(self, conversation_view) -> None:
        reply = conversation_view.append_message({"id": 1, "role": "assistant", "content": "ok"})
        reply.set_stats(
            {"completion_tokens": 412}, {"predicted_per_second": 38.21, "predicted_ms": 1200.0}
        )
        assert reply._stats.text() == "38.2 tok/s · 412 tokens · 1.2 s"

    def test_conversation_5000_messages_show_newest_first_and_load_older_on_scroll(
        self, conversation_view, qtbot
    ) -> None:
        messages = [
            {
                "id": n,
                "role": "user" if n % 2 else "assistant",
                "content": f"Message number {n}.\n\nSome more text for message {n}.",
                "status": "complete",
            }
            for n in range(1, 5001)
        ]
        conversation_view.load_messages(messages)
        built = conversation_view.views()
        assert len(built) < 50
        assert built[-1].message_id == 5000
        assert "Message number 5000." in built[-1].text_document().toPlainText()
        bar = conversation_view.verticalScrollBar()
        qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
        qtbot.waitUntil(lambda: not conversation_view._page_timer.isActive())
        before = len(conversation_view.views())
        oldest = conversation_view.views()[0]
        bar.setValue(0)
        shown_at = oldest.y() - bar.value()
        qtbot.waitUntil(lambda: len(conversation_view.views()) > before)
        qtbot.waitUntil(lambda: not conversation_view._page_timer.isActive())
        qtbot.wait(200)
        # What the user was looking at stays put while older messages arrive above it.
        assert abs((oldest.y() - bar.value()) - shown_at) <= 2
        assert conversation_view.views()[0].message_id < oldest.message_id
        assert conversation_view.unloaded_count() + len(conversation_view.views()) == 5000

    def test_conversation_follows_the_stream_only_while_at_the_bottom(
        self, conversation_view, qtbot
    ) -> None:
        for n in range(30):
            conversation_view.append_message(
                {"id": n, "role": "user", "content": f"line {n}\n\nmore"}
            )
        bar = conversation_view.verticalScrollBar()
        qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
        reply = conversation_view.append_message(
            {"id": 99, "role": "assistant", "status": "streaming"}
        )
        reply.append_content("para one\n\npara two\n\npara three\n\n")
        qtbot.waitUntil(lambda: reply.render_count > 0 and bar.value() == bar.maximum())
        bar.setValue(bar.maximum() // 2)
        held = bar.value()
        old_max = bar.maximum()
        for n in range(20):
            reply.append_content(f"more text {n}\n\n")
        qtbot.waitUntil(lambda: bar.maximum() > old_max)
        assert bar.value() == held
        conversation_view.scroll_to_bottom()
        reply.append_content("and the end\n\n")
        qtbot.waitUntil(lambda: "and the end" in reply.text_document().toPlainText())
        qtbot.waitUntil(lambda: bar.value() == bar.maximum())

    def test_conversation_reading_progress_moves_by_the_estimate_between_reports(
        self, qtbot
    ) -> None:
        """The server reports once a batch: between reports the bar moves at the reading speed
        (earlier replies', then this reading's), never past one batch on, never back; the
        time taken and the time left show beside the server's count (issue 30, item 4)."""

        now = [100.0]
        reading = ReadingProgress(speed=100.0, clock=lambda: now[0])
        qtbot.addWidget(reading)
        reading.show_progress({"total": 5000, "cache": 0, "processed": 0, "time_ms": 0})
        assert reading.bar.value() == 0 and reading.timing.text() == "0 s · about 50 s left"
        now[0] = 102.0
        reading.refresh()
        assert reading.bar.value() == 200 and reading.label.text() == "Reading 0 of 5,000 tokens"
        assert reading.timing.text() == "2 s · about 48 s left"
        now[0] = 104.0
        reading.show_progress({"total": 5000, "cache": 0, "processed": 512, "time_ms": 4000})
        assert reading.bar.value() == 512 and reading.speed() == 128.0
        now[0] = 114.0
        reading.refresh()
        assert reading.bar.value() == 1024  # 512 + 1,280 estimated, held at one batch on
        assert reading.timing.text() == "14 s · about 31 s left"
        reading.show_progress({"total": 5000, "cache": 0, "processed": 1000, "time_ms": 15000})
        assert (
            reading.bar.value() == 1024 and reading.label.text() == "Reading 1,000 of 5,000 tokens"
        )
        now[0] = 130.0
        reading.show_progress({"total": 5000, "cache": 0, "processed": 5000, "time_ms": 30000})
        assert reading.bar.value() == 5000 and reading.timing.text() == "30 s"

        live = ReadingProgress(speed=1_000_000.0)
        qtbot.addWidget(live)
        live.show_progress({"total": 100_000, "cache": 0, "processed": 0, "time_ms": 0})
        qtbot.waitUntil(lambda: live.bar.value() == 99_999)  # the timer; the end is the server's

    def test_conversation_reading_bar_shows_empty_in_the_dark_theme(
        self, conversation_view, qtbot
    ) -> None:
        """At 0% the bar's groove stands out from the conversation's dark background."""

        conversation_view.setPalette(theme.palette_for("dark"))
        reply = conversation_view.append_message(
            {"id": 1, "role": "assistant", "status": "streaming"}
        )
        reply.set_progress({"total": 5694, "cache": 0, "processed": 0, "time_ms": 0})
        reading = reply.findChild(ReadingProgress)
        qtbot.waitUntil(reading.isVisible)
        image = reading.bar.grab().toImage()
        groove = image.pixelColor(image.width() // 2, image.height() // 2)
        base = conversation_view.palette().color(QPalette.ColorRole.Base)
        assert reading.bar.value() == 0 and groove.lightness() - base.lightness() >= 20

    def test_conversation_reply_stopped_while_reading_says_what_was_read(
        self, conversation_view
    ) -> None:
        """Stop before the prompt was read: the reply says so, with the server's last count
        (or the server's own figures when it sent some)."""

        reply = conversation_view.append_message(
            {"id": 1, "role": "assistant", "status": "streaming"}
        )
        reply.set_progress({"total": 5694, "cache": 52, "processed": 2100, "time_ms": 9000})
        reply.finish()
        reply.set_progress(None)
        reply.set_status("stopped")
        assert reply._status.text() == "Stopped while reading the prompt"
        assert (
            _by_name(reply, QLabel, "Reply statistics")
            .text()
            .startswith("2,100 of 5,694 prompt tokens read · ")
        )

        told = conversation_view.append_message(
            {"id": 2, "role": "assistant", "status": "streaming"}
        )
        told.set_progress({"total": 5694, "cache": 52, "processed": 2100, "time_ms": 9000})
        told.finish()
        told.set_progress(None)
        told.set_stats({}, {"prompt_n": 2048, "cache_n": 52, "prompt_ms": 9000.0})
        told.set_status("stopped")
        assert told._status.text() == "Stopped while reading the prompt"
        assert _by_name(told, QLabel, "Reply statistics").text() == "2,100 prompt, 52 cached"


class TestTheme:
    """`llamachat.ui.theme`: light and dark palettes."""

    def test_theme_apply_sets_fusion_with_light_dark_or_the_systems_palette(self, qapp) -> None:

        style, palette = qapp.style().name(), qapp.palette()
        try:
            assert theme.apply_theme(qapp, "dark") == "dark"
            assert qapp.style().name().lower() == "fusion"
            window = qapp.palette().color(QPalette.ColorRole.Window)
            text = qapp.palette().color(QPalette.ColorRole.WindowText)
            assert window.lightness() < 80 and text.lightness() > 200
            assert theme.apply_theme(qapp, "light") == "light"
            assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 200
            assert theme.apply_theme(qapp, "system") == theme.system_scheme(qapp)
            assert qapp.palette() == theme.palette_for(theme.system_scheme(qapp))
            with pytest.raises(ValueError, match="theme must be one of"):
                theme.apply_theme(qapp, "sepia")
        finally:
            qapp.styleHints().unsetColorScheme()
            qapp.setStyle(style)
            qapp.setPalette(palette)


class TestShortcuts:
    """`llamachat.ui.shortcuts`: one table of keys, installed and listed (F1)."""

    @offscreen_dialogs
    def test_chrome_window_shortcuts_copy_reply_focus_and_help(
        self, chat_window, router, qtbot
    ) -> None:
        """Ctrl+Shift+C copies the last reply, Ctrl+L focuses the composer, F1 lists the keys."""

        window, _history = chat_window()
        _send(qtbot, window, "copy this")
        window.sidebar.focus_search()
        control_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
        qtbot.keyClick(window, Qt.Key.Key_C, control_shift)
        assert QApplication.clipboard().text() == "echo: copy this"
        qtbot.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
        assert window.composer.editor.hasFocus()
        qtbot.keyClick(window, Qt.Key.Key_F1)
        dialog = _by_name(window, QDialog, "Keyboard shortcuts")
        rows = {action: keys for keys, action in dialog.rows()}
        assert (
            rows["Start a new chat"] == "Ctrl+N" and rows["Stop the reply being written"] == "Esc"
        )
        dialog.close()

    @offscreen_limits
    def test_shortcuts_table_is_installed_and_listed_in_the_help(self, qtbot) -> None:

        keys = {s.action: s.keys for s in SHORTCUTS}
        assert keys["new_chat"] == ("Ctrl+N",) and keys["stop"] == ("Esc",)
        assert keys["search_sessions"] == ("Ctrl+K", "Ctrl+F")
        assert keys["copy_last_reply"] == ("Ctrl+Shift+C",) and keys["switch_model"] == ("Ctrl+M",)
        assert keys["focus_composer"] == ("Ctrl+L",) and keys["settings"] == ("Ctrl+,",)
        assert keys["previous_version"] == ("Alt+Left",) and keys["next_version"] == ("Alt+Right",)
        window = QLineEdit()
        qtbot.addWidget(window)
        window.show()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow)
        hits: list[str] = []
        made = install(
            window,
            {
                "search_sessions": lambda: hits.append("search"),
                "settings": lambda: hits.append("settings"),
            },
        )
        assert [s.key() for s in made] == [
            QKeySequence("Ctrl+K"),
            QKeySequence("Ctrl+F"),
            QKeySequence("Ctrl+,"),
        ]
        for key in (Qt.Key.Key_K, Qt.Key.Key_F, Qt.Key.Key_Comma):
            qtbot.keyClick(window, key, Qt.KeyboardModifier.ControlModifier)
        assert hits == ["search", "search", "settings"]
        with pytest.raises(KeyError):
            install(window, {"teleport": lambda: None})
        dialog = ShortcutsDialog()
        qtbot.addWidget(dialog)
        rows = dialog.rows()
        assert len(rows) == len(SHORTCUTS)
        keys_of = {action: keys for keys, action in rows}
        assert keys_of["Search past chats"] == (
            QKeySequence("Ctrl+K").toString(QKeySequence.SequenceFormat.NativeText)
            + " or "
            + QKeySequence("Ctrl+F").toString(QKeySequence.SequenceFormat.NativeText)
        )

    @offscreen_limits
    def test_shortcuts_dialog_shows_every_row_without_scrolling(self, qtbot) -> None:

        dialog = ShortcutsDialog()
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        table = dialog.table
        assert table.verticalScrollBar().maximum() == 0
        assert table.horizontalScrollBar().maximum() == 0
        viewport = table.viewport().rect()
        for row, (keys, action) in enumerate(dialog.rows()):
            for column, text in enumerate((keys, action)):
                cell = table.visualRect(table.model().index(row, column))
                assert viewport.contains(cell), f"row {text!r} is not all in view"
                assert cell.width() >= table.fontMetrics().horizontalAdvance(text), text
        shown = [keys for keys, _action in dialog.rows()]
        for keys in ("Enter", "Shift+Enter", "/", "Alt+Left", "Alt+Right"):
            native = QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)
            assert native in shown


class TestSidebar:
    """`llamachat.ui.views.sidebar`: past chats, search, rename, delete, import and export."""

    def test_chrome_window_search_finds_titles_shows_plain_marked_snippets_or_no_matches(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """Search finds a renamed chat by its title; snippets are plain text (no Markdown
        marks), the matched words are marked on screen, and a search without hits says so."""

        history = History(tmp_path / "history.db")
        renamed = history.create_session("chat", "test-model")
        history.add_message(renamed, "user", "something else")
        history.rename_session(renamed, "Alpaca shearing")
        talked = history.create_session("chat", "test-model")
        asked = "tell me about the fibre of camelids, in some detail, with sources and examples"
        history.add_message(talked, "user", asked)
        history.add_message(
            talked, "assistant", "# Fibre\nThe **alpaca** gives `wool`, see [this](http://x)."
        )
        window, _ = chat_window(history=history)
        window.resize(900, 600)
        window.sidebar.search("alpaca")
        assert window.sidebar.session_ids() == [renamed, talked]
        rows = [window.sidebar.model.data(window.sidebar.model.index(r)) for r in range(2)]
        assert rows[0] == "Alpaca shearing"
        assert rows[1] == asked + "\nFibre The alpaca gives wool, see this."
        assert not window.sidebar.no_matches.isVisible()
        assert marked_html("<b>Alpaca</b> alpacas", "alpaca", "X") == (
            '&lt;b&gt;<span style="X">Alpaca</span>&lt;/b&gt; <span style="X">alpaca</span>s'
        )

        # Nothing is selected (a new chat is shown): any highlight colour is a marked word.
        highlight = window.sidebar.list_view.palette().color(QPalette.ColorRole.Highlight).rgb()

        def marked_pixels(row: int | None = None, *, below_title: bool = False) -> int:
            view = window.sidebar.list_view
            image = view.viewport().grab().toImage()
            area = view.viewport().rect()
            if row is not None:
                area = view.visualRect(window.sidebar.model.index(row))
            if below_title:
                area.setTop(area.top() + area.height() // 3)
            return sum(
                image.pixel(x, y) == highlight
                for x in range(area.left(), area.right(), 2)
                for y in range(area.top(), area.bottom())
            )

        assert _highlighted(window) == []
        # The title hit is marked in its title, the other in its snippet's line.
        assert marked_pixels(0) > 0 and marked_pixels(1, below_title=True) > 0
        window.sidebar.search("")
        assert marked_pixels() == 0

        window.sidebar.search("zzyzx")
        assert window.sidebar.session_ids() == []
        assert window.sidebar.no_matches.isVisible()
        assert window.sidebar.no_matches.text() == "No matches"
        window.sidebar.search("")
        assert not window.sidebar.no_matches.isVisible()

    def test_chrome_window_title_follows_renames_and_edits_of_an_automatic_title(
        self, chat_window, qtbot
    ) -> None:
        """Renaming the open chat retitles the window at once; editing the first question
        renames a chat titled automatically, and no longer once the user renamed it."""
        window, history = chat_window()
        _send(qtbot, window, "Wher do llamas live")
        assert window.windowTitle() == "Wher do llamas live — llamachat"
        first = history.messages(window.session_id)[0]["id"]
        window.conversation.edit_requested.emit(first)
        window.composer.set_text("Where do llamas live")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert window.windowTitle() == "Where do llamas live — llamachat"
        model = window.sidebar.model
        assert model.data(model.index(model.row_of(window.session_id))) == "Where do llamas live"

        assert model.setData(model.index(model.row_of(window.session_id)), "Llamas")
        assert window.windowTitle() == "Llamas — llamachat"
        first = history.messages(window.session_id)[0]["id"]
        window.conversation.edit_requested.emit(first)
        window.composer.set_text("Where do alpacas live")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert window.windowTitle() == "Llamas — llamachat"
        window.sidebar.rename_session(window.session_id, "Camelids")
        assert window.windowTitle() == "Camelids — llamachat"

    @offscreen_dialogs
    def test_chrome_window_sidebar_highlights_the_shown_chat_whatever_happens(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """Deleting another chat, right-clicking one, or starting a new chat leaves the
        highlight on the chat shown (none for a new chat, so Delete deletes nothing)."""

        history = History(tmp_path / "history.db")
        ids = []
        for text in ("first", "second", "third", "fourth"):
            ids.append(history.create_session("chat", "test-model"))
            history.add_message(ids[-1], "user", text)
        window, _ = chat_window(history=history)
        _click_session(qtbot, window, ids[1])
        assert window.session_id == ids[1] and _highlighted(window) == [ids[1], ids[1]]

        window.sidebar.delete_session(ids[2])
        assert window.session_id == ids[1] and _highlighted(window) == [ids[1], ids[1]]
        window.sidebar.delete_session(ids[0])
        assert _highlighted(window) == [ids[1], ids[1]]

        view = window.sidebar.list_view
        menus: list[str] = []

        def close_menu() -> None:
            menu = QApplication.activePopupWidget()
            if menu is None:
                QTimer.singleShot(10, close_menu)
                return
            menus.append(type(menu).__name__)
            menu.close()

        close_menu()
        row = window.sidebar.model.row_of(ids[3])
        where = view.visualRect(window.sidebar.model.index(row)).center()
        # As the platform does it: the button press, then a context menu event.
        qtbot.mousePress(view.viewport(), Qt.MouseButton.RightButton, pos=where)
        QApplication.sendEvent(
            view.viewport(),
            QContextMenuEvent(
                QContextMenuEvent.Reason.Mouse, where, view.viewport().mapToGlobal(where)
            ),
        )
        qtbot.mouseRelease(view.viewport(), Qt.MouseButton.RightButton, pos=where)
        qtbot.waitUntil(lambda: menus == ["QMenu"])
        assert window.session_id == ids[1] and _highlighted(window) == [ids[1], ids[1]]

        window.new_session()
        assert _highlighted(window) == []
        view.setFocus()
        qtbot.keyClick(view, Qt.Key.Key_Delete)
        assert sorted(window.sidebar.session_ids()) == [ids[1], ids[3]]

    @offscreen_dialogs
    def test_chrome_window_search_finds_old_session_and_opening_restores_it(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Sidebar search finds an old chat's message; opening it restores messages, model,
        prompt and loaded skills."""

        _chrome_models(router, Model("other", "loaded"))
        window, _history = chat_window()
        Prompts(tmp_path / "prompts").save("Pirate", "Answer like a pirate.")
        window.preset_picker.reload()
        qtbot.waitUntil(lambda: "other" in _combo_ids(window.model_picker.combo))
        window.model_picker.combo.setCurrentIndex(window.model_picker.combo.findData("other"))
        window.preset_picker.combo.setCurrentIndex(window.preset_picker.combo.findData("Pirate"))
        _send(qtbot, window, "/weather where do aardvarks live")
        old = window.session_id
        qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
        assert window.session_id is None and window.conversation.views() == []
        assert window.loaded_skills() == []
        window.model_picker.combo.setCurrentIndex(window.model_picker.combo.findData("test-model"))
        window.preset_picker.combo.setCurrentIndex(window.preset_picker.combo.findData("Default"))
        _send(qtbot, window, "something else entirely")
        assert window.sidebar.session_ids() == [window.session_id, old]

        # Offscreen, the hidden `/` completion popup stays the active window: take it back.
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
        web_search = _by_name(window, QLineEdit, "Search sessions")
        assert web_search.hasFocus()
        qtbot.keyClicks(web_search, "aardvarks")
        qtbot.waitUntil(lambda: window.sidebar.session_ids() == [old])
        _click_session(qtbot, window, old)
        assert window.session_id == old
        assert [(v.role, v.content()) for v in window.conversation.views()] == [
            ("user", "where do aardvarks live"),
            ("assistant", "echo: where do aardvarks live"),
        ]
        assert window.current_model() == "other"
        assert window.model_picker.combo.currentData() == "other"
        assert window.preset_picker.current_name() == "Pirate"
        assert window.loaded_skills() == ["weather"] and window.skill_chips.skills() == ["weather"]
        _send(qtbot, window, "and in winter?")
        sent = router.chat_requests()[-1].json
        assert sent["model"] == "other"
        assert sent["messages"][0]["content"].startswith("Answer like a pirate.")
        assert "[skill: weather]" in sent["messages"][0]["content"]

    def test_chrome_window_delete_and_undo_in_the_sidebar(self, chat_window, router, qtbot) -> None:
        """Deleting the open chat starts a new one; Undo brings the chat back to the list."""

        window, history = chat_window()
        _send(qtbot, window, "keep me")
        kept = window.session_id
        window.new_session()
        _send(qtbot, window, "delete me")
        doomed = window.session_id
        assert window.sidebar.session_ids() == [doomed, kept]

        window.sidebar.list_view.setFocus()
        window.sidebar.list_view.setCurrentIndex(
            window.sidebar.model.index(window.sidebar.model.row_of(doomed))
        )
        qtbot.keyClick(window.sidebar.list_view, Qt.Key.Key_Delete)
        assert window.sidebar.session_ids() == [kept]
        assert window.session_id is None and window.conversation.views() == []
        assert [s["id"] for s in history.list_sessions()] == [kept]
        assert "delete me" in window.sidebar.notice_text()

        qtbot.mouseClick(_by_name(window, QPushButton, "Undo delete"), Qt.MouseButton.LeftButton)
        assert window.sidebar.session_ids() == [doomed, kept]
        _click_session(qtbot, window, doomed)
        assert window.session_id == doomed
        assert window.conversation.views()[0].content() == "delete me"

    @offscreen_limits
    def test_sidebar_pages_ten_thousand_sessions_as_the_list_scrolls(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = _chrome_history(tmp_path, 10_000)
        sidebar = SessionSidebar(history, page_size=100)
        qtbot.addWidget(sidebar)
        sidebar.resize(300, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        assert sidebar.model.rowCount() == 100
        assert sidebar.model.canFetchMore(QModelIndex())
        assert [sidebar.model.data(sidebar.model.index(r)) for r in range(2)] == [
            "chat 9999",
            "chat 9998",
        ]
        sidebar.list_view.scrollToBottom()
        qtbot.waitUntil(lambda: sidebar.model.rowCount() >= 200)
        assert sidebar.model.rowCount() < 10_000
        while sidebar.model.canFetchMore(QModelIndex()):
            sidebar.model.fetchMore(QModelIndex())
        assert sidebar.model.rowCount() == 10_000
        assert sidebar.session_ids()[-1] == 1
        history.close()

    def test_sidebar_search_finds_a_message_from_an_old_session(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = _chrome_history(tmp_path)
        old = history.create_session("chat")
        history.add_message(old, "user", "Where does the quokka live?")
        history.add_message(old, "assistant", "The quokka lives on Rottnest Island.")
        for n in range(30):
            sid = history.create_session("chat")
            history.add_message(sid, "user", f"question number {n}")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.session_ids()[-1] == old and len(sidebar.session_ids()) == 31
        assert sidebar.search_field.accessibleName() == "Search sessions"
        assert sidebar.list_view.accessibleName() == "Sessions"
        assert sidebar.new_button.accessibleName() == "New chat"
        qtbot.keyClicks(sidebar.search_field, "rottnest")
        qtbot.waitUntil(lambda: sidebar.session_ids() == [old])
        shown = sidebar.model.data(sidebar.model.index(0))
        assert shown.startswith("Where does the quokka live?\n") and "Rottnest" in shown
        with qtbot.waitSignal(sidebar.session_activated) as opened:
            qtbot.mouseClick(
                sidebar.list_view.viewport(),
                Qt.MouseButton.LeftButton,
                pos=sidebar.list_view.visualRect(sidebar.model.index(0)).center(),
            )
        assert opened.args == [old]
        sidebar.search_field.clear()
        qtbot.waitUntil(lambda: len(sidebar.session_ids()) == 31)
        history.add_message(old, "user", "And what do quokkas eat?")
        sidebar.refresh()
        assert sidebar.session_ids()[0] == old
        with qtbot.waitSignal(sidebar.new_chat_requested):
            qtbot.mouseClick(sidebar.new_button, Qt.MouseButton.LeftButton)
        history.close()

    def test_sidebar_delete_hides_the_session_and_undo_brings_it_back(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = _chrome_history(tmp_path)
        ids = []
        for text in ("first chat", "second chat", "third chat"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.set_current(ids[1])
        with qtbot.waitSignal(sidebar.session_deleted) as deleted:
            sidebar.delete_session(ids[1])
        assert deleted.args == [ids[1]]
        assert sidebar.session_ids() == [ids[2], ids[0]]
        assert [s["id"] for s in history.list_sessions()] == [ids[2], ids[0]]
        assert history.search("second") == []
        assert sidebar.notice_text() == "Deleted “second chat”."
        assert sidebar.undo_button.isVisibleTo(sidebar) and sidebar.current() is None
        qtbot.mouseClick(sidebar.undo_button, Qt.MouseButton.LeftButton)
        assert sidebar.session_ids() == [ids[2], ids[1], ids[0]]
        assert [s["id"] for s in history.search("second")] == [ids[1]]
        assert sidebar.notice_text() == ""
        history.close()

    def test_sidebar_renames_exports_and_imports_sessions(self, qtbot, tmp_path: Path) -> None:

        history = _chrome_history(tmp_path)
        sid = history.create_session("chat", "qwen")
        history.add_message(sid, "user", "Name three rivers")
        history.add_message(sid, "assistant", "Nile, Amazon, Danube.", model="qwen")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.model.setData(sidebar.model.index(0), "Rivers") is True
        assert history.get_session(sid)["title"] == "Rivers"
        sidebar.export_session(sid, tmp_path / "rivers.md", "markdown")
        markdown = (tmp_path / "rivers.md").read_text(encoding="utf-8")
        assert markdown.startswith("# Rivers\n") and "Nile, Amazon, Danube." in markdown
        sidebar.export_session(sid, tmp_path / "rivers.json", "json")
        new_id = sidebar.import_file(tmp_path / "rivers.json")
        assert new_id != sid and sidebar.session_ids()[:2] in ([new_id, sid], [sid, new_id])
        assert [m["content"] for m in history.messages(new_id)] == [
            "Name three rivers",
            "Nile, Amazon, Danube.",
        ]
        (tmp_path / "bad.json").write_text(json.dumps({"format": "something else"}))
        with pytest.raises(HistoryError, match="not a llamachat session"):
            sidebar.import_file(tmp_path / "bad.json")
        (tmp_path / "garbage.json").write_text("{not json")
        with pytest.raises(HistoryError, match="garbage.json: it is not JSON"):
            sidebar.import_file(tmp_path / "garbage.json")
        with pytest.raises(HistoryError, match="cannot write"):
            sidebar.export_session(sid, tmp_path / "missing" / "x.md", "markdown")
        assert history.count_sessions() == 2
        history.close()

    def test_sidebar_import_runs_in_the_background_with_progress_and_cancel(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The menu's import reads and writes off the GUI thread: the new chat, titled
        "(imported)", opens at the top of the list; Cancel in its progress dialog adds nothing."""

        history = _chrome_history(tmp_path)
        sid = history.create_session("chat")
        history.add_message(sid, "user", "Name three rivers")
        history.add_message(history.create_session("chat"), "user", "A newer chat")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.export_session(sid, tmp_path / "rivers.json", "json")
        with qtbot.waitSignal(sidebar.session_activated) as opened:
            sidebar.start_import(tmp_path / "rivers.json")
            assert sidebar.import_progress is not None
            assert not sidebar.import_action.isEnabled()
        new_id = opened.args[0]
        assert sidebar.session_ids()[0] == new_id and sidebar.current() == new_id
        assert sidebar.model.data(sidebar.model.index(0)) == "Name three rivers (imported)"
        assert sidebar.notice_text() == "Imported rivers.json."
        assert sidebar.import_action.isEnabled() and sidebar.import_progress is None

        big = _good_export()
        big["messages"] = [
            {"role": "user", "content": f"message {n}", "created_at": 1.0} for n in range(5000)
        ]
        (tmp_path / "big.json").write_text(json.dumps(big), encoding="utf-8")
        sidebar.start_import(tmp_path / "big.json")
        sidebar.import_progress.findChild(QPushButton).click()  # its Cancel
        qtbot.waitUntil(lambda: "cancelled" in sidebar.notice_text())
        assert sidebar.notice_text() == "Import of big.json cancelled; nothing was added."
        assert history.count_sessions() == 3 and len(sidebar.session_ids()) == 3
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 3
        raw.close()
        history.close()

    def test_sidebar_pins_a_chat_to_the_top_from_its_menu(self, qtbot, tmp_path: Path) -> None:

        history = _chrome_history(tmp_path)
        ids = []
        for text in ("oldest", "middle", "newest"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.session_ids() == [ids[2], ids[1], ids[0]]
        menu = sidebar.session_menu(ids[0])
        pin = next(a for a in menu.actions() if a.text() == "Pin to top")
        pin.trigger()
        menu.close()
        assert sidebar.session_ids() == [ids[0], ids[2], ids[1]]
        row = sidebar.model.index(0)
        assert row.data(Qt.ItemDataRole.DecorationRole) is not None
        assert "Pinned" in row.data(Qt.ItemDataRole.ToolTipRole)
        assert sidebar.model.index(1).data(Qt.ItemDataRole.DecorationRole) is None
        # A newer message elsewhere does not move a chat above the pinned one.
        history.add_message(ids[1], "user", "still below")
        sidebar.refresh()
        assert sidebar.session_ids() == [ids[0], ids[1], ids[2]]
        menu = sidebar.session_menu(ids[0])
        next(a for a in menu.actions() if a.text() == "Unpin").trigger()
        menu.close()
        assert sidebar.session_ids() == [ids[1], ids[2], ids[0]]
        history.close()

    def test_sidebar_groups_chats_by_project_folds_them_and_moves_a_chat_by_menu(
        self, qtbot, tmp_path: Path
    ) -> None:

        history = _chrome_history(tmp_path)
        ids = []
        for text in ("alpha", "beta", "gamma"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        work = history.projects.create("Work")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        shown = lambda: [sidebar.model.index(r).data() for r in range(sidebar.model.rowCount())]
        assert shown() == ["▾ Work", "gamma", "beta", "alpha"]
        menu = sidebar.session_menu(ids[0])
        moves = next(a.menu() for a in menu.actions() if a.text() == "Move to project")
        next(a for a in moves.actions() if a.text() == "Work").trigger()
        assert shown() == ["▾ Work", "alpha", "gamma", "beta"]
        assert history.get_session(ids[0])["project_id"] == work
        # A click on the header folds the project (remembered), another unfolds it.
        view = sidebar.list_view
        sidebar.resize(300, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        qtbot.mouseClick(
            view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=view.visualRect(sidebar.model.index(0)).center(),
        )
        assert shown() == ["▸ Work", "gamma", "beta"]
        assert history.projects.get(work)["collapsed"] is True
        assert sidebar.session_ids() == [ids[2], ids[1]]
        qtbot.mouseClick(
            view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=view.visualRect(sidebar.model.index(0)).center(),
        )
        assert shown() == ["▾ Work", "alpha", "gamma", "beta"]
        menu = sidebar.session_menu(ids[0])
        moves = next(a.menu() for a in menu.actions() if a.text() == "Move to project")
        assert [a.text() for a in moves.actions() if a.text()] == [
            "New project…",
            "Out of the project",
        ]
        next(a for a in moves.actions() if a.text() == "Out of the project").trigger()
        assert shown() == ["▾ Work", "gamma", "beta", "alpha"]
        # The project's dialog edits its name and defaults.
        dialog = sidebar.edit_project(work)
        dialog.name.setText("Job")
        dialog.skills.setText("pdf, weather")
        dialog.params.editors["temperature"].setValue(0.5)
        dialog.accept()
        saved = history.projects.get(work)
        assert (saved["name"], saved["skills"], saved["params"]) == (
            "Job",
            ["pdf", "weather"],
            {"temperature": 0.5},
        )
        assert shown()[0] == "▾ Job"
        menu = sidebar.project_menu(work)
        next(a for a in menu.actions() if a.text().startswith("Delete project")).trigger()
        assert shown() == ["gamma", "beta", "alpha"] and history.count_sessions() == 3
        history.close()

    def test_sidebar_filter_keeps_a_project_model_or_date_flat_says_so_and_clears(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The funnel's menu filters the list and the search by project, model and last
        update; the chats show flat, a bar says the filter as plain text, Clear ends it."""

        history = _chrome_history(tmp_path)
        lab = history.projects.create("R&D <b>lab</b>")
        history.projects.create("Finances")
        wool = history.create_session("chat", "qwen", project_id=lab)
        history.add_message(wool, "user", "alpaca wool")
        history.add_message(wool, "assistant", "sure", model="<i>evil&model</i>")
        farm = history.create_session("chat", "gemma")
        history.add_message(farm, "user", "alpaca farm")
        tax = history.create_session("chat", "qwen")
        history.add_message(tax, "user", "tax")
        with sqlite3.connect(history.path) as conn:
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86400, tax)
            )
        conn.close()
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.resize(280, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        filters = sidebar.filters
        assert filters.button.accessibleName() == "Filter chats"
        assert not filters.bar.isVisible() and sidebar.model.rowCount() == 5
        sidebar.activateWindow()
        sidebar.search_field.setFocus()
        qtbot.waitUntil(sidebar.search_field.hasFocus)
        qtbot.keyClick(sidebar.search_field, Qt.Key.Key_Tab)
        assert filters.button.hasFocus()  # the next stop after the search field

        def choose(title: str, text: str) -> None:
            filters.menu.aboutToShow.emit()
            submenu = next(a.menu() for a in filters.menu.actions() if a.text().startswith(title))
            next(a for a in submenu.actions() if a.text() == text).trigger()

        filters.menu.aboutToShow.emit()
        projects = next(a.menu() for a in filters.menu.actions() if a.text() == "Project")
        assert [a.text() for a in projects.actions() if a.text()] == [
            "Any project",
            "No project",
            "Finances",
            "R&&D <b>lab</b>",
        ]
        choose("Project", "R&&D <b>lab</b>")
        assert sidebar.session_ids() == [wool] and sidebar.model.rowCount() == 1
        assert filters.bar.isVisible()
        assert filters.label.text() == "Project R&D <b>lab</b>"
        assert filters.label.textFormat() == Qt.TextFormat.PlainText
        facts = sidebar.model.index(0).data(Qt.ItemDataRole.AccessibleDescriptionRole)
        assert facts.endswith(" · Project R&D <b>lab</b>")  # flat: which project it is in
        choose("Model", "<i>evil&&model</i>")
        assert filters.label.text() == "Project R&D <b>lab</b> · Model <i>evil&model</i>"
        filters.menu.aboutToShow.emit()
        assert [a.text() for a in filters.menu.actions()][:2] == [
            "Project: R&&D <b>lab</b>",
            "Model: <i>evil&&model</i>",
        ]
        # A search keeps to the filter; a filter matching nothing says so.
        sidebar.search("alpaca")
        assert sidebar.session_ids() == [wool]
        sidebar.search("")
        choose("Project", "No project")
        assert sidebar.session_ids() == [] and sidebar.no_matches.isVisible()
        choose("Model", "Any model")
        assert sidebar.session_ids() == [farm, tax]
        choose("Last updated", "Last 30 days")
        assert sidebar.session_ids() == [farm]
        assert filters.label.text() == "No project · Last 30 days"
        qtbot.mouseClick(filters.clear_button, Qt.MouseButton.LeftButton)
        assert not filters.bar.isVisible() and filters.current() == SearchFilter()
        assert sidebar.model.index(0).data() == "▾ Finances" and sidebar.model.rowCount() == 5
        history.close()

    def test_sidebar_drag_a_chat_onto_a_project_moves_it_in_or_out_and_keeps_its_pin(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A chat dragged onto a project's header or chat moves into it, onto a chat in no
        project or the space below out of it; pins stay; other drops are refused."""

        history = _chrome_history(tmp_path)
        work = history.projects.create("Work")
        home = history.projects.create("Home")
        alpha, beta, gamma = (history.create_session("chat", title=t) for t in "abc")
        history.set_pinned(alpha, True)
        history.projects.move(beta, home)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        model = sidebar.model
        shown = lambda: [model.index(r).data() for r in range(model.rowCount())]
        assert shown() == ["▾ Home", "b", "▾ Work", "a", "c"]
        move = Qt.DropAction.MoveAction
        dragged = model.mimeData([model.index(model.row_of(alpha))])
        assert dragged.formats() == [SESSION_MIME]
        assert model.mimeData([model.index(0)]) is None  # a header is not dragged
        assert model.flags(model.index(0)) & Qt.ItemFlag.ItemIsDropEnabled
        assert not model.flags(model.index(0)) & Qt.ItemFlag.ItemIsDragEnabled
        assert model.flags(model.index(3)) & Qt.ItemFlag.ItemIsDragEnabled
        # Between two rows, another program's text, a chat of another history: no drop.
        assert not model.canDropMimeData(dragged, move, 3, 0, QModelIndex())
        text = QMimeData()
        text.setText(str(alpha))
        assert not model.canDropMimeData(text, move, -1, 0, model.index(2))
        foreign = QMimeData()
        foreign.setData(SESSION_MIME, json.dumps({"history": "/x.db", "ids": [alpha]}).encode())
        assert not model.canDropMimeData(foreign, move, -1, 0, model.index(2))
        assert not model.dropMimeData(foreign, move, -1, 0, model.index(2))
        assert history.get_session(alpha)["project_id"] is None
        # Onto a project's header: into it, pinned still.
        assert model.dropMimeData(dragged, move, -1, 0, model.index(2))
        assert shown() == ["▾ Home", "b", "▾ Work", "a", "c"]
        assert model.project(3)["id"] == work
        assert history.get_session(alpha)["project_id"] == work
        assert history.get_session(alpha)["pinned"] == 1
        # Where it already is: no drop; onto a chat of another project: into that one.
        assert not model.canDropMimeData(dragged, move, -1, 0, model.index(2))
        assert model.dropMimeData(dragged, move, -1, 0, model.index(model.row_of(beta)))
        assert history.get_session(alpha)["project_id"] == home
        assert shown() == ["▾ Home", "a", "b", "▾ Work", "c"]
        # Onto a chat in no project, or the space below the list: out of any project.
        assert model.dropMimeData(dragged, move, -1, 0, model.index(model.row_of(gamma)))
        assert history.get_session(alpha)["project_id"] is None
        beta_drag = model.mimeData([model.index(model.row_of(beta))])
        assert model.dropMimeData(beta_drag, move, -1, 0, QModelIndex())
        assert shown() == ["▾ Home", "▾ Work", "a", "c", "b"]
        # Dropped on the view itself (as a drag ends), onto a header.
        view = sidebar.list_view
        sidebar.resize(280, 400)
        sidebar.show()
        qtbot.waitExposed(sidebar)
        assert view.acceptDrops() and view.dragEnabled()
        at = view.visualRect(model.index(1)).center()
        buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
        enter = QDragEnterEvent(at, move, dragged, buttons, keys)
        QApplication.sendEvent(view.viewport(), enter)
        assert enter.isAccepted()
        drop = QDropEvent(QPointF(at), move, dragged, buttons, keys)
        drop.ignore()  # as Qt delivers it: accepted only by who takes it
        QApplication.sendEvent(view.viewport(), drop)
        assert drop.isAccepted() and history.get_session(alpha)["project_id"] == work
        assert shown() == ["▾ Home", "▾ Work", "a", "c", "b"] and model.project(2)["id"] == work
        # Filtered, the list is flat: nothing is dragged or dropped.
        sidebar.filters.set_filter(SearchFilter(project=work))
        assert shown() == ["a"]
        assert not model.flags(model.index(0)) & Qt.ItemFlag.ItemIsDragEnabled
        assert not model.canDropMimeData(beta_drag, move, -1, 0, model.index(0))
        history.close()


class TestPresets:
    """`llamachat.ui.views.presets`: system prompt presets, their picker and editor."""

    def test_chrome_window_preset_switch_changes_the_system_message_sent(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Choosing a preset (or a custom prompt) changes the system message the router receives."""

        window, history = chat_window()
        Prompts(tmp_path / "prompts").save("Pirate", "Answer like a pirate.")
        window.preset_picker.reload()
        presets = window.preset_picker.combo
        assert presets.accessibleName() == "Prompt preset"
        _send(qtbot, window, "first")
        assert (
            router.chat_requests()[-1]
            .json["messages"][0]["content"]
            .startswith("You are a helpful assistant.")
        )

        presets.setCurrentIndex(presets.findData("Pirate"))
        _send(qtbot, window, "second")
        system = router.chat_requests()[-1].json["messages"][0]
        assert system == {"role": "system", "content": "Answer like a pirate."}
        assert history.get_session(window.session_id)["prompt_name"] == "Pirate"

        window.preset_picker.set_custom("Only answer in haiku.")
        _send(qtbot, window, "third")
        assert router.chat_requests()[-1].json["messages"][0]["content"] == "Only answer in haiku."
        session = history.get_session(window.session_id)
        assert (session["prompt_name"], session["prompt_custom"]) == (
            "Pirate",
            "Only answer in haiku.",
        )

        window.new_session()
        assert window.preset_picker.custom_text() == ""
        _send(qtbot, window, "fresh")
        assert router.chat_requests()[-1].json["messages"][0]["content"] == "Answer like a pirate."
        assert history.get_session(window.session_id)["prompt_name"] == "Pirate"

    def test_presets_switch_emits_the_new_system_text_and_custom_prompt(
        self, qtbot, tmp_path: Path
    ) -> None:

        store = Prompts(tmp_path / "prompts")
        store.ensure_default()
        store.save("Pirate", "Talk like a pirate.")
        picker = PresetPicker(store)
        qtbot.addWidget(picker)
        assert picker.combo.accessibleName() == "Prompt preset"
        assert picker.names() == [DEFAULT_NAME, "Pirate"]
        assert picker.system_text() == DEFAULT_TEXT
        got: list[tuple] = []
        picker.preset_changed.connect(lambda name, custom: got.append((name, custom)))
        picker.system_text_changed.connect(lambda text: got.append((text,)))
        picker.combo.setCurrentIndex(picker.combo.findData("Pirate"))
        assert got == [("Pirate", ""), ("Talk like a pirate.",)]
        with qtbot.waitSignal(picker.system_text_changed) as text:
            picker.set_custom("Answer only in haiku.")
        assert text.args == ["Answer only in haiku."]
        assert (picker.current_name(), picker.custom_text()) == ("Pirate", "Answer only in haiku.")
        assert picker.combo.currentText() == CUSTOM_LABEL
        with qtbot.waitSignal(picker.preset_changed) as back:
            picker.combo.setCurrentIndex(picker.combo.findData(DEFAULT_NAME))
        assert back.args == [DEFAULT_NAME, ""]
        with qtbot.assertNotEmitted(picker.preset_changed):
            picker.set_session_prompt("Pirate", "")
        assert picker.combo.currentText() == "Pirate"
        assert picker.system_text() == "Talk like a pirate."

    @offscreen_limits
    def test_presets_editor_creates_edits_renames_and_deletes(self, qtbot, tmp_path: Path) -> None:

        store = Prompts(tmp_path / "prompts")
        store.ensure_default()
        store.save("Pirate", "Talk like a pirate.")
        picker = PresetPicker(store)
        qtbot.addWidget(picker)
        picker.select("Pirate")
        editor = picker.edit_presets()
        assert editor.current() == "Pirate"
        editor.editor.setPlainText("Arr, matey.")
        with qtbot.waitSignal(picker.preset_changed) as renamed:
            assert editor.rename("Corsair") is True
        assert renamed.args == ["Corsair", ""]
        assert store.names() == ["Corsair", "Default"]
        assert store.get("Corsair") == "Arr, matey."
        assert editor.add("Terse", "Be terse.") is True and editor.current() == "Terse"
        assert editor.add("Terse") is False
        assert "already exists" in editor.message.text()
        assert editor.add("a/b") is False and "cannot contain" in editor.message.text()
        assert editor.delete() is True
        assert store.names() == ["Corsair", "Default"]
        editor.select("Corsair")
        editor.editor.selectAll()
        editor.editor.insertPlainText("Yo ho ho.")
        with qtbot.waitSignal(picker.system_text_changed) as changed:
            editor.reject()
            editor.unsaved.button(QMessageBox.StandardButton.Save).click()
        assert changed.args == ["Yo ho ho."]
        assert picker.names() == ["Corsair", "Default"]

    @offscreen_dialogs
    def test_presets_editor_asks_before_closing_with_unsaved_edits(
        self, qtbot, tmp_path: Path
    ) -> None:

        store = Prompts(tmp_path / "prompts")
        store.ensure_default()
        store.save("Pirate", "Talk like a pirate.")
        picker = PresetPicker(store)
        qtbot.addWidget(picker)
        editor = picker.edit_presets()
        editor.select("Pirate")
        editor.editor.selectAll()
        editor.editor.insertPlainText("Arr.")
        editor.reject()
        assert editor.isVisible() and editor.unsaved is not None
        assert editor.unsaved.text() == "The preset “Pirate” has changes that are not saved."
        editor.unsaved.button(QMessageBox.StandardButton.Cancel).click()
        assert editor.isVisible() and editor.unsaved is None
        assert store.get("Pirate") == "Talk like a pirate."
        assert editor.editor.toPlainText() == "Arr."
        editor.reject()
        editor.unsaved.button(QMessageBox.StandardButton.Discard).click()
        assert not editor.isVisible()
        assert store.get("Pirate") == "Talk like a pirate."

        editor = picker.edit_presets()
        editor.select("Pirate")
        editor.editor.selectAll()
        editor.editor.insertPlainText("Yo ho.")
        editor.reject()
        editor.unsaved.button(QMessageBox.StandardButton.Save).click()
        assert not editor.isVisible() and store.get("Pirate") == "Yo ho."

        editor = picker.edit_presets()
        editor.select("Pirate")
        editor.reject()
        assert editor.unsaved is None and not editor.isVisible()


class TestMeter:
    """`llamachat.ui.views.meter`: the context meter."""

    def test_chrome_window_meter_shows_context_use_after_a_reply(
        self, chat_window, router, qtbot
    ) -> None:
        """The meter shows the next request's tokens of the model's context (the chat so far,
        counted by the server); new and reopened chats show their own."""

        window, _history = chat_window()
        meter = window.meter
        qtbot.waitUntil(lambda: meter.context_size() == 4096)
        qtbot.waitUntil(lambda: window.chat.context.breakdown().exact)
        empty = meter.used()
        router.script(Reply(content="A short answer."))
        _send(qtbot, window, "measure me")
        first = window.session_id
        qtbot.waitUntil(lambda: window.chat.context.breakdown().exact)
        used = meter.used()
        assert used > empty
        assert meter.label.text() == f"{used:,} / 4,096"
        assert "test-model" in meter.toolTip() and "earlier messages" in meter.toolTip()
        window.composer.set_text("x " * 14_000)
        assert meter.will_overflow() and meter.state == "over"
        window.composer.clear()

        window.new_session()
        qtbot.waitUntil(lambda: meter.used() == empty)
        window.open_session(first)
        qtbot.waitUntil(lambda: meter.used() == used)

    @offscreen_popup
    def test_chrome_window_skill_list_and_parameters_open_upward_on_screen(
        self, chat_window, qtbot
    ) -> None:

        window, _history = chat_window()
        window.resize(720, 560)
        screen = window.screen().availableGeometry()
        editor = _by_name(window, QPlainTextEdit, "Message")
        popup = window.composer.completer.popup()
        qtbot.keyClicks(editor, "/")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        top = editor.mapToGlobal(QPoint(0, 0)).y()
        shown = QRect(popup.mapToGlobal(QPoint(0, 0)), popup.size())
        assert shown.bottom() < top and screen.contains(shown)
        assert shown.left() == editor.mapToGlobal(QPoint(0, 0)).x()
        qtbot.keyClick(editor, Qt.Key.Key_Escape)

        button = window.chat_params.button
        menu = button.menu()
        # Where the tool button puts its menu: under itself.
        menu.popup(button.mapToGlobal(button.rect().bottomLeft()))
        qtbot.waitUntil(menu.isVisible)
        shown = menu.geometry()
        assert shown.bottom() < button.mapToGlobal(QPoint(0, 0)).y()
        assert screen.contains(shown)
        menu.hide()

    def test_meter_shows_usage_of_the_models_context_and_warns_before_overflow(
        self,
        qtbot,
    ) -> None:

        with ScriptedRouter([Model("qwen", "loaded", n_ctx=4096), Model("smol", n_ctx=2048)]) as r:
            registry = _chrome_registry(r.url)
            meter = ContextMeter(registry)
            qtbot.addWidget(meter)
            assert meter.accessibleName() == "Context meter"
            meter.set_model("qwen")
            qtbot.waitUntil(lambda: meter.context_size() == 4096)
            meter.update_from_stats({"usage": {"total_tokens": 1000}, "timings": {}})
            assert meter.used() == 1000 and meter.label.text() == "1,000 / 4,096"
            assert "Context of qwen: 1,000 of 4,096 tokens used" in meter.toolTip()
            meter.set_draft("x" * 10_000)
            assert not meter.will_overflow() and meter.warning() == ""
            meter.set_draft("x" * 11_000)
            assert meter.will_overflow()
            assert "may not fit" in meter.label.text()
            assert meter.toolTip().startswith("The next message may not fit: qwen's context")
            meter.update_from_stats({"timings": {"cache_n": 100, "prompt_n": 20, "predicted_n": 5}})
            assert meter.used() == 125
            meter.set_model("smol")
            qtbot.waitUntil(lambda: tasks.manager().running() == 0)
            assert meter.context_size() is None and "smol" in meter.toolTip()
            props = [q for q in r.requests if q.path == "/props"]
            assert [q.query for q in props] == [
                {"model": "qwen", "autoload": "false"},
                {"model": "smol", "autoload": "false"},
            ]
            assert r.status("smol") == "unloaded"
            registry.close()


class TestModelPicker:
    """`llamachat.ui.models`: the model picker, its statuses and loads."""

    def test_chrome_window_model_statuses_shown_and_load_driven_from_picker(
        self, chat_window, router, qtbot
    ) -> None:
        """The window's picker shows each model's status; choosing an unloaded one loads it."""

        _chrome_models(router, Model("smol", "unloaded", modalities=("text", "image")))
        router.load_delay = 0.4
        window, history = chat_window()
        combo = window.model_picker.combo
        qtbot.waitUntil(lambda: _combo_ids(combo) == ["test-model", "smol"])
        assert [combo.itemText(i) for i in range(2)] == ["● test-model", "○ smol"]
        assert window.current_model() == "test-model"
        assert not any(q.path == "/models/load" for q in router.requests)

        combo.setCurrentIndex(combo.findData("smol"))
        assert window.current_model() == "smol"
        assert window.meter.model() == "smol"
        assert window.model_picker.status("smol") == "loading"
        assert window.model_picker.status_label.text() == "Loading…"
        assert window.model_picker.status_label.toolTip() == "Loading smol…"
        qtbot.waitUntil(lambda: window.model_picker.status("smol") == "loaded", timeout=10_000)
        assert combo.itemText(combo.findData("smol")) == "● smol"
        # Counting the meter's tokens never loads a model: only the picker does.
        counting = ("/tokenize", "/apply-template")
        assert [
            (q.path, q.json)
            for q in router.requests
            if q.method == "POST" and q.path not in counting
        ] == [("/models/load", {"model": "smol"})]
        assert all(
            q.query.get("autoload") == "false" for q in router.requests if q.path in counting
        )
        _send(qtbot, window, "hello")
        assert router.chat_requests()[-1].json["model"] == "smol"
        assert history.get_session(window.session_id)["model"] == "smol"

    def test_chrome_window_failed_load_shows_servers_message_and_retry_loads(
        self, chat_window, router, qtbot
    ) -> None:
        """A load that fails shows the server's message beside the picker; Retry loads again."""

        _chrome_models(router, Model("broken", fail_exit_code=1))
        window, _history = chat_window()
        picker = window.model_picker
        qtbot.waitUntil(lambda: "broken" in _combo_ids(picker.combo))
        picker.combo.setCurrentIndex(picker.combo.findData("broken"))
        qtbot.waitUntil(lambda: picker.status("broken") == "failed", timeout=10_000)
        # The router's status event can say "failed" before the load request's own answer
        # (which names the model) arrives: the label shows the event's words until then.
        qtbot.waitUntil(
            lambda: (
                picker.status_label.text()
                == "broken failed to load: model 'broken' failed to load (exit code 1)"
            ),
            timeout=10_000,
        )
        assert picker.combo.itemText(picker.combo.findData("broken")) == "⚠ broken"
        retry = _by_name(window, QToolButton, "Retry model")
        router.models["broken"].fail_exit_code = None
        qtbot.mouseClick(retry, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: picker.status("broken") == "loaded", timeout=10_000)
        assert picker.status_label.isHidden() and picker.retry_button.isHidden()

    def test_model_picker_shows_statuses_and_loads_a_chosen_model(self, qtbot) -> None:

        models = [Model("qwen", "loaded", modalities=("text", "image")), Model("smol")]
        with ScriptedRouter(models, load_delay=0.5) as r:
            registry = _chrome_registry(
                r.url, ProviderConfig("cloud", "http://127.0.0.1:9", models=("big",))
            )
            picker = ModelPicker(registry, poll_ms=100)
            qtbot.addWidget(picker)
            assert picker.combo.accessibleName() == "Model"
            qtbot.waitUntil(lambda: picker.combo.count() == 4)
            texts = [picker.combo.itemText(i) for i in range(picker.combo.count())]
            assert texts == ["● qwen", "○ smol", "", "cloud/big"]
            assert picker.current_model() == "qwen"
            assert picker.modalities("qwen") == ("text", "image")
            assert picker.unload_button.isVisibleTo(picker) and picker.busy.isHidden()
            qtbot.waitUntil(lambda: len([q for q in r.requests if q.path == "/v1/models"]) >= 3)
            assert r.status("smol") == "unloaded"
            with qtbot.waitSignal(picker.model_changed) as changed:
                picker.combo.setCurrentIndex(picker.combo.findData("smol"))
            assert changed.args == ["smol"]
            assert picker.status("smol") == "loading" and not picker.busy.isHidden()
            assert picker.status_label.text() == "Loading…"
            assert picker.combo.itemText(1) == "◐ smol"
            qtbot.waitUntil(lambda: r.status("smol") == "loading")
            qtbot.waitUntil(lambda: picker.status("smol") == "loaded", timeout=5000)
            assert picker.combo.itemText(1) == "● smol" and picker.busy.isHidden()
            assert picker.status_label.isHidden()
            qtbot.mouseClick(picker.unload_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: picker.combo.itemText(1) == "○ smol")
            assert [(q.path, q.json) for q in r.requests if q.method == "POST"] == [
                ("/models/load", {"model": "smol"}),
                ("/models/unload", {"model": "smol"}),
            ]
            assert {q.path for q in r.requests if q.method == "GET"} - {"/models/sse"} == {
                "/v1/models"
            }
            with qtbot.waitSignal(picker.default_changed) as starred:
                qtbot.mouseClick(picker.star, Qt.MouseButton.LeftButton)
            assert starred.args == ["smol"] and picker.star.text() == "★"
            picker.set_default("qwen")
            assert picker.default_model() == "qwen" and picker.star.text() == "☆"
            with qtbot.assertNotEmitted(picker.model_changed):
                picker.set_current("cloud/big")
            assert picker.combo.currentText() == "cloud/big" and picker.load_button.isHidden()
            picker.shutdown()
            registry.close()

    def test_model_picker_failed_load_shows_the_servers_message_and_retry(self, qtbot) -> None:

        models = [Model("qwen", "loaded"), Model("broken", fail_exit_code=1)]
        # This router answers a doomed load only when it has failed, 1.5 s later.
        with ScriptedRouter(models, load_delay=1.5) as r:
            registry = _chrome_registry(r.url)
            picker = ModelPicker(registry, poll_ms=100)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2)

            def listings() -> int:
                return len([q for q in r.requests if q.path == "/v1/models"])

            picker.combo.setCurrentIndex(picker.combo.findData("broken"))
            before = listings()
            qtbot.waitUntil(lambda: listings() >= before + 3)
            assert picker.status("broken") == "loading"  # statuses kept coming during the load
            qtbot.waitUntil(lambda: picker.status("broken") == "failed")
            # The model event may say "failed" first; the load request's own answer, which
            # says more, then takes its place.
            qtbot.waitUntil(
                lambda: (
                    picker.status_label.text()
                    == "broken failed to load: model 'broken' failed to load (exit code 1)"
                )
            )
            assert picker.retry_button.isVisibleTo(picker)
            assert picker.combo.itemText(1) == "⚠ broken"
            r.models["broken"].fail_exit_code = None
            qtbot.mouseClick(picker.retry_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: picker.status("broken") == "loaded", timeout=10_000)
            assert picker.retry_button.isHidden() and picker.status_label.isHidden()
            assert [q.path for q in r.requests if q.method == "POST"] == ["/models/load"] * 2
            picker.shutdown()
            registry.close()

    def test_model_picker_unreachable_router_says_so_with_retry(self, qtbot) -> None:

        registry = _chrome_registry("http://127.0.0.1:9")
        picker = ModelPicker(registry, current="qwen", poll_ms=60_000)
        qtbot.addWidget(picker)
        qtbot.waitUntil(lambda: "Could not list the models" in picker.status_label.text())
        assert "Cannot reach the server at http://127.0.0.1:9" in picker.status_label.text()
        assert picker.retry_button.isVisibleTo(picker)
        assert picker.combo.currentText() == "qwen"
        picker.shutdown()
        registry.close()

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


class TestSkillsPanel:
    """`llamachat.ui.skills`: the skills panel, chips and the skills folder watcher."""

    @offscreen_dialogs
    def test_chrome_window_skills_panel_imports_good_and_bad_folders_into_a_new_skills_dir(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """With no skills folder yet, `/skills` opens the panel; a good folder imports and works at
        once, a bad one is refused with its reason."""

        fresh = tmp_path / "fresh-skills"
        window, _history = chat_window(skills_dir=fresh)
        assert not window.cfg.skills_enabled
        good = tmp_path / "incoming" / "haiku"
        good.mkdir(parents=True)
        (good / "SKILL.md").write_text(
            "---\nname: haiku\ndescription: Write answers as haiku.\n---\nThree lines: 5, 7, 5.\n",
            encoding="utf-8",
        )
        bad = tmp_path / "incoming-bad" / "Bad Name"
        bad.mkdir(parents=True)
        (bad / "SKILL.md").write_text("no front matter at all\n", encoding="utf-8")

        _type(qtbot, window, "/skills")
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
        panel = _by_name(window, QDialog, "Skills")
        assert router.chat_requests() == [] and window.composer.text() == ""
        assert panel.skill_names() == []

        assert panel.import_folder(good) == [fresh / "haiku"]
        assert panel.message_text().startswith("Imported: haiku")
        assert panel.skill_names() == ["haiku"]
        assert panel.import_folder(bad.parent) == []
        assert "Not imported:" in panel.message_text() and "Bad Name" in panel.message_text()
        assert sorted(p.name for p in fresh.iterdir()) == ["haiku"]
        assert panel.import_folder(good) == []
        assert "already" in panel.message_text()

        panel.tree.setCurrentItem(panel.tree.topLevelItem(0))
        qtbot.mouseClick(_by_name(panel, QPushButton, "Load skill"), Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == ["haiku"]
        assert panel.tree.topLevelItem(0).text(4) == "loaded"
        panel.close()
        _send(qtbot, window, "tell me about autumn")
        sent = router.chat_requests()[-1].json
        assert sent["messages"][0]["content"].endswith("[skill: haiku]\nThree lines: 5, 7, 5.")
        assert any(t["function"]["name"] == "load_skill" for t in sent.get("tools", []))

    @offscreen_dialogs
    def test_chrome_window_skill_written_to_disk_appears_without_restart(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A SKILL.md written while the window is open reaches the `/` completion and the panel."""

        window, _history = chat_window()
        completions = window.composer.completer.model()

        def offered() -> list[str]:
            return [
                completions.index(row, 0).data(Qt.ItemDataRole.UserRole)
                for row in range(completions.rowCount())
            ]

        assert offered() == ["finance-cli", "skills", "weather"]
        panel = window.skills.open_panel()
        _write_skill(
            tmp_path / "skills",
            "gardening",
            "---\nname: gardening\ndescription: When to plant what.\n---\nPlant after frost.\n",
        )
        qtbot.waitUntil(lambda: "gardening" in offered(), timeout=5000)
        qtbot.waitUntil(lambda: "gardening" in panel.skill_names(), timeout=5000)
        panel.close()
        _send(qtbot, window, "/gardening tomatoes?")
        assert window.loaded_skills() == ["gardening"]

    def test_skill_chips_are_kept_when_only_their_counts_change(self, qtbot) -> None:
        """A count that comes in updates the chips' tooltips; the buttons stay (one may be
        under the pointer), and a changed list builds them again."""
        from llamachat.ui.views.chips import SkillChips

        chips = SkillChips()
        qtbot.addWidget(chips)
        chips.show()
        chips.set_skills(["pdf", "gone"], frozenset({"gone"}))
        # A chip added to a shown row is shown from the event loop.
        qtbot.waitUntil(lambda: all(b.isVisible() for b in chips.findChildren(QPushButton)))
        pdf = _by_name(chips, QPushButton, "Unload skill pdf")
        gone = _by_name(chips, QPushButton, "Remove missing skill gone")
        chips.set_skills(["pdf", "gone"], frozenset({"gone"}), {"pdf": 1230})
        assert _by_name(chips, QPushButton, "Unload skill pdf") is pdf
        assert "~1,230 tokens" in pdf.toolTip()
        assert _by_name(chips, QPushButton, "Remove missing skill gone") is gone
        assert gone.font().strikeOut()
        chips.set_skills(["pdf"])
        assert chips.skills() == ["pdf"] and chips.missing() == []
        qtbot.waitUntil(lambda: _by_name(chips, QPushButton, "Unload skill pdf") is not pdf)

    def test_skills_panel_lists_skills_problems_and_imports_a_good_and_a_bad_folder(
        self, qtbot, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        _chrome_skill(root, "alpha", "Alpha things.")
        _chrome_skill(root, "broken")
        loaded: list[str] = []
        panel = SkillsPanel(SkillStore(root), lambda: list(loaded), import_dir=root)
        qtbot.addWidget(panel)
        panel.load_requested.connect(loaded.append)
        assert panel.accessibleName() == "Skills"
        assert panel.skill_names() == ["alpha"]
        first = panel.tree.topLevelItem(0)
        assert [first.text(c) for c in range(5)] == ["alpha", "Alpha things.", str(root), "", ""]
        assert [t for t in panel.problem_texts() if "broken" in t] == [
            t for t in panel.problem_texts() if "has no `description:`" in t
        ]
        assert len(panel.problem_texts()) == 1
        panel.tree.setCurrentItem(first)
        qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
        assert loaded == ["alpha"] and panel.tree.topLevelItem(0).text(4) == "loaded"
        assert panel.unload_button.isEnabled() and not panel.load_button.isEnabled()

        incoming = tmp_path / "incoming"
        _chrome_skill(incoming, "beta", "Beta things.")
        _chrome_skill(incoming, "gamma")
        imported = panel.import_folder(incoming)
        assert imported == [root / "beta"]
        assert panel.skill_names() == ["alpha", "beta"]
        assert panel.message_text().startswith("Imported: beta\nNot imported:\n• ")
        assert "gamma" in panel.message_text() and "has no `description:`" in panel.message_text()
        assert not (root / "gamma").exists()
        (root / "beta" / "SKILL.md").write_text(
            "---\nname: beta\ndescription: Mine.\n---\nkeep\n", encoding="utf-8"
        )
        assert panel.import_folder(incoming / "beta") == []
        assert "already exists and is never overwritten" in panel.message_text()
        assert "Mine." in (root / "beta" / "SKILL.md").read_text(encoding="utf-8")

    def test_skills_panel_shows_a_skill_written_to_disk_without_restart(
        self, qtbot, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        _chrome_skill(root, "alpha", "Alpha things.")
        extra = tmp_path / "not-yet"
        store = SkillStore([root, extra])
        watcher = SkillsWatcher(store)
        panel = SkillsPanel(store, list, import_dir=root, watcher=watcher)
        qtbot.addWidget(panel)
        assert panel.skill_names() == ["alpha"]
        with qtbot.waitSignal(watcher.changed, timeout=5000):
            _chrome_skill(root, "delta", "Delta things.")
        qtbot.waitUntil(lambda: panel.skill_names() == ["alpha", "delta"], timeout=5000)
        (root / "delta" / "SKILL.md").write_text(
            "---\nname: delta\ndescription: Edited.\n---\nx\n", encoding="utf-8"
        )
        qtbot.waitUntil(lambda: panel.tree.topLevelItem(1).text(1) == "Edited.", timeout=5000)
        _chrome_skill(extra, "omega", "From a folder created later.")
        qtbot.waitUntil(lambda: "omega" in panel.skill_names(), timeout=5000)
        (root / "alpha" / "SKILL.md").unlink()
        qtbot.waitUntil(lambda: panel.skill_names() == ["delta", "omega"], timeout=5000)


class TestCli:
    """`llamachat.cli`: `llamachat ask --print`."""

    def test_cli_print_writes_exactly_the_content_to_stdout_and_reasoning_to_stderr(
        self, router, tmp_path
    ) -> None:
        """`ask --print` streams the router's content pieces byte for byte, then a line break
        (even into a pipe: a shell prompt or the next `>>` line follows); reasoning on stderr."""

        config = _quick_config_file(tmp_path, router.url)
        pieces = ["The ", "answer", " is **4**.\n", "```py\nprint(2 + 2)\n```"]
        router.script(Reply(reasoning=["Two ", "and two."], content=pieces))
        done = _llamachat(config, "ask", "--print", "what", "is", "2+2?")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "".join(pieces) + "\n"
        assert done.stderr == "Two and two."
        sent = router.chat_requests()[-1].json
        assert sent["stream"] is True and sent["messages"][-1] == {
            "role": "user",
            "content": "what is 2+2?",
        }

    def test_cli_print_no_reasoning_hides_it_and_uses_the_model_asked_for(
        self, router, tmp_path
    ) -> None:
        """--no-reasoning leaves stderr empty; --model picks the model the request names."""

        router.models["other-model"] = Model("other-model", "loaded")
        config = _quick_config_file(tmp_path, router.url, 'oneshot_model = "test-model"\n')
        router.script(Reply(reasoning=["hidden"], content=["shown"]))
        done = _llamachat(
            config, "ask", "--print", "--no-reasoning", "--model", "other-model", "hi"
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "shown\n", "")
        assert router.chat_requests()[-1].json["model"] == "other-model"

    def test_cli_print_saves_a_searchable_oneshot_session_without_skills(
        self, router, tmp_path
    ) -> None:
        """The exchange is kept as a "oneshot" session that search finds; its skills stay empty."""

        config = _quick_config_file(tmp_path, router.url)
        router.script(Reply(content=["Paris ", "it is."]))
        done = _llamachat(config, "ask", "--print", "/weather capital of France")
        assert done.returncode == 0, done.stderr
        with History(tmp_path / "history.db") as history:
            (session,) = history.list_sessions()
            assert session["mode"] == "oneshot" and session["skills"] == []
            assert [
                (m["role"], m["content"], m["status"]) for m in history.messages(session["id"])
            ] == [
                ("user", "capital of France", "complete"),
                ("assistant", "Paris it is.", "complete"),
            ]
            assert [hit["id"] for hit in history.search("France")] == [session["id"]]

    def test_cli_print_skill_command_and_mention_load_skills_for_that_reply(
        self, router, tmp_path
    ) -> None:
        """`/weather` is stripped and loads its skill, a mention loads another, into the system text."""
        config = _quick_config_file(tmp_path, router.url)
        done = _llamachat(config, "ask", "--print", "/weather will it rain? ask finance-cli too")
        assert done.returncode == 0, done.stderr
        system, user = router.chat_requests()[-1].json["messages"]
        assert user["content"] == "will it rain? ask finance-cli too"
        assert system["role"] == "system"
        assert system["content"].endswith(
            _quick_part(tmp_path, "weather") + "\n\n" + _quick_part(tmp_path, "finance-cli")
        )

    def test_cli_print_appends_piped_stdin_in_a_fenced_block(self, router, tmp_path) -> None:
        """`git diff | llamachat ask --print "review this"`: the question, then stdin fenced."""
        config = _quick_config_file(tmp_path, router.url)
        diff = "diff --git a/x b/x\n+```\n+added\n"
        done = _llamachat(config, "ask", "--print", "review this", stdin=diff)
        assert done.returncode == 0, done.stderr
        expected = "review this\n\n````\n" + diff + "````"
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == expected
        assert done.stdout == "echo: " + expected + "\n"

    def test_cli_print_unreachable_router_exits_1_with_the_message(self, tmp_path) -> None:
        """No router: exit code 1, nothing on stdout, stderr says where it looked and what to do."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
        config = _quick_config_file(tmp_path, dead, 'default_model = "m"\n')
        done = _llamachat(config, "ask", "--print", "hello")
        assert done.returncode == 1
        assert done.stdout == ""
        assert "Cannot reach the server at " + dead in done.stderr

    def test_cli_print_router_without_models_exits_1_saying_so(self, tmp_path) -> None:
        """A router listing no model: exit 1 and a message naming the router."""

        with ScriptedRouter(models=[]) as empty:
            config = _quick_config_file(tmp_path, empty.url)
            done = _llamachat(config, "ask", "--print", "hello")
        assert done.returncode == 1
        assert f"The router at {empty.url} offers no models" in done.stderr

    def test_cli_print_error_mid_stream_keeps_the_partial_answer_and_exits_1(
        self, router, tmp_path
    ) -> None:
        """An error chunk mid-reply: what arrived is on stdout, the error on stderr, exit 1."""

        config = _quick_config_file(tmp_path, router.url)
        router.script(
            Reply(
                content=["Part ", "one ", "two"],
                error_after=3,
                error={"type": "server_error", "message": "the GPU fell over"},
            )
        )
        done = _llamachat(config, "ask", "--print", "go")
        assert done.returncode == 1
        assert done.stdout == "Part one \n"
        assert "the GPU fell over" in done.stderr
        with History(tmp_path / "history.db") as history:
            (session,) = history.list_sessions()
            reply = history.messages(session["id"])[-1]
            assert (reply["content"], reply["status"]) == ("Part one ", "error")
            assert "the GPU fell over" in reply["error"]

    def test_cli_print_history_that_cannot_be_saved_still_prints_the_answer(
        self, router, tmp_path
    ) -> None:
        """A history that cannot be opened costs a warning, never the answer. (A history_path
        under a file is a config error; a link to such a place fails only at opening.)"""

        blocker = tmp_path / "not-a-folder"
        blocker.write_text("a file where the history's folder should be")
        config = _quick_config_file(tmp_path, router.url)
        (tmp_path / "history.db").symlink_to(blocker / "history.db")
        router.script(Reply(content=["still ", "here"]))
        done = _llamachat(config, "ask", "--print", "hello")
        assert (done.returncode, done.stdout) == (0, "still here\n")
        assert "not saved in the history" in done.stderr

    def test_cli_print_tells_skill_problems_once_per_change(self, router, tmp_path) -> None:
        """A broken skill is warned about on the first `ask --print`, not again while the
        problems stay the same; a new problem is told; --debug shows them every time."""
        config = _quick_config_file(tmp_path, router.url)
        broken = tmp_path / "skills" / "broken"
        broken.mkdir()
        (broken / "SKILL.md").write_text("no frontmatter here\n", encoding="utf-8")
        first = _llamachat(config, "ask", "--print", "hi")
        assert first.returncode == 0, first.stderr
        assert "skill problem" in first.stderr and str(broken) in first.stderr
        again = _llamachat(config, "ask", "--print", "hi")
        assert (again.returncode, again.stdout, again.stderr) == (0, "echo: hi\n", "")
        debug = _llamachat(config, "--debug", "ask", "--print", "hi")
        assert str(broken) in debug.stderr
        other = tmp_path / "skills" / "other"
        other.mkdir()
        (other / "SKILL.md").write_text("---\nname: other\n---\nno description\n", encoding="utf-8")
        changed = _llamachat(config, "ask", "--print", "hi")
        assert changed.returncode == 0 and str(other) in changed.stderr

    def test_cli_print_with_nothing_to_ask_exits_2(self, router, tmp_path) -> None:
        """No question and no stdin: exit 2 with a hint; a lone `/skill` is not a question either."""
        config = _quick_config_file(tmp_path, router.url)
        empty = _llamachat(config, "ask", "--print")
        assert empty.returncode == 2 and "Nothing to ask" in empty.stderr
        lone = _llamachat(config, "ask", "--print", "/weather")
        assert lone.returncode == 2 and "weather" in lone.stderr
        assert router.chat_requests() == []

    def test_cli_print_never_imports_qt(self, router, tmp_path) -> None:
        """The terminal path answers without loading PySide6 (it runs with no display)."""

        config = _quick_config_file(tmp_path, router.url)
        code = (
            "import sys\n"
            "from llamachat.__main__ import main\n"
            f"rc = main(['--config', {str(config)!r}, 'ask', '--print', 'hi'])\n"
            "qt = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6')))\n"
            "sys.stderr.write('QT=' + ','.join(qt))\n"
            "sys.exit(rc)\n"
        )
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == "echo: hi\n"
        assert done.stderr.endswith("QT=")

    def test_cli_print_sends_the_turn_the_builder_makes_byte_for_byte(
        self, router, tmp_path
    ) -> None:
        """`ask --print` sends the one builder's Turn as built: skills, tools, parameters and
        llama.cpp's progress fields, byte for byte."""

        path = _quick_config_file(tmp_path, router.url)
        done = _llamachat(path, "ask", "--print", "/weather will it rain?")
        assert done.returncode == 0, done.stderr
        sent = router.chat_requests()[-1]
        cfg = config.load(path)
        client = Client(router.url)
        n_ctx, _trained = Models(client).context_limits(sent.json["model"])
        client.close()
        expected = turn.oneshot_turn(
            cfg,
            model=sent.json["model"],
            text="will it rain?",
            names=["weather"],
            store=turn.skill_store(cfg),
            n_ctx=n_ctx,
        )
        assert expected.params["return_progress"] is True and expected.tools
        assert sent.body == httpx.Request("POST", router.url, json=expected.body()).content

    def test_cli_print_to_a_terminal_shows_control_characters_and_raw_keeps_them(
        self, router, tmp_path
    ) -> None:
        """OSC 52, OSC 0, CSI 2J, BEL and NUL from the model, even cut between pieces, reach
        a terminal as visible symbols (answer and reasoning); --raw and a pipe get them as sent."""

        import pty
        import tty

        from llamachat.cli import visible_controls

        config = _quick_config_file(tmp_path, router.url)
        answer = ["Done \x1b]52;c;cm0gLXJmIH4=", "\x07 \x1b]0;pwned\x07", "\x1b[2J\x00\tok\n"]
        thought = ["think \x1b]0;t", "itle\x07\x1b[2J\x00"]
        hostile = "".join(answer)

        def on_terminal(*args: str) -> tuple[bytes, bytes]:
            masters, slaves = zip(*(pty.openpty() for _ in range(2)), strict=True)
            for slave in slaves:
                tty.setraw(slave)  # no \n -> \r\n: the bytes as the program wrote them
            router.script(Reply(reasoning=thought, content=answer))
            process = subprocess.Popen(
                [sys.executable, "-m", "llamachat", "--config", str(config), "ask", "--print"]
                + list(args),
                stdin=subprocess.DEVNULL,
                stdout=slaves[0],
                stderr=slaves[1],
                env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
            )
            for slave in slaves:
                os.close(slave)
            assert process.wait(60) == 0
            read = []
            for master in masters:
                chunks = []
                while True:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # EIO: the terminal's other end is closed and drained
                        break
                    if not chunk:
                        break
                    chunks.append(chunk)
                os.close(master)
                read.append(b"".join(chunks))
            return read[0], read[1]

        out, err = on_terminal("why?")
        assert out.decode() == visible_controls(hostile)
        assert err.decode().startswith(visible_controls("".join(thought)))
        for control in (b"\x1b", b"\x07", b"\x00"):
            assert control not in out and control not in err
        assert "\t" in out.decode() and "\u241b]52;c;" in out.decode()

        out, err = on_terminal("--raw", "why?")
        assert out.decode() == hostile and err.decode().startswith("".join(thought))

        router.script(Reply(reasoning=thought, content=answer))
        piped = _llamachat(config, "ask", "--print", "why?")
        assert (piped.returncode, piped.stdout) == (0, hostile), piped.stderr
        assert piped.stderr == "".join(thought)

    def test_cli_print_overflow_compacts_or_trims_the_input_or_refuses(
        self, router, tmp_path
    ) -> None:
        """`ask --print --overflow`: a piped input too long for the context is summarized in
        pieces (the question its focus) or loses its first lines (said on stderr), and the
        request fits; refuse (and the default "ask": nobody to ask) sends nothing, exit 2."""

        router.models["test-model"].n_ctx = 2048
        cfg = Config(
            router_url=router.url,
            default_model="test-model",
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            skills_dir=tmp_path / "skills",
            search_enabled=False,
        )
        piped = tmp_path / "input.txt"
        piped.write_text("".join(f"line {n} " + "word " * 20 + "\n" for n in range(300)))
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)

        def ask(*flags: str) -> tuple[int, str, str]:
            out, err = io.StringIO(), io.StringIO()
            with piped.open(encoding="utf-8") as stdin:
                args = parser.parse_args(["--print", *flags, "what", "is", "this?"])
                code = cli.run(args, cfg, stdin=stdin, stdout=out, stderr=err)
            return code, out.getvalue(), err.getvalue()

        for flags in ((), ("--overflow", "refuse")):
            code, _out, err = ask(*flags)
            assert code == 2 and "Not sent" in err and not router.chat_requests()

        code, _out, err = ask("--overflow", "trim")
        assert code == 0, err
        sent = router.chat_requests()[-1].json
        question = sent["messages"][-1]["content"]
        assert "earlier lines not sent]" in question and "line 299 " in question
        assert "line 0 " not in question and "of the input not sent" in err
        assert _prompt_tokens(sent) <= 2048 - 512

        before = len(router.chat_requests())
        router.script(*[Reply(content="Lines about words.") for _ in range(20)])
        code, _out, err = ask("--overflow", "compact")
        assert code == 0, err
        requests = [r.json for r in router.chat_requests()[before:]]
        assert len(requests) > 2 and "compacting the input: part 2 of" in err
        summarizing, asked = requests[:-1], requests[-1]
        assert all(
            r["messages"][0]["content"].startswith(compact.SUMMARY_PROMPT) for r in summarizing
        )
        assert all(r["messages"][0]["content"].endswith("what is this?") for r in summarizing)
        assert asked["messages"][-1]["content"].startswith("what is this?")
        assert "Lines about words." in asked["messages"][-1]["content"]
        assert all(_prompt_tokens(r) + r.get("max_tokens", 512) <= 2048 for r in requests)

    def test_install_desktop_writes_the_entry_icon_and_autostart_and_uninstall_removes_all(
        self, tmp_path, capsys, monkeypatch
    ) -> None:
        """--install-desktop writes a valid menu entry (New chat, Quick ask), the icon as SVG
        and PNGs, and with autostart = true a login entry, all under $XDG_DATA_HOME /
        $XDG_CONFIG_HOME; --uninstall-desktop leaves nothing behind."""
        from llamachat.ui.desktop import entry

        data, settings = tmp_path / "data", tmp_path / "settings"
        monkeypatch.setenv("XDG_DATA_HOME", str(data))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(settings))
        path = tmp_path / "my config.toml"
        path.write_text("autostart = true\n")
        assert main(["--config", str(path), "--install-desktop"]) == 0
        program = entry.launcher()[0]
        assert Path(program).is_absolute() and os.access(program, os.X_OK)
        run = f'{program} --config "{path}"'
        menu = data / "applications" / "llamachat.desktop"
        assert menu.read_text() == (
            "[Desktop Entry]\n"
            "Type=Application\n"
            "Version=1.4\n"
            "Name=llamachat\n"
            "GenericName=Local AI chat\n"
            "Comment=Chat with the models you run yourself with llama.cpp\n"
            "Icon=llamachat\n"
            f"Exec={run}\n"
            "Terminal=false\n"
            "StartupNotify=true\n"
            "Categories=Utility;\n"
            "Keywords=llama;llama.cpp;LLM;AI;assistant;\n"
            "Actions=new-chat;quick-ask;\n"
            "\n"
            "[Desktop Action new-chat]\n"
            "Name=New chat\n"
            f"Exec={run} --new-chat\n"
            "\n"
            "[Desktop Action quick-ask]\n"
            "Name=Quick ask\n"
            f"Exec={run} ask\n"
        )
        login = settings / "autostart" / "llamachat.desktop"
        assert f"Exec={run} --background\n" in login.read_text()
        validate = shutil.which("desktop-file-validate")
        if validate:  # Debian's desktop-file-utils, where installed
            for written in (menu, login):
                done = subprocess.run(
                    [validate, str(written)], capture_output=True, text=True, check=False
                )
                assert (done.returncode, done.stdout) == (0, ""), done.stdout
        theme = data / "icons" / "hicolor"
        assert (theme / "scalable/apps/llamachat.svg").read_bytes() == entry.icon.SVG.read_bytes()
        for size in entry.icon.PNG_SIZES:
            picture = QImage(str(theme / f"{size}x{size}/apps/llamachat.png"))
            assert (picture.width(), picture.height()) == (size, size)
        assert str(menu) in capsys.readouterr().out

        assert main(["--config", str(path), "--uninstall-desktop"]) == 0
        assert list(data.rglob("*")) == []
        assert not (settings / "autostart").exists()
        assert main(["--config", str(path), "--uninstall-desktop"]) == 0
        assert "nothing to remove" in capsys.readouterr().out

    def test_desktop_exec_line_quotes_as_the_specification_says(self) -> None:
        """An Exec argument with reserved characters is quoted, its \\ " ` $ escaped, % doubled,
        and the value's backslashes escaped once more; a plain argument stays bare."""
        from llamachat.ui.desktop.entry import exec_line

        assert exec_line(["/opt/llamachat/llamachat", "ask"]) == "/opt/llamachat/llamachat ask"
        assert exec_line(["/opt/llama chat/llamachat", "--config", 'a"b$c\\d%e', "50%"]) == (
            '"/opt/llama chat/llamachat" --config "a\\\\"b\\\\$c\\\\\\\\d%%e" 50%%'
        )

    def test_fault_ask_print_strips_terminal_escapes_from_server_errors(
        self, router, tmp_path
    ) -> None:
        """A server error carrying OSC/CSI escape sequences and control characters reaches the
        terminal as plain text; the model's own answer is still written byte for byte (then the
        line break every answer ends with)."""

        config = _quick_config_file(tmp_path, router.url)
        hostile = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJm\x07\x1b[2J\x1b[31mboom\x1b[0m\rover\x9b2J\x00"
        router.script(Reply(status=500, error={"message": hostile}))
        done = _llamachat(config, "ask", "--print", "hi")
        assert done.returncode == 1, done.stderr
        assert "boom" in done.stderr and "over" in done.stderr
        assert not any(c in done.stderr for c in "\x1b\x07\r\x00\x9b"), repr(done.stderr)

        router.script(Reply(content=["\x1b[1mbold\x1b[0m"]))
        done = _llamachat(config, "ask", "--print", "hi")
        assert (done.returncode, done.stdout) == (0, "\x1b[1mbold\x1b[0m\n")


class TestQtPlatform:
    """`llamachat.qt_platform`: a bare Linux without Qt's libraries."""

    def test_gui_start_without_the_xcb_libraries_says_what_to_install_and_exits_2(
        self, router, tmp_path
    ) -> None:
        """Under X11, libraries the xcb plugin cannot load are listed with what to do, exit 2,
        before Qt is imported; another platform, --version and ask --print skip the check."""

        site = _fake_pyside(tmp_path)
        config = _quick_config_file(tmp_path, router.url)
        env = {
            k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")
        }
        env.update(DISPLAY=":4321", PYTHONPATH=str(site))

        def run(*args: str, **extra: str):
            return subprocess.run(
                [sys.executable, "-m", "llamachat", "--config", str(config), *args],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                env={**env, **extra},
                timeout=60,
                check=False,
            )

        for args in ((), ("ask",)):
            done = run(*args)
            assert done.returncode == 2, done.stderr
            assert "xcb platform plugin) cannot start" in done.stderr
            assert "libQt6Gui.so.6" in done.stderr
            assert "pip install --force-reinstall PySide6" in done.stderr
        assert run(QT_QPA_PLATFORM="offscreen").returncode == 7
        assert run(QT_QPA_PLATFORM="wayland", WAYLAND_DISPLAY="wayland-0").returncode == 7
        assert run("--version").returncode == 0
        printed = run("ask", "--print", "hi")
        assert (printed.returncode, printed.stdout) == (0, "echo: hi\n")

    def test_gui_xcb_advice_names_the_packages_per_system_and_when_it_applies(self) -> None:
        """Missing xcb libraries map to Debian, Fedora and Arch packages; the check applies only
        where Qt would use xcb."""

        advice = qt_platform.install_advice(
            ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-xkb.so.1", "libxcb-randr.so.0"]
        )
        assert "sudo apt install libxcb-icccm4 libxcb-keysyms1 libxcb-xkb1 libxcb-randr0" in advice
        assert "sudo dnf install xcb-util-wm xcb-util-keysyms libxcb\n" in advice
        assert "sudo pacman -S xcb-util-wm xcb-util-keysyms libxcb\n" in advice
        assert "reinstall" not in advice
        assert "libfoo.so.1" in qt_platform.install_advice(["libfoo.so.1"])
        assert qt_platform.uses_xcb({"DISPLAY": ":0"})
        assert qt_platform.uses_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"})
        assert not qt_platform.uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"})
        assert qt_platform.uses_xcb(
            {"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "QT_QPA_PLATFORM": "xcb"}
        )
        assert not qt_platform.uses_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"})
        assert not qt_platform.uses_xcb({})


class TestQuickWindow:
    """`llamachat.ui.quick`: the one-shot quick window."""

    @quick_offscreen
    def test_quick_window_is_a_frameless_on_top_window_with_the_input_focused(
        self, quick, qtbot
    ) -> None:
        """present() shows a frameless, always-on-top window with the focus in "Message"."""

        window, _history = quick(default_model="test-model")
        window.present(QPoint(200, 200))
        qtbot.waitExposed(window)
        flags = window.windowFlags()
        assert flags & Qt.WindowType.FramelessWindowHint
        assert flags & Qt.WindowType.WindowStaysOnTopHint
        editor = _quick_named(window, QPlainTextEdit, "Message")
        qtbot.waitUntil(editor.hasFocus)
        _quick_named(window, QPushButton, "Send")
        _quick_named(window, QPushButton, "Continue in chat")

    @quick_offscreen
    def test_quick_window_stays_inside_the_screen_near_the_pointer(self, quick, qtbot) -> None:
        """Placed at a screen corner or beyond it, the window is moved fully inside the screen."""

        window, _history = quick(default_model="test-model")
        area = QGuiApplication.primaryScreen().availableGeometry()
        for point in (area.bottomRight(), area.topLeft(), QPoint(area.center().x(), area.top())):
            window.place_near(point)
            placed = window.geometry()
            assert area.contains(placed), (point, placed, area)
        window.place_near(area.center())
        assert abs(window.geometry().center().x() - area.center().x()) <= 1
        assert window.geometry().top() > area.center().y()

    @quick_offscreen
    def test_quick_window_answers_and_saves_a_searchable_oneshot_session(
        self, quick, router, qtbot
    ) -> None:
        """A question streams its answer into the window and is kept as a "oneshot" session."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(reasoning=["Hmm."], content=["Four", ", of course."]))
        _quick_ask(qtbot, window, "what is 2+2")
        reply = window.conversation.last_assistant()
        assert reply is not None and reply.content() == "Four, of course."
        session = history.get_session(window.session_id)
        assert session["mode"] == "oneshot" and session["skills"] == []
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(session["id"])
        ] == [
            ("user", "what is 2+2", "complete"),
            ("assistant", "Four, of course.", "complete"),
        ]
        assert [hit["id"] for hit in history.search("2+2")] == [session["id"]]
        assert router.chat_requests()[-1].json["model"] == "test-model"

    @quick_offscreen
    def test_quick_window_keeps_its_width_when_the_answer_arrives(
        self, quick, router, qtbot
    ) -> None:
        """The window opens 640 px wide and stays so when it grows to show the answer."""

        window, _history = quick(default_model="test-model")
        window.present()
        assert window.width() == WIDTH
        _quick_ask(qtbot, window, "what is 2+2")
        assert window.width() == WIDTH
        assert window.height() >= window.conversation.minimumHeight()

    @quick_offscreen
    def test_quick_regenerate_asks_again_and_edit_puts_the_question_back(
        self, quick, router, qtbot
    ) -> None:
        """The answer's Regenerate and the question's Edit work in the quick window too."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=["First."]))
        _quick_ask(qtbot, window, "name a colour")
        router.script(Reply(content=["Second."]))
        answer = window.conversation.last_assistant()
        qtbot.mouseClick(
            _quick_named(answer, QAbstractButton, "Regenerate"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: not window.is_streaming() and window.running_workers() == 0)
        assert [(m["role"], m["content"]) for m in history.messages(window.session_id)] == [
            ("user", "name a colour"),
            ("assistant", "Second."),
        ]
        assert len(router.chat_requests()) == 2
        question = window.conversation.views()[0]
        qtbot.mouseClick(
            _quick_named(question, QAbstractButton, "Edit message"), Qt.MouseButton.LeftButton
        )
        assert window.composer.text() == "name a colour"

    @quick_offscreen
    def test_quick_skills_apply_to_one_answer_then_are_dropped(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """`/weather` shows its chip while the answer streams, is sent, and is gone afterwards."""

        window, history = quick(default_model="test-model")
        window.present()
        # The stall comes after the role chunk and one piece: once "Sunny " shows, the
        # router is holding the rest until release().
        router.script(Reply(content=["Sunny ", "and ", "warm."], stall_after=2))
        _quick_ask(qtbot, window, "/weather will it rain", wait=False)
        qtbot.waitUntil(
            lambda: (
                window.is_streaming() and window.conversation.last_assistant().content() == "Sunny "
            )
        )
        _quick_named(window, QPushButton, "Unload skill weather")
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        system, user = router.chat_requests()[-1].json["messages"]
        assert system["content"].endswith(_quick_part(tmp_path, "weather"))
        assert user["content"] == "will it rain"
        assert window.loaded_skills() == [] and not window.skill_chips.isVisible()
        assert history.get_session(window.session_id)["skills"] == []
        router.script(Reply(content=["No skill now."]))
        _quick_ask(qtbot, window, "and tomorrow")
        assert (
            _quick_part(tmp_path, "weather")
            not in router.chat_requests()[-1].json["messages"][0]["content"]
        )

    @quick_offscreen
    def test_quick_uses_a_skills_folder_created_after_it_was_built(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """The skills folder appears after start-up: the next question's `/weather` still loads it."""

        later = tmp_path / "later"
        window, _history = quick(default_model="test-model", skills_dir=later)
        (later / "weather").mkdir(parents=True)
        (later / "weather" / "SKILL.md").write_text(QUICK_SKILL_WEATHER, encoding="utf-8")
        window.present()
        _quick_ask(qtbot, window, "/weather will it rain")
        system, user = router.chat_requests()[-1].json["messages"]
        assert user["content"] == "will it rain"
        assert system["content"].endswith(
            skills.system_part(skills.SkillStore(later).load("weather"))
        )

    @quick_offscreen
    def test_quick_skill_the_model_loads_serves_only_that_answer(
        self, quick, router, qtbot
    ) -> None:
        """The model's load_skill shows a chip for that answer; nothing reaches the session."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="k1")]),
            Reply(content=["Balance ", "checked."], stall_after=2),
        )
        _quick_ask(qtbot, window, "what is my balance", wait=False)
        qtbot.waitUntil(
            lambda: (
                window.is_streaming()
                and window.conversation.last_assistant().content() == "Balance "
            )
        )
        assert window.loaded_skills() == ["finance-cli"]
        _quick_named(window, QPushButton, "Unload skill finance-cli")
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        tool = router.chat_requests()[-1].json["messages"][-1]
        assert tool["role"] == "tool" and "finance auth test" in tool["content"]
        assert window.loaded_skills() == [] and not window.skill_chips.isVisible()
        assert history.get_session(window.session_id)["skills"] == []
        assert window.conversation.last_assistant().content() == "Balance checked."

    @quick_offscreen
    def test_quick_escape_stops_the_answer_and_hides(self, quick, router, qtbot) -> None:
        """Esc mid-answer: the stream stops (saved as stopped) and the window hides."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=["Partial ", "answer"], stall_after=2))
        _quick_ask(qtbot, window, "long one", wait=False)
        qtbot.waitUntil(
            lambda: (
                window.conversation.last_assistant() is not None
                and window.conversation.last_assistant().content() == "Partial "
            )
        )
        qtbot.keyClick(_quick_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Escape)
        assert not window.isVisible() and not window.is_streaming()
        reply = history.messages(window.session_id)[-1]
        assert (reply["content"], reply["status"]) == ("Partial ", "stopped")
        qtbot.waitUntil(lambda: window.running_workers() == 0, timeout=10000)

    @quick_offscreen
    def test_quick_ctrl_enter_continues_the_exchange_as_a_chat(
        self, router, qtbot, tmp_path
    ) -> None:
        """Ctrl+Enter turns the one-shot into a chat session shown in the chat window, draft sent."""

        cfg = _instance_cfg(router, tmp_path, skills_dir=_quick_skills(tmp_path))
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        try:
            quick = running.ask("first question", send=True)
            qtbot.waitUntil(
                lambda: quick.session_id is not None and not quick.is_streaming(), timeout=30000
            )
            session_id = quick.session_id
            editor = _quick_named(quick, QPlainTextEdit, "Message")
            qtbot.keyClicks(editor, "and a follow-up")
            qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
            chat = running.chat_window()
            assert chat is not None and chat.isVisible() and not quick.isVisible()
            assert chat.session_id == session_id
            qtbot.waitUntil(
                lambda: not chat.is_streaming() and len(history.messages(session_id)) == 4,
                timeout=30000,
            )
            assert history.get_session(session_id)["mode"] == "chat"
            assert [m["content"] for m in history.messages(session_id)] == [
                "first question",
                "echo: first question",
                "and a follow-up",
                "echo: and a follow-up",
            ]
            assert router.chat_requests()[-1].json["messages"][1:] == [
                {"role": "user", "content": "first question"},
                {"role": "assistant", "content": "echo: first question"},
                {"role": "user", "content": "and a follow-up"},
            ]
        finally:
            running.shutdown()
            history.close()

    @quick_offscreen
    def test_quick_continue_lists_and_highlights_the_chat_in_an_open_chat_window(
        self, router, qtbot, tmp_path
    ) -> None:
        """ "Continue in chat" with no draft, while the chat window is open: the chat is in
        its sidebar at once, highlighted, without another message being sent."""

        cfg = _instance_cfg(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        try:
            chat = running.show_chat()
            assert chat.sidebar.session_ids() == []
            quick = running.ask("a quick one", send=True)
            qtbot.waitUntil(
                lambda: quick.session_id is not None and not quick.is_streaming(), timeout=30000
            )
            session_id = quick.session_id
            qtbot.mouseClick(_quick_named(quick, QPushButton, "Continue in chat"), Qt.LeftButton)
            assert chat.session_id == session_id
            assert chat.sidebar.session_ids() == [session_id]
            assert chat.sidebar.list_view.currentIndex().row() == 0
            assert [i.row() for i in chat.sidebar.list_view.selectedIndexes()] == [0]
            assert len(history.messages(session_id)) == 2
        finally:
            running.shutdown()
            history.close()

    @quick_offscreen
    def test_quick_picks_a_loaded_model_when_none_is_configured(self, qtbot, tmp_path) -> None:
        """No oneshot_model nor default_model: a loaded model is preferred to the first listed."""

        with (
            ScriptedRouter(models=[Model("cold", "unloaded"), Model("warm", "loaded")]) as server,
            History(tmp_path / "h.db") as history,
        ):
            window = QuickWindow(
                _app(
                    Config(
                        router_url=server.url,
                        prompts_dir=tmp_path / "p",
                        history_path=tmp_path / "h.db",
                    ),
                    history,
                )
            )
            qtbot.addWidget(window)
            qtbot.waitUntil(lambda: window.current_model() == "warm")
            configured = QuickWindow(
                _app(
                    Config(
                        router_url=server.url,
                        oneshot_model="cold",
                        default_model="warm",
                        prompts_dir=tmp_path / "p",
                        history_path=tmp_path / "h.db",
                    ),
                    history,
                )
            )
            qtbot.addWidget(configured)
            assert configured.current_model() == "cold"
            window.close()
            configured.close()

    @quick_offscreen
    def test_quick_without_a_router_says_so_in_the_window(self, quick, qtbot) -> None:
        """A dead router: the notice line names it, for a listing and for an answer alike."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
        listing, _history = quick(router_url=dead)
        listing.present()
        notice = listing.notice
        _quick_ask(qtbot, listing, "hello", wait=False)
        qtbot.waitUntil(
            lambda: "Cannot reach the server at " + dead in notice.text(), timeout=10000
        )
        assert _quick_named(listing, QLabel, "Notice") is notice
        answering, history = quick(router_url=dead, default_model="m")
        answering.present()
        _quick_ask(qtbot, answering, "hello")
        assert "Cannot reach the server at " + dead in answering.notice.text()
        assert history.messages(answering.session_id)[-1]["status"] == "error"

    @quick_offscreen
    def test_quick_lists_no_models_while_the_router_is_awaited_then_lists_at_use_router(
        self, router, qtbot, tmp_path
    ) -> None:
        """No model configured and the router still looked for: the quick window's own listing
        of the (dead) configured URL never replaces the instance's notice, not even after the
        router failed; a question waits; once use_router names a router it lists, picks a
        model and asks the waiting question. A router found at the configured URL is listed
        too."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"

        def config(url: str) -> Config:
            return Config(
                router_url=url,
                manage_server=False,
                history_path=tmp_path / "h.db",
                prompts_dir=tmp_path / "p",
                skills_dir=_quick_skills(tmp_path),
            )

        history = History(tmp_path / "h.db")
        running = RunningInstance(_app(config(dead), history), tray=False)
        same_url = RunningInstance(_app(config(router.url), history), tray=False)
        try:
            looking = f"Looking for the llama.cpp router at {dead}…"
            running.app.router_pending(looking)
            quick = running.quick_window()
            quick.present()
            qtbot.waitUntil(lambda: quick.running_workers() == 0, timeout=10000)
            assert quick.notice.text() == looking
            assert quick.current_model() == ""
            _quick_ask(qtbot, quick, "still there?", wait=False)
            assert quick.notice.text() == looking and quick.session_id is None

            failed = "No llama-server found: install one or set router_url."
            running.app.router_failed(failed)
            quick.refresh_models()
            assert quick.running_workers() == 0
            assert quick.notice.text() == failed

            running.app.use_router(router.url)
            qtbot.waitUntil(
                lambda: quick.session_id is not None and not quick.is_streaming(), timeout=30000
            )
            assert quick.current_model() == "test-model"
            assert quick.notice.text() == ""
            assert history.messages(quick.session_id)[0]["content"] == "still there?"
            assert history.messages(quick.session_id)[-1]["status"] == "complete"

            same_url.app.router_pending(f"Looking for the llama.cpp router at {router.url}…")
            found_here = same_url.quick_window()
            qtbot.waitUntil(lambda: found_here.running_workers() == 0, timeout=10000)
            assert found_here.current_model() == ""
            same_url.app.use_router(router.url)
            qtbot.waitUntil(lambda: found_here.current_model() == "test-model", timeout=10000)
            assert found_here.notice.text() == ""
        finally:
            running.shutdown()
            same_url.shutdown()
            history.close()


class TestTray:
    """`llamachat.ui.tray`: the tray icon."""

    def test_tray_menu_offers_quick_ask_open_and_quit(self, qtbot) -> None:
        """The tray menu has Quick ask, Open, Quit, each emitting its request; no tray offscreen."""

        tray = Tray()
        assert [action.text() for action in tray.actions()] == ["Quick ask", "Open", "Quit"]
        for action, signal in zip(
            tray.actions(),
            (tray.quick_requested, tray.open_requested, tray.quit_requested),
            strict=True,
        ):
            with qtbot.waitSignal(signal, timeout=1000):
                action.trigger()
        assert not tray.available() and tray.icon is None

    @quick_offscreen
    def test_tray_absent_the_instance_ends_when_its_last_window_closes(
        self, router, qtbot, tmp_path
    ) -> None:
        """Without a tray the running instance finishes once no window shows, not before."""

        cfg = _instance_cfg(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history))
        ended: list[bool] = []
        running.finished.connect(lambda: ended.append(True))
        try:
            assert not running.has_tray()
            chat = running.show_chat()
            quick = running.ask("")
            quick.dismiss()
            qtbot.wait(50)
            assert ended == [] and running.chat_window() is chat
            chat.close()
            qtbot.waitUntil(lambda: ended == [True])
            assert running.chat_window() is None
        finally:
            running.shutdown()
            history.close()

    @quick_offscreen
    def test_file_quit_and_ctrl_q_end_the_instance_closing_every_window(
        self, router, qtbot, tmp_path
    ) -> None:
        """File > Quit and Ctrl+Q in the chat window end the running instance (not just hide
        the window into the tray) and close its windows."""

        cfg = _instance_cfg(router, tmp_path)
        history = History(cfg.history_path)
        try:
            for how in ("menu", "keys"):
                running = RunningInstance(_app(cfg, history))
                ended: list[bool] = []
                running.finished.connect(lambda ended=ended: ended.append(True))
                chat = running.show_chat()
                quick = running.ask("")
                if how == "menu":
                    [file_menu] = [
                        m for m in chat.menuBar().findChildren(QMenu) if m.title() == "&File"
                    ]
                    [quit_action] = [a for a in file_menu.actions() if a.text().startswith("Quit")]
                    assert quit_action.text() == "Quit\tCtrl+Q"
                    quit_action.trigger()
                else:
                    chat.activateWindow()
                    qtbot.waitUntil(lambda chat=chat: QApplication.activeWindow() is chat)
                    qtbot.keyClick(chat, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
                qtbot.waitUntil(lambda ended=ended: ended == [True])
                assert not chat.isVisible() and not quick.isVisible()
                running.shutdown()
        finally:
            history.close()

    def test_quick_ask_shortcut_through_the_portal_binds_activates_and_reports_conflicts(
        self, qtbot, session_bus, tmp_path
    ) -> None:
        """On a bus with the GlobalShortcuts portal, quick_ask_shortcut is asked for as the
        preferred trigger and a press activates quick ask; a key the desktop gives away, or one
        of the chat window's keys, is reported; with no portal (offscreen) Settings' note says
        how to bind `llamachat ask` by hand."""
        from llamachat.dev.fake_portal import FakePortal
        from llamachat.ui.desktop.hotkey import QuickAskShortcut

        portal = FakePortal(session_bus, taken=("CTRL+ALT+k",))
        shortcut = QuickAskShortcut(bus=session_bus)
        try:
            shortcut.apply("Ctrl+Alt+Space")
            qtbot.waitUntil(lambda: shortcut.status.startswith("Quick ask: "))
            assert shortcut.status.startswith("Quick ask: Ctrl+Alt+space (the desktop's")
            [(_session, [(shortcut_id, wanted)], _parent, _options)] = [
                body for method, body in portal.requests if method == "BindShortcuts"
            ]
            assert shortcut_id == "quick-ask"
            assert wanted["preferred_trigger"] == ("s", "CTRL+ALT+space")
            with qtbot.waitSignal(shortcut.activated, timeout=5000):
                portal.press("quick-ask")

            shortcut.apply("Ctrl+Alt+K")
            qtbot.waitUntil(lambda: shortcut.status.startswith("The desktop did not bind"))
            assert "Ctrl+Alt+K (another shortcut has it" in shortcut.status

            shortcut.apply("Ctrl+N")
            assert shortcut.status == (
                "Ctrl+N is the chat window's key for “Start a new chat”: choose another."
            )
        finally:
            shortcut.release()
            portal.close()
        nowhere = QuickAskShortcut(bus=f"unix:path={tmp_path / 'no-bus'}")
        nowhere.apply("Ctrl+Alt+J")
        qtbot.waitUntil(lambda: nowhere.status.startswith("This desktop offers no global"))
        assert "`llamachat ask`" in nowhere.status
        nowhere.release()

    def test_quick_ask_shortcut_x11_grab_fires_on_the_key_and_reports_a_taken_key(
        self, qtbot, monkeypatch
    ) -> None:
        """Without a portal on X11 the key is grabbed on the root window: a press (sent through
        XTest) activates it, and a key another client holds is reported as taken."""
        import ctypes
        import ctypes.util

        from llamachat.ui.desktop.x11 import GrabError, X11Grab

        xvfb, xtst = shutil.which("Xvfb"), ctypes.util.find_library("Xtst")
        if xvfb is None or xtst is None:
            pytest.skip("needs Xvfb and libXtst (Debian: xvfb, libxtst6)")
        read, write = os.pipe()
        server = subprocess.Popen(
            [xvfb, "-displayfd", str(write), "-nolisten", "tcp"],
            pass_fds=(write,),
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        try:
            with os.fdopen(read) as number:
                monkeypatch.setenv("DISPLAY", f":{number.readline().strip()}")
            grab = X11Grab("Ctrl+Alt+Space")
            with pytest.raises(GrabError, match="Ctrl.Alt.Space is taken by another program"):
                X11Grab("Ctrl+Alt+Space")
            x, test = ctypes.CDLL(ctypes.util.find_library("X11")), ctypes.CDLL(xtst)
            x.XOpenDisplay.restype = ctypes.c_void_p
            display = ctypes.c_void_p(x.XOpenDisplay(None))

            def key(name: bytes, down: int) -> None:
                code = x.XKeysymToKeycode(display, ctypes.c_ulong(x.XStringToKeysym(name)))
                test.XTestFakeKeyEvent(display, code, down, 0)

            with qtbot.waitSignal(grab.activated, timeout=5000):
                for down, names in (
                    (1, (b"Control_L", b"Alt_L", b"space")),
                    (0, (b"space", b"Alt_L", b"Control_L")),
                ):
                    for name in names:
                        key(name, down)
                x.XFlush(display)
            grab.close()
            x.XCloseDisplay(display)
        finally:
            server.terminate()
            server.wait(timeout=10)

    def test_settings_shows_how_the_quick_ask_shortcut_stands_and_saves_it(
        self, qtbot, tmp_path
    ) -> None:
        """Settings shows the shortcut's note and saves a new key and autostart to the file."""
        path = tmp_path / "config.toml"
        path.write_text("")
        dialog = SettingsDialog(config.load(path), shortcut_note="Ctrl+N is taken")
        qtbot.addWidget(dialog)
        assert dialog.shortcut_note.text() == "Ctrl+N is taken"
        assert dialog.quick_ask_shortcut.keySequence() == QKeySequence("Ctrl+Alt+Space")
        dialog.quick_ask_shortcut.setKeySequence(QKeySequence("Meta+Shift+A"))
        dialog.autostart.setChecked(True)
        assert dialog.save() is True
        assert path.read_text() == 'quick_ask_shortcut = "Meta+Shift+A"\nautostart = true\n'


class TestInstance:
    """`llamachat.ui.instance`: one llamachat per user."""

    def test_instance_socket_is_per_user_in_the_runtime_folder(self, tmp_path) -> None:
        """The socket path is in $XDG_RUNTIME_DIR, names the uid, and differs per config file."""

        name = socket_name(tmp_path / "a.toml")
        assert (
            Path(name).parent == Path(os.environ["XDG_RUNTIME_DIR"])
            or len(os.fsencode(Path(os.environ["XDG_RUNTIME_DIR"]) / Path(name).name)) > 100
        )
        assert f"llamachat-{os.getuid()}-" in Path(name).name
        assert name == socket_name(tmp_path / "a.toml") != socket_name(tmp_path / "b.toml")

    def test_instance_server_receives_a_hand_over_and_refuses_garbage(
        self, qtbot, tmp_path
    ) -> None:
        """hand_over() delivers argv, cwd and stdin; a malformed message is refused, not acted on."""

        name = instance.socket_name(tmp_path / "c.toml")
        assert instance.hand_over(name, instance.payload([], "/")) is False
        server = instance.InstanceServer(name)
        assert server.listen() and server.is_listening()
        results: list = []
        message = instance.payload(["ask", "hi"], "/some/where", "piped\n")
        try:
            with qtbot.waitSignal(server.received, timeout=10000) as got:
                thread = threading.Thread(
                    target=lambda: results.append(instance.hand_over(name, message))
                )
                thread.start()
            qtbot.waitUntil(lambda: not thread.is_alive(), timeout=10000)
            assert got.args[0] == message and results == [True]

            def garbage() -> None:
                try:
                    instance.hand_over(name, {"not": "argv"})
                except instance.InstanceError as exc:
                    results.append(str(exc))

            thread = threading.Thread(target=garbage)
            thread.start()
            qtbot.waitUntil(lambda: not thread.is_alive(), timeout=10000)
            assert "refused" in results[-1]
        finally:
            server.close()

    def test_instance_socket_qt_cannot_listen_on_is_an_error(self, qtbot, tmp_path) -> None:
        """A socket Qt cannot create gives InstanceError naming it (llamachat then runs
        without the hand-over), not an AttributeError from the error check."""

        server = instance.InstanceServer(str(tmp_path / "no such folder" / "llamachat.sock"))
        with pytest.raises(instance.InstanceError, match="Cannot listen on .*no such folder"):
            server.listen()
        assert not server.is_listening()

    def test_instance_that_takes_the_connection_but_never_answers_is_an_error(
        self, tmp_path
    ) -> None:
        """A hung instance (accepts, never answers) gives InstanceError instead of a hang."""

        name = instance.socket_name(tmp_path / "hung.toml")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
            hung.bind(name)
            hung.listen(1)
            with pytest.raises(instance.InstanceError, match="does not answer"):
                instance.hand_over(name, instance.payload(["ask"], "/"), timeout_ms=300)
        Path(name).unlink()

    @quick_offscreen
    def test_instance_acts_on_handed_over_command_lines(self, router, qtbot, tmp_path) -> None:
        """Plain `llamachat` raises the chat window; `ask "q"` asks in the quick window, stdin
        appended; `ask` with only stdin puts it in the input without asking."""

        cfg = _instance_cfg(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        try:
            _act(running, payload([], "/"))
            assert running.chat_window() is not None and running.chat_window().isVisible()
            _act(running, payload(["ask", "two", "words"], "/", "piped\n"))
            quick = running.quick_window()
            assert quick.isVisible()
            qtbot.waitUntil(
                lambda: (
                    _answered(tmp_path / "history.db", "two words\n\n```\npiped\n```") is not None
                )
            )
            _act(running, payload(["ask"], "/", "only stdin"))
            assert _quick_named(quick, QPlainTextEdit, "Message").toPlainText() == (
                "```\nonly stdin\n```"
            )
            assert len(_oneshots(tmp_path / "history.db")) == 1
        finally:
            running.shutdown()
            history.close()

    @quick_offscreen
    def test_quick_failed_answer_retries_with_the_same_skills(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """Retry on a failed answer asks again, with the skills that question loaded."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(
            Reply(status=500, error={"message": "out of memory"}), Reply(content=["Fine ", "now."])
        )
        _quick_ask(qtbot, window, "/weather again")
        assert "out of memory" in window.notice.text()
        reply = window.conversation.last_assistant()
        retry = [b for b in reply.findChildren(QToolButton) if b.accessibleName() == "Retry"]
        assert len(retry) == 1
        retry[0].click()
        qtbot.waitUntil(
            lambda: (
                not window.is_streaming()
                and history.messages(window.session_id)[-1]["status"] == "complete"
            ),
            timeout=30000,
        )
        assert [m["content"] for m in history.messages(window.session_id)] == ["again", "Fine now."]
        first, second = router.chat_requests()[-2:]
        assert first.json["messages"] == second.json["messages"]
        assert second.json["messages"][0]["content"].endswith(_quick_part(tmp_path, "weather"))
        assert history.get_session(window.session_id)["skills"] == []

    def test_instance_second_llamachat_hands_ask_over_and_exits_at_once(
        self, router, tmp_path
    ) -> None:
        """`llamachat ask "q"` hands over to the running one (exit 0), which asks and saves it."""

        config = _quick_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        first = _start_instance(config, socket_name(config), tmp_path / "first.log")
        try:
            router.script(Reply(content=["Paris."]))
            second = _llamachat(config, "ask", "capital", "of", "France", timeout=30)
            assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
            _session, messages = _wait_for(
                lambda: _answered(tmp_path / "history.db", "capital of France"), 30, "the answer"
            )
            assert messages[1]["content"] == "Paris."
            third = _llamachat(config, "ask", "review this", stdin="line one\n", timeout=30)
            assert third.returncode == 0, third.stderr
            _wait_for(
                lambda: _answered(tmp_path / "history.db", "review this\n\n```\nline one\n```"),
                30,
                "the piped ask",
            )
            plain = _llamachat(config, timeout=30)
            assert plain.returncode == 0 and first.poll() is None
        finally:
            _stop(first)

    def test_instance_sigterm_ends_the_instance_cleanly_and_frees_its_socket(
        self, router, tmp_path
    ) -> None:
        """SIGTERM (a desktop logout) quits like the tray's Quit: exit 0, socket file removed."""
        import signal

        config = _quick_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        name = socket_name(config)
        first = _start_instance(config, name, tmp_path / "first.log")
        try:
            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=30) == 0, (tmp_path / "first.log").read_text()
            assert not Path(name).exists()
        finally:
            _stop(first)

    def test_instance_stale_socket_of_a_killed_instance_is_recovered(
        self, router, tmp_path
    ) -> None:
        """A killed instance leaves its socket; the next one replaces it and takes hand-overs."""

        config = _quick_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        name = socket_name(config)
        _stop(_start_instance(config, name, tmp_path / "crashed.log"))
        assert Path(name).exists(), "a killed instance leaves its socket file"
        first = _start_instance(config, name, tmp_path / "first.log")
        try:
            second = _llamachat(config, "ask", "are you there", timeout=30)
            assert (second.returncode, second.stderr) == (0, "")
            _wait_for(lambda: _answered(tmp_path / "history.db", "are you there"), 30, "the answer")
        finally:
            _stop(first)

    @quick_offscreen
    def test_instance_background_opens_no_window_and_new_chat_opens_an_empty_chat(
        self, router, qtbot, tmp_path
    ) -> None:
        """`--background` (the autostart entry) shows no window; `--new-chat` (the menu entry's
        "New chat") shows the chat window on a new, empty chat."""

        cfg = _instance_cfg(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        try:
            _act(running, payload(["--background"], "/"))
            assert running.chat_window() is None and not running.quick_window().isVisible()
            old = history.create_session("chat", title="Old")
            running.show_chat().open_session(old)
            assert running.chat_window().session_id == old
            _act(running, payload(["--new-chat"], "/"))
            chat = running.chat_window()
            assert chat.isVisible() and chat.session_id is None
        finally:
            running.shutdown()
            history.close()


class TestFirstRun:
    """`llamachat.ui.first_run` and `ui.router_guide`: first run and the managed server."""

    def test_firstrun_window_waits_for_the_router_then_lists_its_models(
        self, firstrun, router, qtbot
    ) -> None:
        """While the router is looked for or started the panel and status bar say so and the
        picker waits instead of reporting the URL unreachable; use_router ends it."""
        window = firstrun(router_url=_firstrun_dead_url())
        window.app.router_pending("Looking for the llama.cpp router at http://127.0.0.1:8080…")

        panel = window.first_run_panel
        assert panel.state() == "pending" and panel.isVisible() and panel.busy.isVisible()
        assert "Looking for the llama.cpp router" in panel.text.text()
        assert "Looking for the llama.cpp router" in window.statusBar().currentMessage()
        assert not window.model_picker.isEnabled()
        qtbot.waitUntil(lambda: "not ready yet" in window.model_picker.status_label.text())
        assert "Cannot reach" not in window.model_picker.status_label.text()

        command = "/opt/bin/llama-server --host 127.0.0.1 --port 8123 --models-dir /m"
        _firstrun_from_thread(window.app.post_server_event, "starting", command)
        qtbot.waitUntil(
            lambda: window.statusBar().currentMessage() == "Starting llama-server on port 8123…"
        )
        assert panel.state() == "pending" and "port 8123" in panel.text.text()

        window.app.use_router(router.url)
        assert panel.state() == "hidden" and not panel.isVisible()
        assert window.model_picker.isEnabled()
        qtbot.waitUntil(lambda: [m.id for m in window.models()] == ["test-model"])
        assert window.first_run_panel.state() == "hidden"

    def test_firstrun_listing_from_before_the_wait_does_not_end_it(self, firstrun, qtbot) -> None:
        """A model list asked for before the router search began (an empty router at the
        configured URL) neither replaces the waiting panel nor its status line."""

        with ScriptedRouter(models=[]) as empty:
            window = firstrun(router_url=empty.url)
            window.app.router_pending(f"Looking for the llama.cpp router at {empty.url}…")
            # The picker's calls run in order: its stand-in's answer comes after the earlier one.
            qtbot.waitUntil(lambda: "not ready yet" in window.model_picker.status_label.text())
            assert [r for r in empty.requests if r.path.endswith("/models")]
            assert window.first_run_panel.state() == "pending"
            assert (
                window.statusBar().currentMessage().startswith("Looking for the llama.cpp router")
            )

            window.app.use_router(empty.url)
            qtbot.waitUntil(lambda: window.first_run_panel.state() == "empty")

    def test_firstrun_empty_router_says_where_models_go_and_opens_the_folder(
        self, firstrun, qtbot, tmp_path
    ) -> None:
        """A local router with no models shows the getting-started panel; for llamachat's own
        server it names the models folder, and Open models folder creates and opens it."""

        class Opened(QObject):
            def __init__(self) -> None:
                super().__init__()
                self.urls: list[QUrl] = []

            @Slot(QUrl)
            def open(self, url: QUrl) -> None:
                self.urls.append(url)

        with ScriptedRouter(models=[]) as empty:
            window = firstrun(router_url=empty.url)
            panel = window.first_run_panel
            qtbot.waitUntil(lambda: panel.state() == "empty" and panel.isVisible())
            # A router llamachat did not start: it cannot know that router's folder.
            assert "--models-dir" in panel.text.text() and empty.url in panel.text.text()
            assert _firstrun_buttons(window) == {"Check again"}
            assert not window.router_guide.add_model_action.isVisible()

            server = _firstrun_unstarted_server(tmp_path)
            models = tmp_path / "models"
            window.app.use_router(window.cfg.router_url, server=server)
            assert panel.state() == "empty"
            assert panel.folder.isVisible() and panel.folder.text() == str(models)
            assert _firstrun_buttons(window) == {
                "Add GGUF file",
                "Open models folder",
                "Check again",
            }
            assert window.router_guide.add_model_action.isVisible()
            assert not models.exists()

            opened = Opened()
            QDesktopServices.setUrlHandler("file", opened, "open")
            try:
                qtbot.mouseClick(
                    _firstrun_button(window, "Open models folder"), Qt.MouseButton.LeftButton
                )
            finally:
                QDesktopServices.unsetUrlHandler("file")
            assert models.is_dir()
            assert [url.toLocalFile() for url in opened.urls] == [str(models)]

    def test_firstrun_add_file_that_is_not_a_gguf_is_explained_and_not_added(
        self, firstrun, qtbot, tmp_path
    ) -> None:
        """Add GGUF file with a file that is not a GGUF says so on the panel; nothing is put in
        the models folder."""

        notes = tmp_path / "notes.gguf"
        notes.write_text("shopping list\n")
        with ScriptedRouter(models=[]) as empty:
            window = firstrun(router_url=empty.url)
            window.app.use_router(
                window.cfg.router_url, server=_firstrun_unstarted_server(tmp_path)
            )
            panel = window.first_run_panel
            qtbot.waitUntil(lambda: panel.state() == "empty")

            window.router_guide.add_model_file(notes)

            qtbot.waitUntil(lambda: panel.problem.isVisible())
            assert panel.problem.text() == "notes.gguf is not a GGUF model file."
            # Said once, where it stays; the status bar no longer claims it is still adding.
            assert window.statusBar().currentMessage() == ""
            assert panel.state() == "empty" and not panel.busy.isVisible()
            assert _firstrun_button(window, "Add GGUF file").isEnabled()
            assert not (tmp_path / "models" / "notes.gguf").exists()
            assert not [r for r in empty.requests if r.query.get("reload")]

    def test_firstrun_add_file_problem_stays_until_dismissed_when_the_panel_is_away(
        self, firstrun, router, qtbot, tmp_path
    ) -> None:
        """With models listed (no getting-started panel), a file that is not a GGUF is shown
        whole above the chat and stays there through later status messages until its ✕."""

        notes = tmp_path / "notes.gguf"
        notes.write_text("shopping list\n")
        window = firstrun(router_url=router.url)
        window.app.use_router(window.cfg.router_url, server=_firstrun_unstarted_server(tmp_path))
        qtbot.waitUntil(lambda: bool(window.models()))
        assert window.first_run_panel.state() == "hidden"
        bar = window.problem_bar
        assert not bar.isVisible()

        window.router_guide.add_model_file(notes)

        qtbot.waitUntil(bar.isVisible)
        assert bar.text() == "notes.gguf is not a GGUF model file."
        assert bar.label.textFormat() == Qt.TextFormat.PlainText and bar.label.wordWrap()
        window.show_status("Something else happened.", timeout=1)
        window.copy_last_reply()
        qtbot.wait(20)
        assert bar.isVisible() and bar.text() == "notes.gguf is not a GGUF model file."
        qtbot.mouseClick(bar.close_button, Qt.MouseButton.LeftButton)
        assert not bar.isVisible() and bar.text() == ""

    @firstrun_offscreen
    def test_firstrun_server_events_and_server_reach_every_window(
        self, router, qtbot, tmp_path
    ) -> None:
        """Events sent from a supervisor thread reach the chat window's status bar and the quick
        window; a server that gave up is shown on the panel with its log; a chat window built
        later still offers the server's log and says the server gave up."""

        cfg = _firstrun_cfg(
            tmp_path, router_url=router.url, manage_server=False, default_model="test-model"
        )
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        server = _firstrun_unstarted_server(tmp_path, b"main: model loaded\nsrv: all slots idle\n")
        try:
            chat = running.show_chat()
            quick = running.quick_window()
            assert not chat.router_guide.server_log_action.isVisible()
            running.app.use_router(router.url, server=server)
            assert running.app.managed_server() is server
            assert (
                chat.router_guide.server_log_action.isVisible()
                and chat.router_guide.add_model_action.isVisible()
            )

            _firstrun_from_thread(
                running.app.post_server_event, "restarting", "restarting llama-server in 1 s"
            )
            qtbot.waitUntil(
                lambda: (
                    chat.statusBar().currentMessage()
                    == "llama-server: restarting llama-server in 1 s"
                )
            )
            assert quick.notice.text() == "llama-server: restarting llama-server in 1 s"
            _firstrun_from_thread(
                running.app.post_server_event,
                "exited",
                "llama-server exited with code -9; last output:\nboom",
            )
            qtbot.waitUntil(
                lambda: (
                    chat.statusBar().currentMessage()
                    == "llama-server: llama-server exited with code -9"
                )
            )
            _firstrun_from_thread(running.app.post_server_event, "ready", "llama-server is ready")
            qtbot.waitUntil(lambda: quick.notice.text() == "")

            gave_up = "llama-server failed to start 5 times in a row; see /tmp/x.log"
            _firstrun_from_thread(running.app.post_server_event, "gave_up", gave_up)
            qtbot.waitUntil(lambda: chat.first_run_panel.state() == "failed")
            assert chat.first_run_panel.text.text() == gave_up
            assert quick.notice.text() == gave_up
            _firstrun_button(chat, "Server log").click()
            [dialog] = [w for w in chat.findChildren(ServerLogDialog) if w.isVisible()]
            assert dialog.text.toPlainText().endswith("srv: all slots idle\n")
            dialog.close()

            chat.close()
            qtbot.waitUntil(lambda: running.chat_window() is None)
            later = running.show_chat()
            assert later is not chat
            assert later.router_guide.server_log_action.isVisible()
            assert later.first_run_panel.state() == "failed"
            assert later.first_run_panel.text.text() == gave_up
        finally:
            running.shutdown()
            history.close()

    @firstrun_offscreen
    def test_firstrun_missing_llama_server_is_explained_in_the_window(
        self, qtbot, tmp_path
    ) -> None:
        """No router answers and no llama-server exists: the window says so in full, with how to
        get one, after saying it was looking; the quick window says it too."""

        missing = tmp_path / "bin" / "llama-server"
        url = _firstrun_dead_url()
        # A configured model: the quick window then lists no models of its own, whose failure
        # it would report over this one.
        cfg = _firstrun_cfg(
            tmp_path, router_url=url, llama_server=str(missing), default_model="some-model"
        )
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        try:
            chat = running.show_chat()
            running.app.router_pending(f"Looking for the llama.cpp router at {url}…")
            quick = running.quick_window()
            assert quick.notice.text() == f"Looking for the llama.cpp router at {url}…"
            finder = find_router(running.app)
            panel = chat.first_run_panel
            assert panel.state() == "pending" and url in panel.text.text()

            qtbot.waitUntil(lambda: panel.state() == "failed", timeout=10000)
            assert finder is not None
            text = panel.text.text()
            assert str(missing) in text and "pip install 'llamachat[server]'" in text
            assert panel.isVisible() and panel.title.text() == "No llama.cpp router"
            assert _firstrun_buttons(chat) == {"Settings"}
            assert str(missing) in chat.statusBar().currentMessage()
            assert chat.model_picker.isEnabled()
            assert running.app.managed_server() is None
            assert quick.notice.text() == text
        finally:
            running.shutdown()
            history.close()

    @firstrun_offscreen
    @pytest.mark.real_router
    def test_firstrun_managed_server_starts_then_takes_a_gguf_and_lists_it(
        self, qtbot, tmp_path
    ) -> None:
        """End to end with the real llama-server: the window says it is starting it, gets the
        server (log view), shows the empty models folder, and a GGUF added there is listed
        while the panel steps aside."""

        _binary, model = _real_assets()
        port = free_port()
        models = tmp_path / "models"
        cfg = _firstrun_cfg(tmp_path, router_url=f"http://127.0.0.1:{port}", models_dir=models)
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=False)
        try:
            chat = running.show_chat()
            said: list[str] = []
            chat.statusBar().messageChanged.connect(said.append)
            running.app.router_pending(f"Looking for the llama.cpp router at {cfg.router_url}…")
            finder = find_router(running.app)
            assert chat.first_run_panel.state() == "pending"

            qtbot.waitUntil(lambda: running.app.managed_server() is not None, timeout=60000)
            assert finder is not None
            assert f"Starting llama-server on port {port}…" in said
            assert chat.router_guide.server_log_action.isVisible()
            dialog = chat.router_guide.show_server_log()
            assert dialog is not None and "==== llamachat" in dialog.text.toPlainText()
            assert f"running at http://127.0.0.1:{port}" in dialog.path_label.text()
            dialog.close()

            panel = chat.first_run_panel
            qtbot.waitUntil(lambda: panel.state() == "empty", timeout=10000)
            assert panel.folder.text() == str(models)

            chat.router_guide.add_model_file(model)
            qtbot.waitUntil(lambda: SMOL_ID in [m.id for m in chat.models()], timeout=30000)
            assert panel.state() == "hidden" and not panel.isVisible()
            assert (models / SMOL_FILE).is_symlink()
            assert (models / SMOL_FILE).resolve() == model.resolve()
            assert chat.model_picker.current_model() == SMOL_ID
        finally:
            running.shutdown()
            managed = running.app.managed_server()
            if managed is not None:
                managed.stop()
            history.close()


class TestChatWindow:
    """`llamachat.ui.window`: the chat window."""

    def test_window_full_chat_streams_saves_and_shows_stats(
        self, chat_window, router, qtbot
    ) -> None:
        """A typed message streams a reply into the view; both are saved with stats."""

        window, history = chat_window()
        router.script(Reply(reasoning=["Thinking ", "it over."], content=["Hello", " there", "!"]))
        _by_name(window, QPushButton, "Send")
        _send(qtbot, window, "Hi")

        messages = history.messages(window.session_id)
        assert [(m["role"], m["content"], m["status"]) for m in messages] == [
            ("user", "Hi", "complete"),
            ("assistant", "Hello there!", "complete"),
        ]
        assert messages[1]["reasoning"] == "Thinking it over."
        assert messages[1]["usage"]["completion_tokens"] == 5
        assert messages[1]["timings"]["predicted_per_second"] == 50.0
        view = window.conversation.last_assistant()
        assert view.content() == "Hello there!"
        [stats] = [w for w in view.findChildren(QLabel) if w.accessibleName() == "Reply statistics"]
        assert "50.0 tok/s" in stats.text()
        sent = router.chat_requests()[-1].json
        assert sent["model"] == "test-model"
        assert [m["role"] for m in sent["messages"]] == ["system", "user"]
        assert sent["messages"][1]["content"] == "Hi"
        assert history.get_session(window.session_id)["title"]

        _send(qtbot, window, "And again")
        second = router.chat_requests()[-1].json["messages"]
        assert [(m["role"], m["content"]) for m in second[1:]] == [
            ("user", "Hi"),
            ("assistant", "Hello there!"),
            ("user", "And again"),
        ]

    def test_window_stop_keeps_partial_reply_as_stopped_and_closes_stream(
        self, chat_window, router, qtbot
    ) -> None:
        """Esc mid-reply ends the reply at once, saves the partial text 'stopped', drops the socket;
        the reply offers one action (Regenerate) and the figures of what it produced."""

        window, history = chat_window()
        router.script(Reply(content=["one ", "two ", "three ", "four"], stall_after=3))
        _type(qtbot, window, "count")
        qtbot.keyClick(_by_name(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: window.conversation.last_assistant().content() == "one two ")
        assert _by_name(window, QPushButton, "Stop")

        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
        # Stop is synchronous: the reply is over and saved before the key press returns.
        assert not window.is_streaming()
        reply = history.messages(window.session_id)[-1]
        assert (reply["content"], reply["status"]) == ("one two ", "stopped")
        assert _by_name(window, QPushButton, "Send")
        view = window.conversation.last_assistant()
        shown = {b.accessibleName() for b in view.findChildren(QAbstractButton) if b.isVisible()}
        assert "Regenerate" in shown and "Retry" not in shown
        # The figures so far (timings_per_token): what it produced, kept although stopped.
        assert _by_name(view, QLabel, "Reply statistics").text().startswith("50.0 tok/s · 2 tokens")
        # The HTTP response was closed, so the server saw the client leave mid-stall.
        qtbot.waitUntil(lambda: router.disconnects == 1, timeout=5000)
        qtbot.waitUntil(lambda: window.running_workers() == 0, timeout=5000)
        assert history.messages(window.session_id)[-1]["status"] == "stopped"

    def test_window_saves_streaming_reply_within_a_second(self, chat_window, router, qtbot) -> None:
        """While a reply streams its row holds the text so far with status 'streaming'."""

        window, history = chat_window()
        router.script(Reply(content=["saved ", "early ", "never"], stall_after=3))
        _type(qtbot, window, "go")
        window.send()

        def saved() -> bool:
            row = history.messages(window.session_id)[-1]
            return row["status"] == "streaming" and row["content"] == "saved early "

        qtbot.waitUntil(saved, timeout=5000)
        window.stop()

    def test_window_server_dying_mid_reply_saves_error_and_retry_streams_again(
        self, chat_window, router, qtbot
    ) -> None:
        """A dropped connection keeps the partial reply as 'error' with Retry; Retry replaces it."""

        window, history = chat_window()
        router.script(
            Reply(content=["half ", "a ", "reply ", "lost"], die_after=3),
            Reply(content="Whole reply."),
        )
        _send(qtbot, window, "Tell me")
        failed = history.messages(window.session_id)[-1]
        assert (failed["content"], failed["status"]) == ("half a ", "error")
        assert failed["error"]
        view = window.conversation.last_assistant()
        assert view.content() == "half a "

        qtbot.mouseClick(_by_name(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        rows = history.messages(window.session_id)
        assert [(m["role"], m["content"], m["status"]) for m in rows] == [
            ("user", "Tell me", "complete"),
            ("assistant", "Whole reply.", "complete"),
        ]
        assert [m["role"] for m in router.chat_requests()[-1].json["messages"]] == [
            "system",
            "user",
        ]

    def test_window_server_error_shows_its_message_inline(self, chat_window, router, qtbot) -> None:
        """An HTTP error from the server is saved on the reply with the server's own message."""

        window, history = chat_window()
        router.script(Reply(status=500, error={"message": "failed to allocate KV cache"}))
        _send(qtbot, window, "Hello")
        reply = history.messages(window.session_id)[-1]
        assert reply["status"] == "error"
        assert "failed to allocate KV cache" in reply["error"]

    @offscreen_popup
    def test_window_slash_command_alone_loads_skill_and_sends_nothing(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """`/name` on its own loads the skill, shows its chip and sends no request."""

        window, history = chat_window()
        _type(qtbot, window, "/weat")
        popup = window.composer.completer.popup()
        qtbot.waitUntil(popup.isVisible)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.composer.text() == "/weather "
        qtbot.keyClick(_by_name(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
        assert window.loaded_skills() == ["weather"]
        assert router.chat_requests() == []
        assert window.composer.text() == ""
        assert "weather" in window.statusBar().currentMessage()
        assert _by_name(window, QPushButton, "Unload skill weather")

        _send(qtbot, window, "Will it rain?")
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[0]["content"].endswith(_skill_part(tmp_path, "weather"))
        assert sent[-1]["content"] == "Will it rain?"
        assert history.get_session(window.session_id)["skills"] == ["weather"]

    @offscreen_popup
    def test_window_slash_command_stripped_and_mention_loads_skill(
        self, chat_window, router, qtbot
    ) -> None:
        """`/name` inside a message is stripped; a hyphenated skill named as a word loads and
        stays in the text."""
        window, _history = chat_window()
        _send(qtbot, window, "/weather will it rain")
        assert window.loaded_skills() == ["weather"]
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "will it rain"

        _send(qtbot, window, "and what does finance-cli say of my balance?")
        assert window.loaded_skills() == ["weather", "finance-cli"]
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[-1]["content"] == "and what does finance-cli say of my balance?"
        system = sent[0]["content"]
        assert system.index("[skill: weather]") < system.index("[skill: finance-cli]")

    @offscreen_popup
    def test_window_unknown_slash_word_is_sent_as_text(self, chat_window, router, qtbot) -> None:
        """A `/word` that names no skill is ordinary text."""
        window, _history = chat_window()
        _send(qtbot, window, "/usr/bin is where it lives")
        assert window.loaded_skills() == []
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == (
            "/usr/bin is where it lives"
        )

    def test_window_model_load_skill_loads_for_session_and_says_so(
        self, chat_window, router, qtbot
    ) -> None:
        """The model's load_skill call loads the skill for the chat, saved and announced."""

        window, history = chat_window()
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}')]),
            Reply(content="Run the auth test first."),
        )
        _send(qtbot, window, "How do I check my balance?")
        assert window.loaded_skills() == ["finance-cli"]
        assert "finance-cli" in window.statusBar().currentMessage()
        assert _by_name(window, QPushButton, "Unload skill finance-cli")
        assert history.get_session(window.session_id)["skills"] == ["finance-cli"]
        assert history.messages(window.session_id)[-1]["content"] == "Run the auth test first."

        _send(qtbot, window, "thanks")
        assert "[skill: finance-cli]" in router.chat_requests()[-1].json["messages"][0]["content"]

    @offscreen_popup
    def test_chips_click_unloads_skill_and_hides_row(self, chat_window, router, qtbot) -> None:
        """Clicking a skill chip unloads the skill, saves the set, and the empty row hides."""

        window, history = chat_window()
        _send(qtbot, window, "/weather /finance-cli hello")
        assert window.skill_chips.isVisible()
        qtbot.mouseClick(
            _by_name(window, QPushButton, "Unload skill weather"), Qt.MouseButton.LeftButton
        )
        assert window.loaded_skills() == ["finance-cli"]
        assert history.get_session(window.session_id)["skills"] == ["finance-cli"]
        qtbot.mouseClick(
            _by_name(window, QPushButton, "Unload skill finance-cli"), Qt.MouseButton.LeftButton
        )
        assert window.loaded_skills() == []
        assert not window.skill_chips.isVisible()
        _send(qtbot, window, "plain")
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]

    @offscreen_popup
    def test_window_reopened_chat_keeps_a_deleted_skill_as_missing_until_removed(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A skill gone from disk stays on the chat, struck through, with a notice; the model
        does not get it; the user's click removes it from the chat."""

        window, history = chat_window()
        _send(qtbot, window, "/finance-cli /weather hello")
        session_id = window.session_id
        window.close()
        shutil.rmtree(tmp_path / "skills" / "weather")

        again, _ = chat_window(history=History(history.path))
        assert again.open_session(session_id)
        assert again.skill_chips.skills() == ["finance-cli", "weather"]
        assert again.skill_chips.missing() == ["weather"]
        chip = _by_name(again, QPushButton, "Remove missing skill weather")
        assert chip.font().strikeOut() and "(missing)" in chip.text()
        assert "no longer found: weather" in again.statusBar().currentMessage()
        assert history.get_session(session_id)["skills"] == ["finance-cli", "weather"]

        _send(qtbot, again, "next")
        system = router.chat_requests()[-1].json["messages"][0]["content"]
        assert _skill_part(tmp_path, "finance-cli") in system and "weather" not in system
        assert history.get_session(session_id)["skills"] == ["finance-cli", "weather"]

        qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
        assert again.skill_chips.skills() == ["finance-cli"] and again.skill_chips.missing() == []
        assert history.get_session(session_id)["skills"] == ["finance-cli"]

    @offscreen_popup
    def test_window_reopen_restores_skills_and_new_session_starts_empty(
        self, chat_window, router, qtbot
    ) -> None:
        """A chat reopened in a new window has its messages and skills; a new chat has none."""

        window, history = chat_window()
        _send(qtbot, window, "/finance-cli hello")
        session_id = window.session_id
        window.close()

        again, _ = chat_window(history=History(history.path))
        assert again.open_session(session_id)
        assert again.loaded_skills() == ["finance-cli"]
        assert again.skill_chips.skills() == ["finance-cli"]
        assert [v.role for v in again.conversation.views()] == ["user", "assistant"]
        again.new_session()
        assert again.loaded_skills() == []
        assert not again.skill_chips.isVisible()
        assert again.conversation.views() == []

    @offscreen_popup
    def test_window_system_message_is_byte_identical_across_turns(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Preset, date note and skills form one system message that never changes between turns."""

        window, _history = chat_window(search_url="http://127.0.0.1:9")
        _send(qtbot, window, "/weather first")
        _send(qtbot, window, "second")
        first, second = (r.json["messages"][0] for r in router.chat_requests()[-2:])
        assert first["role"] == "system"
        assert json.dumps(first).encode() == json.dumps(second).encode()
        assert first["content"].startswith("You are a helpful assistant.")
        assert "Today's date is" in first["content"]
        assert first["content"].endswith(_skill_part(tmp_path, "weather"))
        _send(qtbot, window, "/finance-cli third")
        third = router.chat_requests()[-1].json["messages"][0]["content"]
        assert third.startswith(first["content"]) and "[skill: finance-cli]" in third

    # quick_offscreen also covers the `/` completer popup the chat window shows.
    @quick_offscreen
    def test_chat_quick_and_cli_send_the_same_system_message_and_tools(
        self, chat_window, quick, router, qtbot, tmp_path
    ) -> None:
        """For the same preset and skills, all three callers send the same system bytes and tools."""

        web_search = {"search_url": "http://127.0.0.1:9"}
        chat, _ = chat_window(**web_search)
        _send(qtbot, chat, "/weather will it rain")
        quick_window, _ = quick(default_model="test-model", **web_search)
        quick_window.present()
        _quick_ask(qtbot, quick_window, "/weather will it rain")
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(
            parser.parse_args(["--print", "/weather", "will", "it", "rain"]),
            chat.cfg,
            stdin=io.StringIO(),
            stdout=out,
            stderr=err,
        )
        assert code == 0, err.getvalue()

        sent = [r.json for r in router.chat_requests()[-3:]]
        systems = [json.dumps(body["messages"][0]).encode() for body in sent]
        assert systems[0] == systems[1] == systems[2]
        assert json.loads(systems[0])["content"].endswith(_quick_part(tmp_path, "weather"))
        assert sent[0]["tools"] == sent[1]["tools"] == sent[2]["tools"]
        assert [body["messages"][-1]["content"] for body in sent] == ["will it rain"] * 3

    def test_window_multiline_code_message_is_sent_exactly(
        self, chat_window, router, qtbot
    ) -> None:
        """Shift+Enter lines, indentation and a code fence reach the server byte for byte."""
        window, history = chat_window()
        text = "Why does this fail?\n```python\ndef f(x):\n    return  x * 2\n```\n\n  trailing  "
        _send(qtbot, window, text)
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == text
        assert history.messages(window.session_id)[0]["content"] == text

    def test_window_regenerate_and_edit_replace_from_there(
        self, chat_window, router, qtbot
    ) -> None:
        """Regenerate replaces the last reply; editing a message resends from that message."""

        window, history = chat_window()
        router.script(Reply(content="first answer"), Reply(content="second answer"))
        _send(qtbot, window, "question")
        reply_id = history.messages(window.session_id)[-1]["id"]
        window.conversation.regenerate_requested.emit(reply_id)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "question",
            "second answer",
        ]

        user_id = history.messages(window.session_id)[0]["id"]
        window.conversation.edit_requested.emit(user_id)
        assert window.composer.text() == "question"
        window.composer.set_text("better question")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "better question",
            "echo: better question",
        ]

    def test_window_escape_leaves_edit_mode_so_send_appends(
        self, chat_window, router, qtbot
    ) -> None:
        """Esc while editing (not streaming) drops the edit: the next send adds, replaces nothing."""

        window, history = chat_window()
        _send(qtbot, window, "first")
        window.conversation.edit_requested.emit(history.messages(window.session_id)[0]["id"])
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
        window.composer.set_text("second")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "first",
            "echo: first",
            "second",
            "echo: second",
        ]

    def test_window_web_search_results_show_on_the_reply(self, chat_window, router, qtbot) -> None:
        """The model's web_search runs against SearXNG; its results appear on the reply."""

        class SearXNG(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(
                    {
                        "results": [
                            {
                                "title": "llama.cpp router mode",
                                "url": "https://example.org/router",
                                "content": "Start llama-server without -m.",
                            }
                        ]
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        searx = ThreadingHTTPServer(("127.0.0.1", 0), SearXNG)
        threading.Thread(target=searx.serve_forever, daemon=True).start()
        try:
            window, history = chat_window(search_url=f"http://127.0.0.1:{searx.server_port}")
            router.script(
                Reply(tool_calls=[ToolCall("web_search", '{"query": "router mode"}')]),
                Reply(content="Start it without -m."),
            )
            _send(qtbot, window, "How do I run the router?")
        finally:
            searx.shutdown()
            searx.server_close()
        [results] = [
            label
            for label in window.conversation.last_assistant().findChildren(QLabel)
            if label.accessibleName() == "Search results"
        ]
        assert "router mode" in results.text() and "https://example.org/router" in results.text()
        assert history.messages(window.session_id)[-1]["content"] == "Start it without -m."

    def test_window_reply_left_streaming_by_a_crash_opens_as_stopped(
        self, chat_window, qtbot
    ) -> None:
        """A reply a dead process left 'streaming' opens as 'stopped', text kept, Regenerate offered."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "hello")
        reply = history.add_message(session, "assistant", "partial te", status="streaming")
        assert window.open_session(session)
        assert history.messages(session)[-1]["status"] == "stopped"
        view = window.conversation.last_assistant()
        assert view.content() == "partial te" and not view.is_streaming()
        qtbot.waitUntil(view.isVisible)
        assert _by_name(view, QAbstractButton, "Regenerate")
        assert not [
            b for b in view.findChildren(QAbstractButton) if b.text() == "Retry" and b.isVisible()
        ]
        assert view.message_id == reply

    def test_window_reply_a_crash_cut_off_before_any_text_opens_failed_with_retry(
        self, chat_window, router, qtbot
    ) -> None:
        """A reply a dead process left 'streaming' and empty opens as an error with Retry."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "hello")
        history.add_message(session, "assistant", "", status="streaming")
        assert window.open_session(session)
        row = history.messages(session)[-1]
        assert (row["status"], row["error"]) == (
            "error",
            "llamachat closed before this reply began.",
        )
        view = window.conversation.last_assistant()
        qtbot.waitUntil(view.isVisible)
        assert row["error"] in _fault_status_label(view)
        assert not [
            b
            for b in view.findChildren(QAbstractButton)
            if b.accessibleName() in ("Regenerate", "Copy reply") and b.isVisible()
        ]
        router.script(Reply(content="Hello there."))
        qtbot.mouseClick(_by_name(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [(m["role"], m["content"], m["status"]) for m in history.messages(session)] == [
            ("user", "hello", "complete"),
            ("assistant", "Hello there.", "complete"),
        ]

    def test_window_streams_twenty_thousand_tokens_without_crash(
        self, chat_window, router, qtbot
    ) -> None:
        """20,000 streamed tokens go through the real window and arrive whole (PySide6 leak guard)."""

        window, history = chat_window()
        router.script(Reply.tokens(20_000))
        _send(qtbot, window, "long")
        assert history.messages(window.session_id)[-1]["content"] == "tok " * 20_000
        assert history.messages(window.session_id)[-1]["status"] == "complete"
        qtbot.waitUntil(lambda: window.conversation.last_assistant().content() == "tok " * 20_000)

    def test_window_text_file_attachment_is_inlined_as_fenced_block(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """An attached text file is sent inside a fence long enough for its own backticks."""

        window, history = chat_window()
        source = tmp_path / "notes.md"
        source.write_text("Use ```code``` here\n", encoding="utf-8")
        window.composer.add_files([source])
        assert _by_name(window, QPushButton, "Remove attachment notes.md")
        _send(qtbot, window, "Summarise")
        content = router.chat_requests()[-1].json["messages"][-1]["content"]
        assert content == "Summarise\n\nnotes.md:\n````md\nUse ```code``` here\n````"
        assert history.messages(window.session_id)[0]["attachments"][0]["name"] == "notes.md"
        assert window.composer.attachments() == []

    def test_composer_refuses_image_for_text_only_model(self, chat_window, qtbot, tmp_path) -> None:
        """An image for a model without vision is not attached, and the status bar says why."""
        window, _history = chat_window()
        window.composer.add_files([_png(tmp_path / "red.png")])
        assert window.composer.attachments() == []
        assert "does not read images" in window.statusBar().currentMessage()

    def test_composer_refuses_a_fifo_or_a_folder_at_once_saying_why(
        self, chat_window, tmp_path
    ) -> None:
        """A FIFO (or a folder) is refused with a message; opening it no longer blocks the window."""

        fifo = tmp_path / "notes.txt"
        os.mkfifo(fifo)
        outcome: list = []

        def attach() -> None:
            try:
                file_attachment(fifo, images=False)
            except AttachmentError as exc:
                outcome.append(str(exc))

        # On a thread, so that a blocking open fails this test instead of hanging it.
        thread = threading.Thread(target=attach, daemon=True)
        thread.start()
        thread.join(timeout=10)
        if thread.is_alive():
            with open(fifo, "wb"):  # a writer unblocks the stuck open, and the thread ends
                pass
            pytest.fail("attaching a FIFO blocked")
        assert outcome == [
            "notes.txt is not a regular file (a pipe, socket or device), and only files attach."
        ]

        window, _history = chat_window()
        (tmp_path / "folder").mkdir()
        window.composer.add_files([str(fifo), str(tmp_path / "folder")])
        assert window.composer.attachments() == []
        assert "folder is a folder" in window.statusBar().currentMessage()

    def test_composer_sends_image_as_data_uri_to_vision_model(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """A vision model gets the image as an image_url data URI part next to the text."""

        with ScriptedRouter([Model("eyes", "loaded", modalities=("text", "image"))]) as vision:
            window, _history = chat_window(url=vision.url, default_model="eyes")
            window.composer.add_files([_png(tmp_path / "red.png")])
            _send(qtbot, window, "What colour?")
            text, image = vision.chat_requests()[-1].json["messages"][-1]["content"]
            assert text == {"type": "text", "text": "What colour?"}
            assert image["type"] == "image_url"
            assert image["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
            window.close()

    def test_composer_long_paste_becomes_attachment(self, chat_window, qtbot) -> None:
        """Pasting over 4,000 characters makes an attachment chip, not a wall of text; its
        label counts lines in words ("1 line", "600 lines")."""

        window, _history = chat_window()
        long_text = "log line\n" * 600
        mime = QMimeData()
        mime.setText(long_text)
        QApplication.clipboard().setMimeData(mime)
        window.composer.editor.paste()
        assert window.composer.text() == ""
        [attachment] = window.composer.attachments()
        assert attachment.data == long_text
        assert window.composer.attachment_chips.isVisible()
        assert _by_name(window, QPushButton, "Remove attachment pasted text (600 lines)")

        window.composer.set_attachments([])
        one_line = QMimeData()
        one_line.setText("x" * 5000)
        QApplication.clipboard().setMimeData(one_line)
        window.composer.editor.paste()
        assert _by_name(window, QPushButton, "Remove attachment pasted text (1 line)")
        window.composer.set_attachments([])

        short = QMimeData()
        short.setText("short one")
        QApplication.clipboard().setMimeData(short)
        window.composer.editor.paste()
        # The clipboard owns a QMimeData made here: Qt would delete it at exit, after
        # Python is gone, and its wrapper's clean-up would crash the test run.
        QApplication.clipboard().clear()
        assert window.composer.text() == "short one"

    def test_composer_drop_of_file_attaches_it(self, chat_window, qtbot, tmp_path) -> None:
        """Dropping a file on the message box attaches it."""

        window, _history = chat_window()
        source = tmp_path / "data.csv"
        source.write_text("a,b\n1,2\n", encoding="utf-8")
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(str(source))])
        viewport = window.composer.editor.viewport()
        enter = QDragEnterEvent(
            QPoint(5, 5),
            Qt.DropAction.CopyAction,
            mime,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(viewport, enter)
        assert enter.isAccepted()
        drop = QDropEvent(
            QPointF(5, 5),
            Qt.DropAction.CopyAction,
            mime,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(viewport, drop)
        assert [a.name for a in window.composer.attachments()] == ["data.csv"]
        assert window.composer.text() == ""

    @offscreen_popup
    def test_composer_slash_completes_user_skill_names_with_descriptions(
        self, chat_window, router, qtbot
    ) -> None:
        """Typing `/` at a word start offers skills with descriptions; Enter picks one, not sends."""

        window, _history = chat_window()
        editor = window.composer.editor
        qtbot.keyClicks(editor, "please /wea")
        popup = window.composer.completer.popup()
        qtbot.waitUntil(popup.isVisible)
        shown = popup.model().index(0, 0).data()
        assert shown.startswith("/weather") and "Forecasts from the weather service." in shown
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert editor.toPlainText() == "please /weather "
        assert not popup.isVisible()
        assert router.chat_requests() == []

        qtbot.keyClicks(editor, "a/b")
        assert not popup.isVisible()

    def test_composer_grows_with_its_text_then_scrolls(self, chat_window, qtbot) -> None:
        """The message box starts at three lines, grows with the text, and stops at twelve."""
        window, _history = chat_window()
        editor = window.composer.editor
        start = editor.height()
        window.composer.set_text("\n".join(["line"] * 6))
        six = editor.height()
        window.composer.set_text("\n".join(["line"] * 40))
        capped = editor.height()
        window.composer.set_text("\n".join(["line"] * 80))
        assert start < six < capped == editor.height()
        assert editor.verticalScrollBar().maximum() > 0

    def test_worker_streams_events_then_finishes(self, router, qtbot) -> None:
        """The worker re-emits reasoning, content and stats from the stream, then finished."""

        router.script(Reply(reasoning=["hm"], content=["a", "b"]))
        client = backend.Client(router.url)
        worker = StreamWorker(client, "test-model", [{"role": "user", "content": "x"}])
        events: list = []
        worker.reasoning.connect(lambda t: events.append(("reasoning", t)))
        worker.content.connect(lambda t: events.append(("content", t)))
        worker.stats.connect(lambda s: events.append(("stats", s["usage"]["completion_tokens"])))
        worker.failed.connect(lambda m, e: events.append(("failed", m)))
        worker.finished.connect(lambda: events.append(("finished", None)))
        threads = WorkerThreads()
        threads.start(worker)
        qtbot.waitUntil(lambda: threads.running() == 0, timeout=10000)
        client.close()
        # Text that arrives in one burst is delivered joined; order and kinds are kept.
        merged: list = []
        for kind, value in events:
            if merged and kind == merged[-1][0] == "content":
                merged[-1] = (kind, merged[-1][1] + value)
            else:
                merged.append((kind, value))
        assert merged == [
            ("reasoning", "hm"),
            ("content", "ab"),
            ("stats", 3),
            ("finished", None),
        ]

    def test_worker_cancel_closes_stalled_response_without_failing(self, router, qtbot) -> None:
        """Cancelling a worker stuck on a silent server ends it and closes the connection."""

        router.script(Reply(content=["first ", "never"], stall_after=2))
        client = backend.Client(router.url)
        worker = StreamWorker(client, "test-model", [{"role": "user", "content": "x"}])
        received: list = []
        failures: list = []
        worker.content.connect(received.append)
        worker.failed.connect(lambda m, e: failures.append(m))
        threads = WorkerThreads()
        threads.start(worker)
        qtbot.waitUntil(lambda: received == ["first "], timeout=10000)
        worker.cancel()
        qtbot.waitUntil(lambda: threads.running() == 0, timeout=10000)
        qtbot.waitUntil(lambda: router.disconnects == 1, timeout=5000)
        client.close()
        assert failures == []

    def test_worker_failure_carries_server_message_and_exception(self, router, qtbot) -> None:
        """A server error reaches the GUI thread as failed(message, ServerError), then finished."""

        router.script(Reply(status=503, error={"message": "loading model"}))
        client = backend.Client(router.url)
        worker = StreamWorker(client, "test-model", [{"role": "user", "content": "x"}])
        failures: list = []
        worker.failed.connect(lambda m, e: failures.append((m, e)))
        threads = WorkerThreads()
        threads.start(worker)
        qtbot.waitUntil(lambda: threads.running() == 0, timeout=10000)
        client.close()
        [(message, error)] = failures
        assert "loading model" in message
        assert isinstance(error, backend.ServerError) and error.status == 503

    def test_worker_hands_a_burst_of_tokens_over_joined_in_a_few_frames(
        self, router, qtbot
    ) -> None:
        """Thousands of tokens sent at once reach the GUI thread as a few joined pieces."""

        pieces = [
            text for _at, text in _streamed_content(router, qtbot, Reply.tokens(5_000, word="w "))
        ]
        assert "".join(pieces) == "w " * 5_000
        # One signal per token would be 5,000; one per ~30 Hz frame is a handful.
        assert len(pieces) < 100

    def test_worker_paced_stream_reaches_the_gui_at_most_about_30_times_a_second(
        self, router, qtbot
    ) -> None:
        """At 1,000 tokens/s the GUI thread gets a frame's worth at a time, never a signal each."""

        streamed = _streamed_content(router, qtbot, Reply(content=["t "] * 400, rate=1000))
        arrivals = [at for at, _text in streamed]
        pieces = [text for _at, text in streamed]
        assert "".join(pieces) == "t " * 400
        # Drains are FRAME_INTERVAL_MS apart at least; the last one, queued at the end, is extra.
        frames = (arrivals[-1] - arrivals[0]) * 1000 / FRAME_INTERVAL_MS
        assert 2 <= len(pieces) <= frames + 2

    def test_worker_reads_a_reading_pace_stream_a_few_tokens_at_a_time(self, router, qtbot) -> None:
        """At 20 tokens/s the first token comes alone, at once; after it the worker reads
        about READ_BATCH_TOKENS at a time, so the window renders once per few tokens, none
        lost and none held back longer than MAX_READ_WAIT_MS and a frame."""

        streamed = _streamed_content(router, qtbot, Reply(content=["w "] * 40, rate=20))
        pieces = [text for _at, text in streamed]
        assert "".join(pieces) == "w " * 40
        assert pieces[0] == "w "
        # One render a token would be 40, one per two 21; batches of six make about 8.
        assert len(pieces) <= 12, pieces
        gaps = [later - earlier for (earlier, _a), (later, _b) in itertools.pairwise(streamed)]
        assert max(gaps) * 1000 <= MAX_READ_WAIT_MS + 2 * FRAME_INTERVAL_MS + 50, gaps

    def test_window_use_router_switches_to_a_router_that_came_up(
        self, chat_window, router, qtbot
    ) -> None:
        """Started against a dead URL, the window lists and chats once told where the router is."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
        window, history = chat_window(url=dead, listed=False)
        qtbot.waitUntil(lambda: "Cannot reach" in window.model_picker.status_label.text())
        assert window.model_picker.retry_button.isVisible()
        window.app.use_router(router.url)
        qtbot.waitUntil(lambda: [m.id for m in window.models()] == ["test-model"])
        assert window.cfg.router_url == router.url
        _send(qtbot, window, "hello")
        assert history.messages(window.session_id)[-1]["content"] == "echo: hello"

    def test_window_help_works_without_a_display(self, tmp_path) -> None:
        """`llamachat --help` and `--version` run with no display and no Qt."""

        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env.pop("QT_QPA_PLATFORM", None)
        command = [sys.executable, "-m", "llamachat"]
        shown = subprocess.run(
            [*command, "--help"], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert shown.returncode == 0, shown.stderr
        assert "--config PATH" in shown.stdout
        version = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, env=env, timeout=60, check=True
        )

        assert version.stdout.strip() == f"llamachat {__version__}"

    def test_window_first_run_writes_default_config_file(self, tmp_path) -> None:
        """A missing configuration file is created with the documented defaults, then loaded."""
        from llamachat import config

        target = tmp_path / "conf" / "config.toml"
        cfg = load_or_create_config(target)
        assert target.read_text(encoding="utf-8") == config.DEFAULT_TEXT
        assert cfg.path == target and cfg.router_url == "http://127.0.0.1:8080"

    def test_window_main_reports_bad_config_and_returns_2(self, tmp_path, capsys) -> None:
        """main() on a broken configuration prints file, line and key and returns 2."""

        bad = tmp_path / "bad.toml"
        bad.write_text("theme = 'neon'\n")
        assert main(["--config", str(bad)]) == 2
        err = capsys.readouterr().err
        assert f"{bad}, line 1" in err and "theme" in err

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

    def test_window_reply_offers_copy_and_more_only_once_it_has_text(
        self, chat_window, router, qtbot
    ) -> None:
        """While the prompt is read the reply is empty: no Copy and no ⋯ under it until text
        comes (issue 30, item 9); a reply stopped before any text offers neither."""

        window, _history = chat_window()
        router.script(Reply(content="Answer.", stall_after=0))
        window.composer.set_text("read this")
        window.send()
        reply = window.conversation.last_assistant()
        qtbot.waitUntil(lambda: reply.findChild(ReadingProgress) is not None)
        copy = _button(reply, "Copy reply")
        assert reply.isVisible() and not copy.isVisible() and reply.more_actions() == []
        window.stop()
        assert not copy.isVisible() and reply.more_actions() == []

        router.script(Reply(content=["Hello ", "there."], stall_after=2))
        window.composer.set_text("again")
        window.send()
        reply = window.conversation.last_assistant()
        qtbot.waitUntil(lambda: reply.content() == "Hello ")
        copy = _button(reply, "Copy reply")
        assert copy.isVisible() and reply.more_actions() == ["New chat from here"]
        window.stop()

    def test_window_message_being_edited_is_highlighted_until_sent_or_cancelled(
        self, chat_window, router, qtbot
    ) -> None:
        """Edit marks the message in the conversation; Stop (leaving editing) or sending the
        edit clears the mark (issue 30, item 10)."""

        window, _history = chat_window()
        router.script(Reply(content="Dolly."))
        _send(qtbot, window, "Name a llama.")
        question = window.conversation.views()[0]
        assert not question.is_editing()
        qtbot.mouseClick(_button(question, "Edit message"), Qt.MouseButton.LeftButton)
        assert question.is_editing() and question.accessibleDescription() == "Being edited"
        assert not window.conversation.views()[1].is_editing()
        window.stop()
        assert not question.is_editing()

        qtbot.mouseClick(_button(question, "Edit message"), Qt.MouseButton.LeftButton)
        assert question.is_editing()
        router.script(Reply(content="Alpaca."))
        window.composer.set_text("Name an alpaca.")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        assert [v.content() for v in window.conversation.views()] == ["Name an alpaca.", "Alpaca."]
        assert not any(view.is_editing() for view in window.conversation.views())

    def test_length_cut_reply_is_marked_and_continue_goes_on_in_the_same_reply(
        self, chat_window, router, qtbot
    ) -> None:
        """finish_reason "length": the reply says it was cut and offers Continue, which sends
        the chat with the reply last (a prefill) and adds what comes to the same reply and
        row; llama.cpp's echo of the prefilled text is dropped."""

        window, history = chat_window()
        router.script(Reply(content=["One, two,"], finish_reason="length"))
        _send(qtbot, window, "Count to five.")
        view = window.conversation.last_assistant()
        assert view.is_cut()
        status = _by_name(view, QLabel, "Status")
        assert status.text() == "Cut at the length limit"
        cont = _by_name(view, QToolButton, "Continue reply")
        row = history.messages(window.session_id)[-1]
        assert row["timings"]["finish_reason"] == "length"

        # llama.cpp streams the prefilled text back first, then the new text.
        router.script(Reply(content=["One, two, ", "three, four, five."]))
        qtbot.mouseClick(cont, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[-1] == {"role": "assistant", "content": "One, two,"}
        rows = history.messages(window.session_id)
        assert [r["role"] for r in rows] == ["user", "assistant"]
        assert rows[-1]["id"] == row["id"]
        assert rows[-1]["content"] == "One, two, three, four, five."
        assert rows[-1]["status"] == "complete"
        assert "finish_reason" not in rows[-1]["timings"]
        view = window.conversation.last_assistant()
        assert view.content() == "One, two, three, four, five." and not view.is_cut()
        shown = [label.text() for label in view.findChildren(QLabel) if label.isVisible()]
        assert "Cut at the length limit" not in shown

    def test_compact_and_send_makes_a_branch_that_fits_and_keeps_every_original_message(
        self, chat_window, router, qtbot
    ) -> None:
        """ "Compact and send" (the panel's first way out): the model summarizes all but the
        last two exchanges; a new branch holds the summary block, the kept messages and the
        question, and fits; the original path is the other version, found and exported."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window()
        session_id = _long_chat(history, 6, 150)
        original = history.messages(session_id)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        window.composer.set_text("and now?")
        window.send()
        assert window.overflow.isVisible() and not router.chat_requests()
        assert _overflow_buttons(window.overflow)[0] == "Compact and send"
        router.script(Reply(content="Six questions about alpha."), Reply(content="Now this."))
        qtbot.mouseClick(
            _by_name(window.overflow, QPushButton, "Compact and send"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 2 and not window.is_streaming())
        summarizing, sent = (r.json for r in router.chat_requests())
        assert summarizing["messages"][0]["content"].startswith(compact.SUMMARY_PROMPT)
        assert "question 3 " in summarizing["messages"][1]["content"]
        assert "question 4 " not in summarizing["messages"][1]["content"]

        path = history.messages(session_id)
        assert [m["role"] for m in path] == ["system", *["user", "assistant"] * 3]
        assert path[0]["content"] == "Six questions about alpha."
        assert path[0]["versions"] == [original[0]["id"], path[0]["id"]]
        assert [m["content"] for m in path[1:5]] == [m["content"] for m in original[8:]]
        assert [m["content"] for m in path[5:]] == ["and now?", "Now this."]
        assert window.composer.text() == "" and not window.overflow.isVisible()
        assert sent["messages"][0]["content"].endswith(turn.summary_text(path[0]["content"]))
        assert [m["role"] for m in sent["messages"]] == [
            "system",
            *["user", "assistant"] * 2,
            "user",
        ]
        assert _prompt_tokens(sent) + window.chat.context.reserve() <= 2048
        qtbot.waitUntil(lambda: window.chat.context.breakdown().get("summary") > 0)

        block = window.conversation.views()[0]
        assert isinstance(block, SummaryView) and block.version_text() == "2/2"
        assert block.title.text() == "Summary of 8 earlier messages"
        assert not block.is_expanded()
        block.toggle.click()
        assert block.is_expanded()
        block.edit_button.click()
        block.editor.setPlainText("Edited summary.")
        block.save_button.click()
        assert history.messages(session_id)[0]["content"] == "Edited summary."
        assert window.chat.next_turn().messages()[0]["content"].endswith("Edited summary.")

        assert history.search("question 0")[0]["id"] == session_id
        assert len(history.export_json(session_id)["messages"]) == 12 + 7
        window.chat.show_version(original[0]["id"])
        assert [m["id"] for m in history.messages(session_id)] == [m["id"] for m in original]

    def test_compact_policy_compacts_by_itself_and_slash_compact_takes_a_focus(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow = "compact": a message that does not fit compacts the chat, then
        goes; `/compact <focus>` compacts again with the focus in the instructions."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session_id = _long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(content="Summary one."), Reply(content="Answered."))
        _send(qtbot, window, "and now?")
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 2 and not window.is_streaming())
        assert not window.overflow.isVisible()
        assert history.messages(session_id)[-1]["content"] == "Answered."
        assert history.messages(session_id)[0]["content"] == "Summary one."

        router.script(Reply(content="Summary two."))
        _send(qtbot, window, "/compact keep the API decisions")
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 3)
        qtbot.waitUntil(lambda: history.messages(session_id)[0]["content"] == "Summary two.")
        instructions = router.chat_requests()[-1].json["messages"][0]["content"]
        assert instructions.endswith("Pay particular attention to: keep the API decisions")
        path = history.messages(session_id)
        assert len(path[0]["versions"]) == 3 and compact.summarized(path[0]) == 10
        assert window.conversation.views()[0].title.text() == "Summary of 10 earlier messages"

    def test_trim_policy_leaves_the_oldest_messages_out_of_the_request_with_a_marker(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow = "trim": the oldest exchanges are not sent (the request really
        lacks them and fits), "N earlier messages not sent" shows, the chat keeps them all."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="trim")
        session_id = _long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        _send(qtbot, window, "and now?")
        sent = router.chat_requests()[-1].json
        contents = [str(m["content"]) for m in sent["messages"]]
        left_out = window.chat.state.trimmed
        assert left_out >= 2 and left_out % 2 == 0
        assert not any(
            text.startswith(f"question {n} ") for text in contents for n in range(left_out // 2)
        )
        assert contents[1].startswith(f"question {left_out // 2} ") and contents[-1] == "and now?"
        assert _prompt_tokens(sent) + window.chat.context.reserve() <= 2048
        assert window.trim_marker.isVisible()
        assert window.trim_marker.text().startswith(f"{left_out} earlier messages not sent")
        assert len(history.messages(session_id)) == 12 + 2

        window.new_session()
        assert window.chat.state.trimmed == 0 and not window.trim_marker.isVisible()

    def test_refuse_policy_and_the_chats_own_policy_in_its_parameters(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow = "refuse": nothing is sent, no panel, the reason stays shown; the
        chat's own choice in ⚙ wins over the config's, is saved with it and never sent."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="refuse")
        session_id = _long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        window.composer.set_text("and now?")
        window.send()
        assert not router.chat_requests() and not window.overflow.isVisible()
        assert window.composer.text() == "and now?"
        assert "“refuse”" in window.problem_bar.text()

        combo = window.chat_params.panel.editors[compact.CHAT_KEY]
        combo.setCurrentText("trim")
        assert history.session_params(session_id) == {compact.CHAT_KEY: "trim"}
        window.send()
        sent = router.chat_requests()[-1].json
        assert window.chat.state.trimmed > 0 and compact.CHAT_KEY not in sent

    def test_compacting_stops_with_the_chat_as_it_was_and_the_message_back(
        self, chat_window, router, qtbot
    ) -> None:
        """Stop while the summary streams: nothing changes in the chat, the question is back
        in the composer."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session_id = _long_chat(history, 6, 150)
        original = history.messages(session_id)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        router.script(Reply(content=["Sum", "mary"], stall_after=1))
        window.composer.set_text("and now?")
        window.send()
        assert window.chat.compaction.running() and window.composer.text() == ""
        qtbot.waitUntil(
            lambda: (
                "Compacting: summarizing 8 earlier messages" in window.statusBar().currentMessage()
            )
        )
        window.stop()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert history.messages(session_id) == original
        assert window.composer.text() == "and now?"

    def test_window_draft_stays_with_its_chat_survives_quit_and_sending_clears_it(
        self, chat_window, router, qtbot
    ) -> None:
        """Text typed in chat A does not follow into chat B; each chat (the new one too)
        gets its own back after a restart; sending clears the draft (issue 30, item 2)."""

        window, history = chat_window()
        first = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(first, "user", "A question")
        second = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(second, "user", "B question")
        window.sidebar.refresh()
        assert window.open_session(first)
        window.composer.set_text("half-typed for A")
        assert window.open_session(second)
        assert window.composer.text() == ""
        window.composer.set_text("for B")
        assert window.open_session(first)
        assert window.composer.text() == "half-typed for A"
        window.new_session()
        assert window.composer.text() == ""
        window.composer.set_text("a new chat's draft")
        window.close()

        window, _ = chat_window(history=history)
        assert window.composer.text() == "a new chat's draft"
        assert window.open_session(second)
        assert window.composer.text() == "for B"
        assert window.open_session(first)
        assert window.composer.text() == "half-typed for A"
        router.script(Reply(content="Sent."))
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: history.draft(first) == "", timeout=5000)
        assert history.draft(second) == "for B" and history.draft(None) == "a new chat's draft"

        # The new chat's first message makes its session: the draft goes with the message.
        window.new_session()
        assert window.composer.text() == "a new chat's draft"
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: history.draft(None) == "", timeout=5000)
        assert history.draft(window.session_id) == ""
        window.new_session()
        assert window.composer.text() == ""

    def test_window_search_hit_opens_the_version_holding_it_scrolled_to_and_marked(
        self, chat_window, qtbot
    ) -> None:
        """A hit in version 1/2 of a reply opens 1/2 (not the newer 2/2 the chat last
        showed), scrolled so the match is on screen, its word marked (issue 30, item 3)."""

        window, history = chat_window()
        window.resize(900, 500)
        session = history.create_session("chat", "test-model", prompt_name="Default")
        question = history.add_message(session, "user", "Name a llama.")
        filler = "".join(f"Line {n} of a long answer.\n\n" for n in range(120))
        history.add_message(
            session, "assistant", f"{filler}Call it Zebracorn, then.\n\n{filler}", parent=question
        )
        history.add_message(session, "assistant", "Dolly.", parent=question)
        history.add_message(session, "user", "Why?")
        window.sidebar.refresh()
        assert window.open_session(session)
        assert window.conversation.views()[1].version_text() == "2/2"
        window.open_session(history.create_session("chat", "test-model"))

        window.sidebar.search("zebracorn")
        assert window.sidebar.model.rowCount() == 1
        rect = window.sidebar.list_view.visualRect(window.sidebar.model.index(0))
        qtbot.mouseClick(
            window.sidebar.list_view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center()
        )
        qtbot.waitUntil(lambda: window.session_id == session)
        qtbot.waitUntil(lambda: len(window.conversation.views()) == 2)
        reply = window.conversation.views()[1]
        assert reply.version_text() == "1/2" and "Zebracorn" in reply.content()
        body = next(
            b for b in reply.findChildren(QTextBrowser) if b.document() is reply.text_document()
        )
        marks = body.extraSelections()
        assert [mark.cursor.selectedText() for mark in marks] == ["Zebracorn"]
        cursor = marks[0].cursor
        bar = window.conversation.verticalScrollBar()
        height = window.conversation.viewport().height()

        def on_screen() -> bool:
            corner = body.cursorRect(cursor).topLeft()
            top = body.mapTo(window.conversation.widget(), corner).y()
            return bar.value() <= top <= bar.value() + height - 20

        qtbot.waitUntil(lambda: body.height() >= body.document().size().height())
        qtbot.waitUntil(on_screen)
        assert reply.geometry().bottom() > 3000  # laid out whole: the match is mid-message

    def test_window_quit_with_an_unsaved_reply_asks_and_saves_it_as_a_file(
        self, router, qtbot, tmp_path
    ) -> None:
        """History full: a reply marked "Not saved yet" is not lost by File > Quit. Quit
        tries once more, then asks: Cancel keeps llamachat running; Save as… writes the
        chat with the whole reply as Markdown, then quits (issue 29, item 2)."""

        router.models["test-model"].n_ctx = 32768
        history = History(tmp_path / "history.db")
        running = RunningInstance(_app(_instance_cfg(router, tmp_path), history), tray=False)
        ended: list[bool] = []
        running.finished.connect(lambda: ended.append(True))
        try:
            window = running.show_chat()
            qtbot.waitUntil(lambda: bool(window.models()), timeout=5000)
            tail = ["word " * 2000, "the very end."]
            router.script(Reply(content=["kept ", "early ", "then ", *tail], stall_after=3))
            window.composer.set_text("Write a lot")
            window.send()
            session = window.session_id
            qtbot.waitUntil(
                lambda: history.messages(session)[-1]["content"] == "kept early ", timeout=5000
            )
            pages = history._conn.execute("PRAGMA page_count").fetchone()[0]
            history._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
            router.release()
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
            assert "Not saved" in window.conversation.last_assistant().unsaved_text()

            said: list[str] = []

            def answer(*steps) -> None:
                def poll() -> None:
                    dialog = QApplication.activeModalWidget()
                    if dialog is None:
                        QTimer.singleShot(20, poll)
                        return
                    steps[0](dialog)
                    if len(steps) > 1:
                        answer(*steps[1:])

                QTimer.singleShot(0, poll)

            def click(text: str):
                def press(box) -> None:
                    said.append(box.text())
                    next(b for b in box.buttons() if b.text() == text).click()

                return press

            answer(click("Cancel"))
            window.quit_requested.emit()
            assert not ended and window.isVisible()
            assert "could not be saved" in said[0] and "Quitting loses it" in said[0]

            saved = tmp_path / "saved.md"

            def choose(dialog) -> None:
                dialog.selectFile(str(saved))
                dialog.accept()

            answer(click("Save as…"), choose)
            window.quit_requested.emit()
            assert ended == [True]
            text = saved.read_text(encoding="utf-8")
            assert "Write a lot" in text and "kept early then word " in text
            assert text.rstrip().endswith("the very end.")
        finally:
            history._conn.execute("PRAGMA max_page_count = 1073741823")  # room again
            running.shutdown()
        # The reply is kept till History takes it, even after the window went.
        qtbot.waitUntil(
            lambda: history.messages(session)[-1]["content"].endswith("the very end."),
            timeout=5000,
        )
        history.close()

    def test_window_new_chat_in_a_project_takes_its_defaults_and_is_saved_in_it(
        self, chat_window, router, qtbot
    ) -> None:
        """A project's header menu starts a chat with the project's preset, model, skills
        and parameters; its first message saves it into the project, under the header."""

        window, history = chat_window()
        project = history.projects.create("Finances")
        history.projects.update(
            project,
            model="test-model",
            prompt_name="Terse",
            skills=["finance-cli"],
            params={"temperature": 0.1},
        )
        window.model_choice.apply("")
        window.sidebar.refresh()
        header = window.sidebar.model.index(0)
        assert header.data() == "▾ Finances" and window.sidebar.session_ids() == []
        menu = window.sidebar.project_menu(project)
        next(a for a in menu.actions() if a.text() == "New chat in this project").trigger()
        assert window.chat.loaded_skills() == ["finance-cli"]
        assert window.chat.params() == {"temperature": 0.1}
        assert window.current_model() == "test-model"
        assert window.preset_picker.current_name() == "Terse"
        router.script(Reply(content="Budget it."))
        _send(qtbot, window, "How do I budget?")
        assert history.get_session(window.session_id)["project_id"] == project
        sent = router.chat_requests()[-1].json
        assert sent["model"] == "test-model" and sent["temperature"] == 0.1
        assert "finance-cli" in sent["messages"][0]["content"]
        assert window.sidebar.model.session_id(1) == window.session_id
        assert window.sidebar.model.index(1).data(SessionListModel.DepthRole) == 1
        # A plain new chat afterwards is in no project and has none of its defaults.
        window.new_session()
        assert window.chat.loaded_skills() == [] and window.chat.params() == {}
        router.script(Reply(content="Hi."))
        _send(qtbot, window, "Hello")
        assert history.get_session(window.session_id)["project_id"] is None

    def test_window_temporary_chat_is_never_written_until_kept(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Ctrl+Shift+N starts a temporary chat: the bar says so, nothing reaches the
        history file (its replies, versions included, live in memory), and Keep this chat
        saves it whole as an ordinary chat."""

        window, history = chat_window()
        qtbot.keyClick(
            window,
            Qt.Key.Key_N,
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
        )
        assert window.temporary_bar.isVisible() and window.chat.scratch is not None
        router.script(Reply(content="A first answer."), Reply(content="zebra-quartz answer."))
        _send(qtbot, window, "Tell me the secret-walrus word.")
        window.retry(window.conversation.views()[1].message_id)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        assert history.count_sessions() == 0 and window.sidebar.session_ids() == []
        assert window.sidebar.current() is None
        on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("history.db*"))
        assert b"secret-walrus" not in on_disk and b"zebra-quartz" not in on_disk
        qtbot.mouseClick(window.temporary_bar.keep_button, Qt.MouseButton.LeftButton)
        assert not window.temporary_bar.isVisible() and window.chat.scratch is None
        [kept] = window.sidebar.session_ids()
        assert window.session_id == kept and window.sidebar.current() == kept
        path = history.messages(kept)
        assert [m["content"] for m in path] == [
            "Tell me the secret-walrus word.",
            "zebra-quartz answer.",
        ]
        assert len(path[1]["versions"]) == 2
        # Kept, it is an ordinary chat: the next reply is saved as any other.
        router.script(Reply(content="More."))
        _send(qtbot, window, "And more?")
        assert [m["content"] for m in history.messages(kept)][-1] == "More."

    def test_window_leaving_a_temporary_chat_asks_and_discards_it(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        asked: list[bool] = []
        answers = ["cancel", "discard", "discard"]

        def ask(closing: bool) -> str:
            asked.append(closing)
            return answers.pop(0)

        window.temporary.ask = ask
        # Nothing sent yet: leaving asks nothing.
        window.temporary.start()
        window.new_session()
        assert asked == [] and not window.temporary_bar.isVisible()
        window.temporary.start()
        router.script(Reply(content="Gone soon."))
        _send(qtbot, window, "Forget this.")
        window.new_session()  # cancelled: still the temporary chat
        assert asked == [False] and window.chat.scratch is not None
        assert [v.content() for v in window.conversation.views()] == ["Forget this.", "Gone soon."]
        window.new_session()
        assert asked == [False, False] and window.chat.scratch is None
        assert window.conversation.views() == [] and history.count_sessions() == 0
        window.temporary.start()
        router.script(Reply(content="Also gone."))
        _send(qtbot, window, "And this.")
        window.close()
        assert asked == [False, False, True] and history.count_sessions() == 0

    def test_warm_cache_opening_a_chat_warms_it_and_send_reads_only_the_new_message(
        self, chat_window, router, qtbot
    ) -> None:
        """Opening a stored chat whose model is loaded has the server read it ahead: the
        request the next message makes up to an empty question, max_tokens 0, autoload=false.
        Send then reads only the new message, and the meter says what the server holds."""

        window, history = chat_window(warm_cache=True)
        session = _llama_chat(history)
        window.open_session(session)
        expected = [*window.chat.next_turn().messages(), {"role": "user", "content": ""}]
        qtbot.waitUntil(lambda: any(w.json["messages"] == expected for w in _warmups(router)))
        warm = _warmups(router)[-1]
        assert warm.query == {"autoload": "false"}
        qtbot.waitUntil(lambda: not window.chat.warmer.busy())
        held = window.chat.warmer.in_cache()
        assert held is not None and held > 500
        qtbot.waitUntil(lambda: "in cache: " in window.meter.toolTip())

        _send(qtbot, window, "And alpacas?")
        assert _warmups(router)[-1] is warm  # typing changed nothing the next request starts with
        timings = history.messages(session)[-1]["timings"]
        assert timings["cache_n"] >= held - 15 and timings["prompt_n"] < 15

    def test_warm_cache_stop_and_quit_cancel_it_and_typing_warms_once(
        self, chat_window, router, qtbot
    ) -> None:
        """Stop closes a warm-up's connection; the first keystroke warms again, and fast
        typing with pauses adds no request; closing the window cancels the one in flight."""

        router.prompt_ms_per_token = 3.0  # a 1,500-token chat: ~4 s to read
        window, history = chat_window(warm_cache=True)
        qtbot.waitUntil(lambda: len(_warmups(router)) == 1 and not window.chat.warmer.busy())
        window.open_session(_llama_chat(history))
        qtbot.waitUntil(lambda: len(_warmups(router)) == 2)
        window.stop()
        assert not window.chat.warmer.busy()

        _type(qtbot, window, "Tell me")
        qtbot.waitUntil(lambda: len(_warmups(router)) == 3)
        _type(qtbot, window, " more about alpacas")
        qtbot.waitUntil(lambda: not window.chat.warmer.busy(), timeout=20000)
        assert len(_warmups(router)) == 3

        router.prompt_ms_per_token = 50.0
        window.load_skill("weather")  # the system message changed: all of it is read again
        qtbot.waitUntil(lambda: len(_warmups(router)) == 4)
        window.close()
        assert not window.chat.warmer.busy()

    def test_warm_cache_follows_skill_chips_edits_and_version_switches(
        self, chat_window, router, qtbot
    ) -> None:
        """A skill loaded, a message being edited and another version shown each change
        what the next request starts with: each is warmed, up to where the next message goes."""

        window, history = chat_window(warm_cache=True)
        router.script(Reply(content="Dolly."))
        _send(qtbot, window, "Name a llama.")

        def warmed(test) -> bool:
            return any(test(w.json["messages"]) for w in _warmups(router))

        first = [("user", "Name a llama."), ("assistant", "Dolly."), ("user", "")]
        qtbot.waitUntil(
            lambda: warmed(lambda m: [(x["role"], x["content"]) for x in m[1:]] == first)
        )
        window.load_skill("weather")  # what a suggestion chip does
        qtbot.waitUntil(lambda: warmed(lambda m: "weather" in m[0]["content"] and len(m) == 4))

        question = history.messages(window.session_id)[0]["id"]
        window.edit_message(question)
        qtbot.waitUntil(lambda: warmed(lambda m: [x["role"] for x in m] == ["system", "user"]))
        router.script(Reply(content="Alpaca."))
        window.composer.set_text("Name an alpaca.")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        shown = len(_warmups(router))
        assert window.chat.show_version(question)
        qtbot.waitUntil(
            lambda: any(
                [(x["role"], x["content"]) for x in w.json["messages"][1:]] == first
                for w in _warmups(router)[shown:]
            )
        )

    def test_warm_cache_never_loads_a_model_and_warms_it_once_loaded(
        self, chat_window, qtbot
    ) -> None:
        """An unloaded model is not warmed (nothing is sent); once it finished loading it is,
        with autoload=false on the wire."""

        with ScriptedRouter([Model("test-model", "unloaded")]) as cold:
            window, _history = chat_window(url=cold.url, warm_cache=True)
            window.chat.warmer.trigger(0)
            qtbot.waitUntil(lambda: not window.chat.warmer.busy())
            assert cold.chat_requests() == [] and cold.status("test-model") == "unloaded"
            window.model_picker.load("test-model")
            qtbot.waitUntil(lambda: len(_warmups(cold)) == 1, timeout=10000)
            assert _warmups(cold)[0].query == {"autoload": "false"}
            window.close()

    def test_warm_cache_skips_a_providers_model_unless_the_setting_says_so(
        self, conversation, router, qtbot
    ) -> None:
        """A provider bills for what it reads: its models are warmed only with
        warm_cache_providers (and without the router's autoload query)."""

        cloud = ProviderConfig("cloud", router.url + "/v1")
        chat, _history = conversation(cfg={"warm_cache": True, "providers": (cloud,)})
        chat.model = "cloud/test-model"
        qtbot.waitUntil(lambda: not chat.warmer.busy())
        assert router.chat_requests() == []

        settings = {"warm_cache": True, "warm_cache_providers": True, "providers": (cloud,)}
        billed, _history = conversation(cfg=settings)
        billed.model = "cloud/test-model"
        qtbot.waitUntil(lambda: len(_warmups(router)) == 1 and not billed.warmer.busy())
        warm = _warmups(router)[0]
        assert warm.json["model"] == "test-model" and warm.query == {}

    def test_warm_cache_send_during_a_warm_up_waits_for_it_and_reads_only_the_message(
        self, chat_window, router, qtbot
    ) -> None:
        """Send while the chat is being read ahead: the warm-up is not cancelled (the server
        would read it all the same) and the request goes once it ended, reading only the
        new message."""

        router.prompt_ms_per_token = 2.0
        window, history = chat_window(warm_cache=True)
        qtbot.waitUntil(lambda: len(_warmups(router)) == 1 and not window.chat.warmer.busy())
        session = _llama_chat(history)
        window.open_session(session)
        qtbot.waitUntil(lambda: len(_warmups(router)) == 2)
        window.composer.set_text("And alpacas?")
        window.send()
        assert window.is_streaming() and window.chat.warmer.busy()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=20000)
        warm, sent = _warmups(router)[1], router.chat_requests()[-1]
        assert sent.json.get("max_tokens") != 0 and sent.received >= warm.finished
        assert router.disconnects == 0
        assert history.messages(session)[-1]["timings"]["prompt_n"] < 15

    def test_chrome_window_layout_holds_for_long_statuses_errors_and_titles(
        self, chat_window, router, qtbot
    ) -> None:
        """A long "Loading …" or error beside the picker is elided (whole in its tooltip) and
        moves neither the sidebar nor the window's minimum; a long status message is whole in
        the status bar's tooltip; a long chat title is elided, with no horizontal scrollbar."""
        from llamachat.ui import plain

        long_id = "an-unusually-long-model-name-for-a-local-model-Q4_K_M-instruct-2025-final"
        _chrome_models(router, Model(long_id, "unloaded"))
        router.load_delay = 0.5
        window, history = chat_window()
        window.resize(900, 600)
        picker = window.model_picker
        qtbot.waitUntil(lambda: long_id in _combo_ids(picker.combo))
        qtbot.wait(50)
        sizes = window.splitter.sizes()
        picker.combo.setCurrentIndex(picker.combo.findData(long_id))
        assert picker.status_label.text() == "Loading…"
        assert picker.status_label.toolTip() == f"Loading {long_id}…"
        qtbot.wait(50)
        assert window.splitter.sizes() == sizes
        assert picker.status_label.width() >= picker.status_label.minimumSizeHint().width()

        error = f"{long_id} failed to load: the server explains at length"
        plain.set_text(picker.status_label, error)
        qtbot.wait(50)
        floor = window.minimumSizeHint().width()
        plain.set_text(picker.status_label, error * 5)
        qtbot.wait(50)
        assert window.splitter.sizes() == sizes
        assert window.minimumSizeHint().width() == floor
        qtbot.waitUntil(lambda: picker.status(long_id) == "loaded", timeout=10_000)

        error = "The router said: " + "a very long explanation of what went wrong " * 5
        window.show_status(error, timeout=0)
        assert window.statusBar().toolTip() == error

        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "word " * 60)
        window.sidebar.refresh()
        view = window.sidebar.list_view
        qtbot.wait(50)
        assert view.horizontalScrollBar().maximum() == 0
        rect = view.visualRect(window.sidebar.model.index(window.sidebar.model.row_of(session)))
        assert rect.width() <= view.viewport().width()

    def test_chrome_window_accessible_names_all_present(self, chat_window, qtbot) -> None:
        """Every piece of the chrome has the accessible name screen readers and tests use."""

        window, _history = chat_window(search_url="http://127.0.0.1:9")
        for name in (
            "Model",
            "Prompt preset",
            "Sessions",
            "Search sessions",
            "New chat",
            "Context meter",
            "Skills",
            "Settings",
            "Web search",
            "Message",
            "Send",
        ):
            shown = [w for w in window.findChildren(QWidget) if w.accessibleName() == name]
            assert [w for w in shown if w.isVisible()], f"no visible widget named {name!r}"

    @offscreen_popup
    def test_chrome_window_top_bar_at_the_least_size_keeps_the_model_name_and_buttons_whole(
        self, router, chat_window, qtbot
    ) -> None:

        name = "SmolLM2-360M-Instruct-Q8_0"
        _chrome_models(router, Model(name, "loaded"))
        window, _history = chat_window(default_model=name)
        qtbot.waitUntil(lambda: window.model_picker.combo.currentData() == name, timeout=5000)
        bar = window.top_bar
        window.resize(1180, 800)
        qtbot.waitUntil(lambda: not bar.is_wrapped() and not bar.is_folded())
        window.resize(window.minimumSize())
        qtbot.waitUntil(lambda: window.width() == window.minimumWidth())
        combo = window.model_picker.combo
        qtbot.waitUntil(lambda: bar.is_wrapped() or bar.is_folded())
        # The layout follows the wrap or fold at its next pass.
        qtbot.waitUntil(lambda: combo.width() >= combo.sizeHint().width())
        assert combo.width() >= combo.fontMetrics().horizontalAdvance(name)
        inside = bar.rect()
        for button in bar.findChildren(QToolButton):
            if button.isVisible():
                assert button.width() >= button.sizeHint().width(), button.text()
                assert inside.contains(QRect(button.mapTo(bar, QPoint(0, 0)), button.size()))
        # Folded or not, every command is there: as a button, or in the "»" menu.
        if bar.is_folded():
            menu = bar.more_button.menu()
            shown = [a.text().partition("\t")[0] for a in menu.actions()]  # after it: the keys
            assert shown == ["Web search", "Skills…", "Settings…"]
        else:
            assert bar.settings_button.isVisible() and bar.skills_button.isVisible()
        window.resize(1000, 700)
        qtbot.waitUntil(lambda: not bar.is_wrapped())

    def test_chrome_popup_opens_above_its_anchor_within_the_screen(self) -> None:

        screen = QRect(0, 0, 1600, 1000)
        size = QSize(300, 200)
        assert above(QRect(100, 700, 400, 60), size, screen) == QPoint(100, 500)
        # No room above, more below: under the anchor.
        assert above(QRect(100, 50, 400, 60), size, screen) == QPoint(100, 110)
        # Kept inside the screen at its right and bottom edges.
        assert above(QRect(1500, 900, 80, 20), size, screen) == QPoint(1300, 700)
        assert above(QRect(100, 950, 80, 50), QSize(300, 1200), screen) == QPoint(100, 0)

    @offscreen_popup
    def test_chrome_window_gets_the_focus_back_when_a_dialog_closes(
        self, chat_window, qtbot
    ) -> None:

        window, _history = chat_window()
        to_composer = (window.show_shortcuts, window.open_mcp_panel)
        for open_dialog in (*to_composer, window.open_settings, window.preset_picker.edit_presets):
            window.activateWindow()
            qtbot.waitUntil(window.isActiveWindow)
            window.sidebar.search_field.setFocus()
            dialog = open_dialog()
            dialog.activateWindow()
            qtbot.waitUntil(dialog.isActiveWindow)
            dialog.reject()
            qtbot.waitUntil(window.isActiveWindow)
            if open_dialog in to_composer:
                qtbot.waitUntil(window.composer.editor.hasFocus)


class TestConversation:
    """`llamachat.ui.chat`: one conversation's logic (`Conversation`, `Outbox`, `ReplyStream`)."""

    @pytest.mark.parametrize(
        ("answer", "status", "content"),
        [
            (Reply(content=["Hello ", "there."]), "complete", "Hello there."),
            (Reply(status=500, error={"message": "boom"}), "error", ""),
        ],
        ids=["with-text", "failed-without-text"],
    )
    def test_reply_whose_row_cannot_be_added_at_start_is_saved_once_there_is_room(
        self, chat_window, router, qtbot, answer, status, content
    ) -> None:
        """The reply's row is added once its request is out; History full then (a full
        disk): the reply goes on, and its saves add the row once there is room, its outcome
        with it, a failure without text as well."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(session, "user", "hi")
        before = history.message_count(session)
        pages = history._conn.execute("PRAGMA page_count").fetchone()[0]
        history._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
        # Every free byte taken, so even an empty reply needs a page there is none of.
        filler = history.create_session("chat", "test-model", prompt_name="Default")
        for size in (4000, 400, 40, 0):
            with pytest.raises(HistoryError):
                while True:
                    history.add_message(filler, "assistant", "x" * size, model="test-model")
        router.script(answer)
        reply = ReplyStream(
            history,
            window.app.registry,
            session_id=session,
            model="test-model",
            messages=[{"role": "user", "content": "hi"}],
        )
        ended: list[str] = []
        reply.ended.connect(lambda outcome, _error: ended.append(outcome))
        reply.start(WorkerThreads(reply))
        assert reply.message_id is None
        qtbot.waitUntil(lambda: ended == [status], timeout=10000)
        assert not reply.is_saved()

        history._conn.execute("PRAGMA max_page_count = 1073741823")  # room again
        qtbot.waitUntil(reply.is_saved, timeout=5000)
        assert history.message_count(session) == before + 1
        saved = history.messages(session)[-1]
        assert (saved["role"], saved["status"], saved["content"]) == ("assistant", status, content)

    def test_conversation_controller_loads_no_widget_module(self) -> None:
        """The conversation and its reply import no widgets: a window is only their viewer."""

        code = (
            "import sys, llamachat.ui.chat.session\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith("
            "('PySide6.QtWidgets', 'PySide6.QtGui')))))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert out == "", f"the controller pulled in: {out}"

    def test_conversation_without_a_window_sends_saves_and_replays(
        self, conversation, router, qtbot
    ) -> None:
        """The controller alone: a message is saved, its reply streams into History, and the
        next request replays both; a `/name` loads the skill into the session."""

        chat, history = conversation(preset=lambda: "Be brief.")
        added: list = []
        started: list = []
        chat.message_added.connect(added.append)
        chat.reply_started.connect(started.append)
        router.script(Reply(content=["Hello", " there."]))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000) as ended:
            assert chat.submit("/weather Hi") == controller.SENT
        assert ended.args == ["complete", ""]
        assert [m["content"] for m in added] == ["Hi"]
        assert started[0].view is None  # nobody attached a view: the reply streams all the same
        rows = history.messages(chat.session_id)
        assert [(m["role"], m["content"], m["status"]) for m in rows] == [
            ("user", "Hi", "complete"),
            ("assistant", "Hello there.", "complete"),
        ]
        assert history.get_session(chat.session_id)["skills"] == ["weather"]
        assert chat.loaded_skills() == ["weather"]

        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("And again") == controller.SENT
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[0]["role"] == "system" and sent[0]["content"].startswith("Be brief.")
        assert "Celsius" in sent[0]["content"]
        assert [(m["role"], m["content"]) for m in sent[1:]] == [
            ("user", "Hi"),
            ("assistant", "Hello there."),
            ("user", "And again"),
        ]
        assert chat.submit("/finance-cli") == controller.HELD
        assert len(router.chat_requests()) == 2
        assert chat.loaded_skills() == ["weather", "finance-cli"]

    def test_conversation_oneshot_drops_its_skills_after_the_answer_and_retry_asks_them_again(
        self, conversation, router, qtbot
    ) -> None:
        """One-shot: every question is a new session; its skills serve that answer only, and a
        retry of the answer asks with them again."""

        chat, history = conversation(mode=controller.ONESHOT)
        assert chat.submit("/weather") == controller.HELD
        assert chat.loaded_skills() == ["weather"]
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("Rain tomorrow?") == controller.SENT
        first = chat.session_id
        assert history.get_session(first)["mode"] == "oneshot"
        assert history.get_session(first)["skills"] == []
        assert chat.loaded_skills() == []
        assert "Celsius" in router.chat_requests()[-1].json["messages"][0]["content"]

        reply_id = history.messages(first)[-1]["id"]
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.retry(reply_id)
        assert "Celsius" in router.chat_requests()[-1].json["messages"][0]["content"]
        assert [m["content"] for m in history.messages(first)] == [
            "Rain tomorrow?",
            "echo: Rain tomorrow?",
        ]
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            chat.submit("Another")
        assert chat.session_id != first
        assert "Celsius" not in router.chat_requests()[-1].json["messages"][0]["content"]

    def test_conversation_retry_keeps_the_earlier_reply_until_the_new_one_has_text(
        self, conversation, router, qtbot
    ) -> None:
        """A retry leaves the saved reply in place while the new attempt has produced nothing;
        an attempt that fails with no text keeps it for good, one with text replaces it."""

        chat, history = conversation()
        router.script(Reply(content="Old answer."))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            chat.submit("Question")
        old_id = history.messages(chat.session_id)[-1]["id"]
        before = [(m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)]

        router.script(Reply(status=500, error={"message": "the model crashed"}))
        notices: list = []
        chat.notice.connect(lambda text, _ms: notices.append(text))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000) as ended:
            assert chat.retry(old_id)
        assert ended.args[0] == "error"
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)
        ] == (before)
        assert "the model crashed" in notices[-1] and "earlier reply is kept" in notices[-1]

        # Reasoning alone is no answer: the connection dies before any text, the reply stays.
        router.script(Reply(reasoning=["Let me ", "think ", "again."], die_after=2))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000) as ended:
            assert chat.retry(old_id)
        assert ended.args[0] == "error"
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)
        ] == (before)
        assert history.messages(chat.session_id)[-1]["reasoning"] == ""

        router.script(Reply(content=["New ", "answer."], stall_after=0))
        assert chat.retry(old_id)
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 4, timeout=5000)
        # Asked again, nothing back yet: the earlier reply is still what History holds.
        assert history.messages(chat.session_id)[-1]["content"] == "Old answer."
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            router.release()
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)
        ] == [
            ("user", "Question", "complete"),
            ("assistant", "New answer.", "complete"),
        ]
        # The reply being replaced is not part of the request that replaces it.
        assert [m["role"] for m in router.chat_requests()[-1].json["messages"]] == ["user"]

    def test_window_disk_full_keeps_the_reply_marks_it_unsaved_and_saves_it_when_room_is_back(
        self, chat_window, router, qtbot
    ) -> None:
        """History full mid-reply (max_page_count): the reply stays whole on screen, marked
        "not saved"; nothing is sent while History lags; once there is room it is saved whole
        without any action, and the next request carries the whole reply."""

        # Room in the context for the long reply and the message after it.
        router.models["test-model"].n_ctx = 32768
        window, history = chat_window()
        tail = ["word " * 2000, "more " * 2000, "end."]
        # The worker hands on a piece once the next one arrived: two show before the stall.
        router.script(Reply(content=["kept ", "early ", "then ", *tail], stall_after=3))
        window.composer.set_text("Write a lot")
        window.send()

        def streaming_row() -> dict:
            return history.messages(window.session_id)[-1]

        qtbot.waitUntil(lambda: streaming_row()["content"] == "kept early ", timeout=5000)
        pages = history._conn.execute("PRAGMA page_count").fetchone()[0]
        history._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        whole = "kept early then " + "".join(tail)
        view = window.conversation.last_assistant()
        assert view.content() == whole
        assert "Not saved" in view.unsaved_text()
        assert streaming_row()["content"] == "kept early "
        assert "could not be saved" in window.problem_bar.text()

        asked = len(router.chat_requests())
        window.composer.set_text("Go on")
        window.send()
        assert len(router.chat_requests()) == asked
        assert window.composer.text() == "Go on"
        assert "not saved yet" in window.problem_bar.text()

        history._conn.execute("PRAGMA max_page_count = 1073741823")  # room again
        qtbot.waitUntil(lambda: streaming_row()["content"] == whole, timeout=5000)
        assert streaming_row()["status"] == "complete"
        assert view.unsaved_text() == ""

        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        replayed = router.chat_requests()[-1].json["messages"]
        assert [(m["role"], m["content"]) for m in replayed[1:]] == [
            ("user", "Write a lot"),
            ("assistant", whole),
            ("user", "Go on"),
        ]

    def test_fault_sigkill_mid_reply_keeps_the_reply_up_to_the_last_second(
        self, router, tmp_path: Path
    ) -> None:
        """llamachat SIGKILLed while a reply streams: on reopen the row holds what arrived by
        a second before the kill (plus scheduling slack), a prefix of the reply; the file is sound."""
        import signal

        pieces = [f"w{n:04d} " for n in range(9000)]
        router.script(Reply(content=pieces, delay=0.01))
        relay = _TimedRelay(int(router.url.rsplit(":", 1)[1]))
        db = tmp_path / "history.db"
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        with (tmp_path / "child.log").open("wb") as log:
            child = subprocess.Popen(
                [sys.executable, "-c", _SIGKILL_CHILD, relay.url, str(tmp_path)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:

            def saved_text() -> str:
                if not db.exists():
                    return ""
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                try:
                    row = conn.execute(
                        "SELECT content FROM messages WHERE role = 'assistant' ORDER BY id DESC"
                    ).fetchone()
                finally:
                    conn.close()
                return row[0] if row else ""

            deadline = time.monotonic() + 90
            first = None
            while time.monotonic() < deadline and child.poll() is None:
                if first is None and relay.content_until(time.monotonic()):
                    first = time.monotonic()
                # Two full save periods of streaming, and a save seen on disk.
                if first is not None and time.monotonic() - first > 2.5 and saved_text():
                    break
                time.sleep(0.05)
            assert child.poll() is None, (tmp_path / "child.log").read_text()
            assert first is not None, "no reply text reached llamachat"
            killed_at = time.monotonic()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            relay.close()

        full = "".join(pieces)
        sent_by_kill = relay.content_until(killed_at)
        # The window saves at most once a second; half a second more for a busy shared machine.
        sent_a_second_before = relay.content_until(killed_at - 1.5)
        with History(db) as history:
            [session] = history.list_sessions()
            user, reply = history.messages(session["id"])
        assert (user["content"], reply["status"]) == ("Tell me a long story", "streaming")
        text = reply["content"]
        assert text and full.startswith(text) and sent_by_kill.startswith(text)
        assert len(text) >= len(sent_a_second_before), (len(text), len(sent_a_second_before))
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()


class TestBranches:
    """Reply versions, edit branches and forks in the real chat window."""

    def _texts(self, window) -> list[str]:
        return [view.content() for view in window.conversation.views()]

    def test_regenerate_adds_versions_and_the_arrows_walk_them(
        self, chat_window, router, qtbot
    ) -> None:
        """Three regenerations make `4/4`; ‹ shows the third version, and the next request
        replays exactly the path on screen."""

        window, history = chat_window()
        router.script(Reply(content="First."))
        _send(qtbot, window, "Name a llama.")
        for text in ("Second.", "Third.", "Fourth."):
            router.script(Reply(content=text))
            reply = window.conversation.last_assistant()
            qtbot.mouseClick(_button(reply, "Regenerate"), Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
            qtbot.waitUntil(
                lambda text=text: window.conversation.last_assistant().content() == text
            )
        reply = window.conversation.last_assistant()
        qtbot.waitUntil(lambda: reply.version_text() == "4/4")
        assert not _button(reply, "Next version").isEnabled()
        qtbot.mouseClick(_button(reply, "Previous version"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: self._texts(window) == ["Name a llama.", "Third."])
        shown = window.conversation.last_assistant()
        assert shown.version_text() == "3/4"
        assert history.message_count(window.session_id) == 5

        router.script(Reply(content="Because."))
        _send(qtbot, window, "Why?")
        sent = router.chat_requests()[-1].json["messages"]
        assert [(m["role"], m["content"]) for m in sent if m["role"] != "system"] == [
            ("user", "Name a llama."),
            ("assistant", "Third."),
            ("user", "Why?"),
        ]
        # Reopened, the chat shows the path last shown.
        window.new_session()
        assert window.open_session(history.list_sessions()[0]["id"])
        assert self._texts(window) == ["Name a llama.", "Third.", "Why?", "Because."]

    def test_a_failed_reply_is_replaced_not_kept_as_a_version(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        router.script(Reply(status=500, error={"message": "model crashed"}))
        _send(qtbot, window, "Hello")
        router.script(Reply(content="Hi."))
        failed = window.conversation.last_assistant()
        qtbot.mouseClick(_button(failed, "Retry"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: self._texts(window) == ["Hello", "Hi."])
        assert window.conversation.last_assistant().version_text() == ""
        assert history.message_count(window.session_id) == 2

    def test_regenerate_after_stop_keeps_the_stopped_reply_as_a_version(
        self, chat_window, router, qtbot
    ) -> None:
        """A stopped reply with text is a version like any other: Regenerate adds `2/2`,
        and ‹ shows the stopped text, still in History."""

        window, history = chat_window()
        router.script(Reply(content=["Half ", "an ", "answer"], stall_after=2))
        window.composer.set_text("Tell me")
        window.send()
        qtbot.waitUntil(lambda: window.conversation.last_assistant().content() == "Half ")
        window.stop()
        router.release()
        stopped = window.conversation.last_assistant()
        router.script(Reply(content="Whole answer."))
        qtbot.mouseClick(_button(stopped, "Regenerate"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: self._texts(window) == ["Tell me", "Whole answer."])
        reply = window.conversation.last_assistant()
        qtbot.waitUntil(lambda: reply.version_text() == "2/2")
        rows = history._conn.execute(
            "SELECT content, status FROM messages WHERE role = 'assistant' ORDER BY id"
        ).fetchall()
        assert [tuple(row) for row in rows] == [("Half ", "stopped"), ("Whole answer.", "complete")]
        qtbot.mouseClick(_button(reply, "Previous version"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: self._texts(window) == ["Tell me", "Half "])
        assert window.conversation.last_assistant().version_text() == "1/2"

    def test_edits_are_branches_switched_with_alt_arrows(self, chat_window, router, qtbot) -> None:
        """Editing a question twice gives `3/3` on it; Alt+Left in the message shows the
        second branch with its own reply; the first branch is still there."""

        window, history = chat_window()
        router.script(Reply(content="Dolly."))
        _send(qtbot, window, "Name a llama.")
        for text in ("Name an alpaca.", "Name a vicuna."):
            router.script(Reply(content=f"For: {text}"))
            question = window.conversation.views()[0]
            qtbot.mouseClick(_button(question, "Edit message"), Qt.MouseButton.LeftButton)
            editor = _by_name(window, QPlainTextEdit, "Message")
            editor.selectAll()
            _send(qtbot, window, text)
        assert self._texts(window) == ["Name a vicuna.", "For: Name a vicuna."]
        question = window.conversation.views()[0]
        assert question.version_text() == "3/3"
        assert history.get_session(window.session_id)["title"] == "Name a vicuna."

        body = _by_name(question, QTextBrowser, "Message text")
        body.setFocus()
        qtbot.waitUntil(body.hasFocus)
        qtbot.keyClick(body, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)
        qtbot.waitUntil(lambda: self._texts(window) == ["Name an alpaca.", "For: Name an alpaca."])
        assert window.conversation.views()[0].version_text() == "2/3"
        first = window.conversation.views()[0]
        qtbot.mouseClick(_button(first, "Previous version"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: self._texts(window) == ["Name a llama.", "Dolly."])
        assert history.message_count(window.session_id) == 6

    def test_new_chat_from_here_opens_a_copy_of_the_path_up_to_the_message(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        router.script(Reply(content="Dolly."))
        _send(qtbot, window, "/weather Name a llama.")
        router.script(Reply(content="Because."))
        _send(qtbot, window, "Why?")
        original = window.session_id
        reply = window.conversation.views()[1]
        assert reply.more_actions() == ["New chat from here"]
        reply.trigger_more("New chat from here")
        qtbot.waitUntil(lambda: window.session_id != original)
        assert self._texts(window) == ["Name a llama.", "Dolly."]
        assert window.chat.loaded_skills() == ["weather"]
        model = window.sidebar.model
        listed = [model.data(model.index(row)) for row in range(model.rowCount())]
        assert "Name a llama. (fork)" in listed and window.sidebar.current() == window.session_id
        assert history.message_count(original) == 4

        router.script(Reply(content="Kuzco."))
        _send(qtbot, window, "Another?")
        sent = router.chat_requests()[-1].json["messages"]
        assert [m["content"] for m in sent if m["role"] != "system"] == [
            "Name a llama.",
            "Dolly.",
            "Another?",
        ]


class TestApp:
    """`llamachat.ui.app`, `ui.tasks`: one owner of state, one runner, the crash handler."""

    @quick_offscreen
    def test_app_settings_saved_in_a_window_reach_windows_opened_later(
        self, router, qtbot, tmp_path
    ) -> None:
        """Settings saved in the chat window reach a quick window opened afterwards and a chat
        window reopened from the tray: theme, search, default model and max_searches."""

        cfg = _app_cfg_file(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(_app(cfg, history), tray=True)
        try:
            chat = running.show_chat()
            qtbot.waitUntil(lambda: bool(chat.models()))
            assert chat.cfg.theme == "system" and not chat.web_search.button.isVisible()
            dialog = chat.open_settings()
            dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
            dialog.search_url.setText("http://127.0.0.1:9")
            dialog.default_model.setCurrentText("test-model")
            assert dialog.save()
            assert not dialog.isVisible()
            # A key Settings does not show, saved through the same owner.
            running.app.save_settings({"max_searches": 2})
            assert chat.web_search.button.isVisible()

            chat.close()
            qtbot.waitUntil(lambda: running.chat_window() is None)
            running.tray.open_requested.emit()
            reopened = running.chat_window()
            assert reopened is not None and reopened is not chat and reopened.isVisible()
            assert reopened.cfg.theme == "dark" and reopened.cfg.max_searches == 2
            assert reopened.web_search.button.isVisible() and reopened.web_search.is_on()
            assert reopened.current_model() == "test-model"
            assert reopened.model_picker.default_model() == "test-model"

            quick = running.quick_window()
            assert quick.cfg.theme == "dark" and quick.current_model() == "test-model"
            web_search = turn.search_config(quick.cfg)
            assert web_search is not None and web_search.max_searches == 2
            assert web_search.url == "http://127.0.0.1:9"
            window_colour = QApplication.palette().color(QPalette.ColorRole.Window).name()
            assert window_colour == "#2b2b2e"
            assert not [d for d in reopened.findChildren(QDialog) if d.isVisible()]

            # A model asked for (`ask --model`) outlasts settings that name no other one.
            quick.set_model("asked-for")
            running.app.save_settings({"font_size": 15})
            assert quick.current_model() == "asked-for"
            running.app.save_settings({"default_model": "another"})
            assert quick.current_model() == "another"
        finally:
            running.shutdown()
            running.app.close()
            history.close()
            apply_theme(QApplication.instance(), "light")

    def test_app_settings_keep_the_router_in_use_unless_the_file_names_another(
        self, router, qtbot, tmp_path
    ) -> None:
        """A router found or started elsewhere stays in use when Settings change only the key or
        the providers; a new router_url in the file replaces it. Each change is one new registry."""

        cfg = _app_cfg_file(router, tmp_path)
        with History(cfg.history_path) as history:
            state = _app(cfg, history)
            try:
                changes: list[tuple[str, str]] = []
                state.router_changed.connect(lambda now: changes.append((now.status, now.url)))
                first = state.registry
                state.use_router("http://127.0.0.1:9")
                assert state.config.router_url == "http://127.0.0.1:9"
                assert state.file_config.router_url == router.url
                started = state.registry
                assert started is not first

                state.save_settings({"router_api_key_env": "MY_KEY"})
                assert state.config.router_url == "http://127.0.0.1:9"
                assert state.config.router_api_key_env == "MY_KEY"
                assert state.registry is not started

                state.save_settings({"router_url": "http://127.0.0.1:10"})
                assert state.config.router_url == "http://127.0.0.1:10"
                assert changes == [
                    (READY, "http://127.0.0.1:9"),
                    (CONFIGURED, "http://127.0.0.1:9"),
                    (CONFIGURED, "http://127.0.0.1:10"),
                ]
            finally:
                state.close()

    def test_app_theme_switch_restyles_the_open_sidebar_and_conversation(
        self, chat_window, qtbot
    ) -> None:
        """Switching the theme while a chat is open restyles the sidebar (which has a style
        sheet of its own) and re-renders the conversation's messages in the new palette."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "show me code")
        history.add_message(session, "assistant", "Here:\n\n```python\nx = 1\n```\n\nand `y`.")
        window.sidebar.refresh()
        assert window.open_session(session)
        reply = window.conversation.last_assistant()

        def sidebar_pixel() -> str:
            view = window.sidebar.list_view.viewport()
            image = view.grab().toImage()
            return image.pixelColor(image.width() - 2, image.height() - 2).name()

        try:
            assert reply.palette_name() == "light" and sidebar_pixel() == "#ffffff"
            assert LIGHT.code_background in reply.text_document().toHtml()
            window.app.save_settings({"theme": "dark"})
            qtbot.waitUntil(lambda: reply.palette_name() == "dark")
            base = window.sidebar.list_view.palette().color(QPalette.ColorRole.Base).name()
            assert base == "#1f1f22" and sidebar_pixel() == "#1f1f22"
            html = reply.text_document().toHtml()
            assert DARK.code_background in html and LIGHT.code_background not in html
            assert "x = 1" in reply.text_document().toPlainText()
            assert reply.content() == "Here:\n\n```python\nx = 1\n```\n\nand `y`."

            window.app.save_settings({"theme": "light"})
            qtbot.waitUntil(lambda: reply.palette_name() == "light")
            assert sidebar_pixel() == "#ffffff"
            assert LIGHT.code_background in reply.text_document().toHtml()

            height = reply.height()
            window.app.save_settings({"font_size": 24})
            qtbot.waitUntil(lambda: reply.text_document().defaultFont().pointSize() == 24)
            qtbot.waitUntil(lambda: reply.height() > height)
        finally:
            apply_theme(QApplication.instance(), "light")

    def test_app_built_before_any_window_applies_the_theme(self, qtbot, tmp_path) -> None:
        """A cold `llamachat ask` builds the App before its quick window: theme = "dark" holds."""

        cfg = Config(
            theme="dark",
            router_url="http://127.0.0.1:9",
            default_model="m",
            history_path=tmp_path / "h.db",
            prompts_dir=tmp_path / "p",
        )
        with History(cfg.history_path) as history:
            state = _app(cfg, history)
            quick = QuickWindow(state)
            qtbot.addWidget(quick)
            try:
                base = quick.palette().color(QPalette.ColorRole.Window).name()
                assert base == "#2b2b2e"
            finally:
                quick.close()
                state.close()
                apply_theme(QApplication.instance(), "light")

    def test_tasks_result_and_exception_reach_on_done_on_the_gui_thread(self, qtbot) -> None:
        """run_in_background: the result, or the task's exception, reaches on_done on the GUI
        thread; a receiver deleted meanwhile is not called; run_on_main runs on the GUI thread."""

        gui = threading.get_ident()
        seen: list[tuple[str, object, int]] = []
        release = threading.Event()

        def on_done(future) -> None:
            try:
                seen.append(("result", future.result(), threading.get_ident()))
            except ValueError as exc:
                seen.append(("error", str(exc), threading.get_ident()))

        def fail() -> None:
            raise ValueError("disk on fire")

        runner = tasks.manager()
        runner.run_in_background(lambda: threading.get_ident(), on_done)
        runner.run_in_background(fail, on_done)
        qtbot.waitUntil(lambda: len(seen) == 2)
        by_kind = {kind: (value, thread) for kind, value, thread in seen}
        assert by_kind["result"][0] != gui  # the task ran off the GUI thread
        assert by_kind["result"][1] == gui and by_kind["error"] == ("disk on fire", gui)

        receiver = QObject()
        dead: list[object] = []
        runner.run_in_background(release.wait, dead.append, receiver=receiver)
        alive = QObject()
        runner.run_in_background(
            lambda: 7, lambda future: dead.append(future.result()), receiver=alive
        )
        receiver.deleteLater()
        qtbot.waitUntil(lambda: dead == [7])
        release.set()
        qtbot.waitUntil(lambda: runner.running() == 0)
        ran: list[int] = []
        runner.run_on_main(lambda: ran.append(threading.get_ident()))
        qtbot.waitUntil(lambda: bool(ran))
        assert dead == [7] and ran == [gui]

        daemon_threads: list[bool] = []
        runner.run_in_background(
            lambda: threading.current_thread().daemon,
            lambda future: daemon_threads.append(future.result()),
            daemon=True,
        )
        qtbot.waitUntil(lambda: bool(daemon_threads))
        assert daemon_threads == [True]

    @quick_offscreen
    def test_excepthook_logs_a_bug_and_shows_it_once_a_fault_as_a_message(
        self, qtbot, tmp_path, caplog
    ) -> None:
        """A bug is logged with its traceback and shown once in a plain-text dialog; the same bug
        again is logged, not shown; an environment fault is a message without a traceback."""

        def bug() -> None:
            raise KeyError("<b>not bold</b>")

        cfg = Config(
            router_url="http://127.0.0.1:9",
            history_path=tmp_path / "h.db",
            prompts_dir=tmp_path / "p",
        )
        before = sys.excepthook
        with History(cfg.history_path) as history:
            state = _app(cfg, history)
            hook = state.install_excepthook()
            try:
                assert sys.excepthook == hook.handle
                for _ in range(2):
                    try:
                        bug()
                    except KeyError:
                        sys.excepthook(*sys.exc_info())
                [shown] = hook.dialogs
                assert shown.isVisible() and shown.textFormat() == Qt.TextFormat.PlainText
                assert "<b>not bold</b>" in shown.text()
                assert "in bug" in shown.detailedText() and "KeyError" in shown.detailedText()
                bugs = [r for r in caplog.records if r.name == "llamachat.ui.app" and r.exc_info]
                assert len(bugs) == 2 and bugs[0].exc_info[0] is KeyError

                try:
                    raise HistoryError("the disk is full")
                except HistoryError:
                    sys.excepthook(*sys.exc_info())
                assert len(hook.dialogs) == 2
                message = hook.dialogs[-1]
                assert message.text() == "the disk is full" and not message.detailedText()
            finally:
                for dialog in hook.dialogs:
                    dialog.close()
                state.close()
        assert sys.excepthook == before

    def test_app_autostart_setting_writes_and_removes_the_login_entry(
        self, router, qtbot, tmp_path
    ) -> None:
        """Saving autostart = true writes $XDG_CONFIG_HOME/autostart/llamachat.desktop (starting
        llamachat in the background with this config); saving false removes it."""
        cfg = _app_cfg_file(router, tmp_path)
        login = Path(os.environ["XDG_CONFIG_HOME"]) / "autostart" / "llamachat.desktop"
        with History(cfg.history_path) as history:
            state = _app(cfg, history)
            try:
                state.save_settings({"autostart": True})
                assert f"--config {cfg.path} --background\n" in login.read_text()
                state.save_settings({"autostart": False})
                assert not login.exists() and not login.parent.exists()
            finally:
                state.close()


class TestPlainText:
    """`llamachat.ui.plain`: text from outside is never markup."""

    @offscreen_dialogs
    def test_plain_helpers_keep_outside_text_from_being_read_as_rich_text(self, qtbot) -> None:
        """The one way outside text reaches Qt: plain labels, escaped tooltips, plain message boxes."""

        from llamachat.ui import plain

        label = plain.Label(HOSTILE)
        qtbot.addWidget(label)
        assert label.textFormat() == Qt.TextFormat.PlainText and label.text() == HOSTILE
        other = QLabel()
        qtbot.addWidget(other)
        plain.set_text(other, HOSTILE)
        assert other.textFormat() == Qt.TextFormat.PlainText
        for text in (HOSTILE, f"Error: {HOSTILE}\n  two  spaces", "&lt;b&gt; is a tag"):
            tip = plain.tooltip(text)
            assert QTextDocumentFragment.fromHtml(tip).toPlainText() == text
        assert plain.tooltip("Context of qwen: 1 of 2 tokens") == "Context of qwen: 1 of 2 tokens"
        assert plain.tooltip("") == ""
        box = plain.message_box(None, QMessageBox.Icon.Critical, "llamachat", HOSTILE)
        qtbot.addWidget(box)
        assert box.textFormat() == Qt.TextFormat.PlainText and box.text() == HOSTILE
        assert _outside_text_places()

        hook = ExceptionHook()  # a bug's message, and an environment fault's, are outside text
        for exc in (RuntimeError(HOSTILE), HistoryError(HOSTILE)):
            hook.handle(type(exc), exc, None)
        try:
            assert len(hook.dialogs) == 2
            shown = [where for where in _outside_text_places() if "qt_msgbox_label" in where]
            assert len(shown) == 3  # the helper's box and the two hook dialogs
        finally:
            for dialog in hook.dialogs:
                dialog.close()

    def test_outside_text_router_provider_and_start_up_errors_show_as_text(
        self, chat_window, router, hostile_server, qtbot
    ) -> None:
        """An HTML error page from the router or a provider shows as text, at start-up, unasked."""

        window, _history = chat_window(url=hostile_server.url, listed=False)
        label = window.model_picker.status_label
        qtbot.waitUntil(lambda: HOSTILE in label.text(), timeout=10_000)
        assert "Model status" in " ".join(_outside_text_places())
        window.close()

        window, _history = chat_window(providers=(ProviderConfig("evil", hostile_server.url, ""),))
        label = window.model_picker.status_label
        qtbot.waitUntil(lambda: "evil" in label.text() and HOSTILE in label.text(), timeout=10_000)
        assert "Model status" in " ".join(_outside_text_places())

        window.app.router_failed(f"llama-server said: {HOSTILE}")
        places = " ".join(_outside_text_places())
        assert "Getting started" in places

    @offscreen_dialogs
    def test_outside_text_in_replies_skills_titles_and_file_names_shows_as_text(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Reply errors (live and reopened), skill descriptions, chat titles, file names: text."""

        _write_skill(
            tmp_path / "skills",
            "evil",
            f"---\nname: evil\ndescription: '{HOSTILE}'\n---\nBe evil.\n",
        )
        attachment = tmp_path / HOSTILE
        attachment.write_text("hello", encoding="utf-8")
        window, history = chat_window()
        window.composer.add_files([str(attachment)])
        router.script(Reply(status=500, error={"message": HOSTILE}))
        _send(qtbot, window, "/evil hello")
        assert HOSTILE in history.messages(window.session_id)[-1]["error"]
        session_id = window.session_id
        history.rename_session(session_id, HOSTILE)
        window.sidebar.refresh()
        qtbot.keyClicks(window.composer.editor, " /ev")
        qtbot.waitUntil(window.composer.completer.popup().isVisible)
        assert window.skills.open_panel() is not None
        places = " ".join(_outside_text_places())
        for where in ("Status", "Attachments", "Skill list", "Sessions", "QListView"):
            assert where in places, (where, places)
        window.close()

        again, _ = chat_window(history=History(history.path))
        assert again.open_session(session_id)  # the saved error is shown again, as text
        assert "Status" in " ".join(_outside_text_places())
        assert again.windowTitle().startswith(HOSTILE)  # window titles are plain text in Qt
        again.sidebar.delete_session(session_id)
        assert "Sessions notice" in " ".join(_outside_text_places())

    def test_outside_text_in_the_import_progress_shows_as_text(self, qtbot, tmp_path: Path) -> None:
        """An imported file's name reaches the import progress dialog's label as text."""
        from llamachat.ui.views.chat_import import ChatImporter

        history = _chrome_history(tmp_path)
        sid = history.create_session("chat")
        history.add_message(sid, "user", "hello")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        hostile = tmp_path / f"{HOSTILE}.json"
        sidebar.export_session(sid, hostile, "json")
        assert isinstance(sidebar.importer, ChatImporter)
        with qtbot.waitSignal(sidebar.session_activated):
            sidebar.start_import(hostile)
            sidebar.import_progress.show()
            assert "Import progress" in " ".join(_outside_text_places())
        history.close()

    @quick_offscreen
    def test_outside_text_in_the_quick_window_shows_as_text(self, quick, router, qtbot) -> None:
        """A failed quick answer shows the server's hostile message as text."""

        window, _history = quick()
        window.show()
        router.script(Reply(status=500, error={"message": HOSTILE}))
        _quick_ask(qtbot, window, "hello")
        window.show_notice(f"Not sent: {HOSTILE}")
        places = " ".join(_outside_text_places())
        assert "Status" in places and "Notice" in places

    def test_garbage_qt_objects_are_destroyed_on_the_gui_thread(self, qapp, qtbot) -> None:
        """A QObject with a running timer, dropped in a cycle, dies on the GUI thread.

        Collected by a worker thread, Qt would warn "Timers cannot be stopped from another
        thread" (a failure here) and later crash when the timer fired.
        """

        collect_garbage_on_gui_thread()
        qapp.processEvents()  # startup's objects get frozen on the loop's first turn
        assert not gc.isenabled()
        died_on: list = []

        def make_garbage() -> None:
            owner = QObject()
            owner.timer = QTimer(owner)
            owner.timer.start(10)
            owner.cycle = owner  # only the cycle collector can free it
            owner.destroyed.connect(lambda: died_on.append(QThread.currentThread()))

        make_garbage()
        # A worker thread allocating as much as a streamed reply does: with automatic
        # collection this is where the cycle would be freed.
        churn = threading.Thread(target=lambda: [[{} for _ in range(50)] for _ in range(20_000)])
        churn.start()
        churn.join()
        assert died_on == []
        # Enough new objects for the next collection to be due, as an app allocates anyway.
        ballast = [[] for _ in range(5000)]
        qtbot.waitUntil(lambda: bool(died_on), timeout=5000)
        del ballast
        assert died_on == [qapp.thread()]

    def test_scripted_router_runs_as_a_process_of_its_own(self) -> None:
        """`python -m llamachat.dev.scripted_router` serves replies queued as JSON lines on stdin."""

        process = subprocess.Popen(
            [sys.executable, "-m", "llamachat.dev.scripted_router"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = process.stdout.readline().strip()
            process.stdin.write(json.dumps({"content": ["from ", "afar"]}) + "\n")
            process.stdin.flush()
            assert process.stdout.readline().strip() == "ok"
            client = backend.Client(url)
            got = [
                v
                for k, v in client.stream_chat("test-model", [{"role": "user", "content": "x"}])
                if k == "content"
            ]
            client.close()
            assert "".join(got) == "from afar"
        finally:
            process.stdin.close()
            process.wait(timeout=10)


class TestMcp:
    """`llamachat.tools.mcp` and the MCP panel: real MCP servers in the tool loop."""

    def test_mcp_servers_config_errors_name_file_line_and_key(self, tmp_path: Path) -> None:
        """A bad [[mcp_servers]] table is refused with the file, the line and the key."""

        from llamachat import config as config_module

        cases = {
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\ntimout = 3\n': (
                4,
                "unknown key 'mcp_servers[1].timout' (did you mean 'timeout'?)",
            ),
            '[[mcp_servers]]\nname = "t"\n': (1, "needs either a command"),
            '[[mcp_servers]]\nname = "a b"\ncommand = "x"\n': (2, "1 to 32 letters"),
            '[[mcp_servers]]\nname = "t"\nurl = "ftp://h"\n': (3, "url must start with http"),
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\nenv = { A = 1 }\n': (
                4,
                "env must be a table of strings",
            ),
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\n\n[[mcp_servers]]\nname = "t"\n'
            'command = "y"\n': (6, "two MCP servers are named 't'"),
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\ntimeout = 0\n': (
                4,
                "timeout must be more than 0",
            ),
        }
        for text, (line, message) in cases.items():
            path = _write_config(tmp_path, text)
            with pytest.raises(config_module.ConfigError) as caught:
                config_module.load(path)
            assert caught.value.path == path and caught.value.line == line, text
            assert message in str(caught.value), text

    def test_mcp_json_imports_without_secrets_and_reads_in_place(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An mcp.json is imported with its secrets named, not copied; mcp_config reads it whole."""

        from llamachat import config as config_module

        mcp_json = tmp_path / "mcp.json"
        mcp_json.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "files": {
                            "command": "npx",
                            "args": ["-y", "files-server"],
                            "env": {"GITHUB_TOKEN": "ghp_secret", "MODE": "fast"},
                        },
                        "remote": {
                            "url": "https://h.example/mcp",
                            "headers": {"Authorization": "Bearer zz-secret"},
                        },
                    }
                }
            ),
            encoding="utf-8",
        )
        path = _write_config(tmp_path, '# mine\ntheme = "dark"\n')
        tables, notes = config_module.mcp_json_servers(mcp_json, for_import=True)
        config_module.append_tables(path, "mcp_servers", tables)
        text = path.read_text(encoding="utf-8")
        assert "ghp_secret" not in text and "zz-secret" not in text
        assert text.startswith("# mine\n")
        assert any("GITHUB_TOKEN" in note for note in notes)
        cfg = config_module.load(path)
        files, remote = cfg.mcp_servers
        assert (files.command, files.args, dict(files.env)) == (
            "npx",
            ("-y", "files-server"),
            {"MODE": "fast"},
        )
        monkeypatch.setenv("GITHUB_TOKEN", "from-env")
        assert files.environment() == {"MODE": "fast", "GITHUB_TOKEN": "from-env"}
        monkeypatch.setenv("MCP_REMOTE_AUTHORIZATION", "Bearer from-env")
        assert remote.headers() == {"Authorization": "Bearer from-env"}

        # Read in place: the user's own file keeps its values; config.toml's names win.
        path = _write_config(tmp_path, 'mcp_config = "mcp.json"\n')
        assert [s.name for s in config_module.load(path).mcp_servers] == ["files", "remote"]
        assert dict(config_module.load(path).mcp_servers[0].env)["GITHUB_TOKEN"] == "ghp_secret"
        mcp_json.write_text('{"mcpServers": {"x": [}', encoding="utf-8")
        with pytest.raises(config_module.ConfigError) as caught:
            config_module.load(path)
        assert caught.value.path == mcp_json and "invalid JSON" in str(caught.value)

    def test_mcp_time_server_from_config_lists_and_answers(self, mcp_hub) -> None:
        """mcp-server-time, started as a user's config says, is offered and answers calls."""

        hub, _cfg = mcp_hub(
            f'[[mcp_servers]]\nname = "time"\ncommand = {json.dumps(_mcp_bin("mcp-server-time"))}\n'
        )
        tools = {tool.name: tool for tool in hub.turn_tools(consent=_mcp_allow)}
        assert set(tools) == {"time_get_current_time", "time_convert_time"}
        schema = tools["time_get_current_time"].schema["function"]
        assert schema["parameters"]["required"] == ["timezone"]
        result = tools["time_get_current_time"].run('{"timezone": "Etc/UTC"}')
        assert json.loads(result.text)["timezone"] == "Etc/UTC"
        [(kind, record)] = result.events
        assert kind == "mcp_done" and record["status"] == "ok"
        # A tool error is a result the model reads, and the server keeps working.
        bad = tools["time_get_current_time"].run('{"timezone": "Nowhere/Land"}')
        assert bad.text.startswith("error:") and "Nowhere/Land" in bad.text
        assert hub.states()[0].status == "ready"

    def test_mcp_git_server_reads_a_temporary_repository(self, mcp_hub, tmp_path: Path) -> None:
        """mcp-server-git on a temp repository answers git_status and git_log."""

        repo = tmp_path / "repo"
        repo.mkdir()
        git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        (repo / "a.txt").write_text("one\n", encoding="utf-8")
        subprocess.run([*git, "add", "a.txt"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "first commit here"], check=True)
        (repo / "b.txt").write_text("new\n", encoding="utf-8")
        hub, _cfg = mcp_hub(
            f'[[mcp_servers]]\nname = "git"\ncommand = {json.dumps(_mcp_bin("mcp-server-git"))}\n'
            f'args = ["--repository", {json.dumps(str(repo))}]\n'
        )
        tools = {tool.name: tool for tool in hub.turn_tools(consent=_mcp_allow)}
        assert "git_git_status" in tools and "git_git_log" in tools
        status = tools["git_git_status"].run(json.dumps({"repo_path": str(repo)}))
        assert "b.txt" in status.text
        log_text = tools["git_git_log"].run(json.dumps({"repo_path": str(repo)})).text
        assert "first commit here" in log_text

    def test_mcp_faulty_servers_become_results_and_failures_shown(self, mcp_hub) -> None:
        """Crash, hang, timeout, huge output, a bad schema, a list change: each handled."""

        from llamachat.tools import mcp

        hub, _cfg = mcp_hub(
            _mcp_faulty_toml("crash", "hang", "huge", "badschema", "listchange", "image")
            + _mcp_faulty_toml("slow", timeout="1"),
            start_timeout=20,
            start_wait=20,
        )
        started = time.monotonic()
        tools = {tool.name: tool for tool in hub.turn_tools(consent=_mcp_allow)}
        # The hung server costs the turn the wait, never more; the others are offered.
        assert time.monotonic() - started < 25
        assert {"crash_crash", "huge_dump", "slow_sleep", "image_picture"} <= set(tools)
        assert not any(name.startswith(("hang_", "badschema_")) for name in tools)
        states = {s.name: s for s in hub.states()}
        assert states["badschema"].status == "failed"
        assert "inputSchema" in states["badschema"].error

        # Crash mid-call: a result for the model; the server is failed with its stderr.
        crashed = tools["crash_crash"].run("{}")
        assert "stopped while answering" in crashed.text
        state = next(s for s in hub.states() if s.name == "crash")
        assert state.status == "failed"
        assert any("crashing now" in line for line in state.stderr)
        assert "crashing now" in (state.log_path.read_text(encoding="utf-8"))
        # Within the backoff the call is refused at once; after it the server starts again.
        assert "started again in" in tools["crash_echo"].run('{"text": "x"}').text
        time.sleep(mcp.BACKOFF_FIRST + 0.2)
        assert tools["crash_echo"].run('{"text": "back"}').text == "back"

        timed_out = tools["slow_sleep"].run('{"seconds": 30}')
        assert "did not answer within 1 s" in timed_out.text
        assert timed_out.events[0][1]["status"] == "timeout"
        assert tools["slow_sleep"].run('{"seconds": 0}').text == "awake"

        huge = tools["huge_dump"].run('{"chars": 100000}')
        assert len(huge.text) < mcp.RESULT_CAP + 300
        assert "100,000 characters" in huge.text and "20,000" in huge.text

        picture = tools["image_picture"].run("{}")
        assert "image/png" in picture.text and "a red dot" in picture.text
        assert mcp.decode_image(picture.events[0][1]["images"][0]).startswith(b"\x89PNG")

        assert tools["listchange_add_tool"].run("{}").text == "added"
        _wait_for(
            lambda: any(
                t.name == "listchange_extra"
                for s in hub.states()
                if s.name == "listchange"
                for t in s.tools
            ),
            10,
            "the changed tools list",
        )
        _wait_for(
            lambda: next(s for s in hub.states() if s.name == "hang").status == "failed",
            25,
            "the hung server to fail",
        )

    def test_mcp_server_process_dies_with_a_sigkilled_llamachat(self, tmp_path: Path) -> None:
        """No MCP server outlives the process that started it, even one killed with SIGKILL."""

        script = tmp_path / "host.py"
        script.write_text(
            "import sys, os, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import McpServerConfig\n"
            "from llamachat.tools import mcp as mcp_tools\n"
            "hub = mcp_tools.Hub([McpServerConfig('echo', command=sys.executable,"
            " args=['-m', 'llamachat.dev.mcp_faulty', 'crash'])], log_dir=Path(sys.argv[1]))\n"
            "assert hub.turn_tools(consent=lambda n, a: 'once')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
            encoding="utf-8",
        )
        host = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "logs")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert host.stdout.readline().strip() == "ready"
            children = []
            for task in Path(f"/proc/{host.pid}/task").iterdir():
                children += (task / "children").read_text().split()
            [server_pid] = [int(pid) for pid in children]
            assert "mcp_faulty" in Path(f"/proc/{server_pid}/cmdline").read_text()
            host.kill()
            host.wait(10)

            def gone() -> bool:
                try:
                    return Path(f"/proc/{server_pid}/stat").read_text().split()[2] == "Z"
                except FileNotFoundError:
                    return True

            _wait_for(gone, 10, "the MCP server to die with its parent")
        finally:
            host.kill()
            host.wait(10)

    def test_mcp_window_asks_runs_the_tool_and_shows_and_saves_the_call(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The model calls an MCP tool: consent is asked, the result reaches the next round,
        the reply shows the call collapsed and History keeps it; the chat does not ask twice."""

        from llamachat.ui.views.message import MessageView

        window, history = _mcp_window(chat_window, router, tmp_path, _mcp_time_toml())
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}', id="t1")
        router.script(Reply(tool_calls=[call]), Reply(content="It is late."))
        _type(qtbot, window, "What time is it?")
        window.send()
        asked = _mcp_answer(qtbot, window, "Allow once")
        assert "time_get_current_time" in asked and "Etc/UTC" in asked
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)

        first, second = router.chat_requests()[-2:]
        assert "time_get_current_time" in [t["function"]["name"] for t in first.json["tools"]]
        tool_message = second.json["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "t1"
        assert json.loads(tool_message["content"])["timezone"] == "Etc/UTC"

        view = window.conversation.last_assistant()
        [shown] = view.tool_calls()
        assert shown.button.text() == "Ran time_get_current_time"
        assert not shown.body.isVisible()
        shown.button.click()
        assert shown.body.isVisible() and '"timezone": "Etc/UTC"' in shown.details()
        row = history.messages(window.session_id)[-1]
        assert row["content"] == "It is late."
        [saved] = row["tool_calls"]
        assert saved["function"] == {"name": "time_get_current_time", "arguments": call.arguments}
        assert saved["status"] == "ok" and "datetime" in saved["result"]
        reopened = MessageView(row)
        assert [v.name for v in reopened.tool_calls()] == ["time_get_current_time"]
        reopened.deleteLater()

        router.script(Reply(tool_calls=[call]), Reply(content="Still late."))
        _send(qtbot, window, "And now?")
        assert window.app.mcp.consent_box is None
        assert router.chat_requests()[-1].json["messages"][-1]["role"] == "tool"

    def test_mcp_window_deny_is_read_by_the_model_and_always_is_saved(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Deny becomes the tool result; "Always allow" lands in config.toml, comments kept,
        and a new chat runs the tool without asking."""

        window, _history = _mcp_window(
            chat_window, router, tmp_path, _mcp_time_toml(), extra="# my note\n"
        )
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}', id="d1")
        router.script(Reply(tool_calls=[call]), Reply(content="No time then."))
        _type(qtbot, window, "time?")
        window.send()
        _mcp_answer(qtbot, window, "Deny")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        denied = router.chat_requests()[-1].json["messages"][-1]
        assert denied["role"] == "tool" and "did not allow" in denied["content"]
        [shown] = window.conversation.last_assistant().tool_calls()
        assert shown.button.text() == "Denied: time_get_current_time"

        router.script(Reply(tool_calls=[call]), Reply(content="Now I know."))
        _type(qtbot, window, "please, time?")
        window.send()
        _mcp_answer(qtbot, window, "Always allow this tool")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        text = (tmp_path / "config.toml").read_text(encoding="utf-8")
        assert 'mcp_allowed_tools = ["time_get_current_time"]' in text and "# my note" in text
        assert window.app.config.mcp_allowed_tools == ("time_get_current_time",)

        window.new_session()
        router.script(Reply(tool_calls=[call]), Reply(content="Known."))
        _send(qtbot, window, "time again")
        assert window.app.mcp.consent_box is None
        assert "datetime" in router.chat_requests()[-1].json["messages"][-1]["content"]

    def test_mcp_window_stop_withdraws_the_question(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Stop while consent is asked closes the box; the tool never runs, no round follows."""

        window, _history = _mcp_window(chat_window, router, tmp_path, _mcp_time_toml())
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}')
        router.script(Reply(tool_calls=[call]), Reply(content="never"))
        _type(qtbot, window, "time?")
        window.send()
        host = window.app.mcp
        qtbot.waitUntil(lambda: host.consent_box is not None, timeout=30000)
        window.stop()
        qtbot.waitUntil(lambda: host.consent_box is None, timeout=5000)
        qtbot.waitUntil(lambda: window.running_workers() == 0, timeout=10000)
        assert len(router.chat_requests()) == 1

    def test_mcp_timeout_and_denial_reach_the_model_through_the_tool_loop(
        self, mcp_hub, router
    ) -> None:
        """A call that outlives its server's timeout is a tool result in the next request."""

        hub, _cfg = mcp_hub(_mcp_faulty_toml("slow", timeout="1"))
        tools = hub.turn_tools(consent=_mcp_allow)
        router.script(
            Reply(tool_calls=[ToolCall("slow_sleep", '{"seconds": 30}', id="s1")]),
            Reply(content="It took too long."),
        )
        client = Client(router.url)
        started = time.monotonic()
        events = list(client.stream_chat("test-model", _user("sleep"), extra_tools=tools))
        client.close()
        assert time.monotonic() - started < 10
        assert "".join(v for k, v in events if k == "content") == "It took too long."
        result = router.chat_requests()[-1].json["messages"][-1]
        assert result["tool_call_id"] == "s1" and "did not answer within 1 s" in result["content"]
        [done] = [v for k, v in events if k == "mcp_done"]
        assert done["status"] == "timeout"

    def test_mcp_panel_shows_states_toggles_tools_and_warns_on_budget(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The panel lists each server's state and tools with their token cost; a toggle is
        saved and leaves the tool out of the next request; over 10% of the context warns."""

        servers = _mcp_time_toml() + "\n" + _mcp_faulty_toml("stderr")
        window, _history = _mcp_window(chat_window, router, tmp_path, servers)
        panel = window.open_mcp_panel()
        panel._context_size = lambda: 1000
        tree = panel.tree
        assert [tree.topLevelItem(i).text(1) for i in range(2)] == ["not started"] * 2
        for index in range(2):
            tree.setCurrentItem(tree.topLevelItem(index))
            panel.restart_button.click()

        def settled() -> bool:
            return [tree.topLevelItem(i).text(1) for i in range(2)] == ["ready", "failed"]

        qtbot.waitUntil(settled, timeout=30000)
        time_item, failed_item = tree.topLevelItem(0), tree.topLevelItem(1)
        stderr = [failed_item.child(i).text(2) for i in range(failed_item.childCount())]
        assert "fatal: the database is locked" in stderr
        tools = {time_item.child(i).text(0): time_item.child(i) for i in range(2)}
        assert tools["time_convert_time"].text(1).endswith(" tokens")
        assert int(tools["time_convert_time"].text(1).split()[0].replace(",", "")) > 50
        assert panel.over_budget() and "more than 10%" in panel.total.text()

        tools["time_convert_time"].setCheckState(0, Qt.CheckState.Unchecked)
        text = (tmp_path / "config.toml").read_text(encoding="utf-8")
        assert 'mcp_disabled_tools = ["time_convert_time"]' in text
        router.script(Reply(content="fine"))
        _send(qtbot, window, "hello")
        offered = [t["function"]["name"] for t in router.chat_requests()[-1].json["tools"]]
        assert "time_get_current_time" in offered and "time_convert_time" not in offered
        panel.close()

    def test_mcp_ask_print_runs_tools_only_when_allowed(self, router, tmp_path: Path) -> None:
        """`ask --print` denies MCP calls (and says so) unless --allow-tools is given."""

        config = _quick_config_file(tmp_path, router.url, _mcp_time_toml())
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}')
        router.script(Reply(tool_calls=[call]), Reply(content="denied"))
        done = _llamachat(config, "ask", "--print", "--no-reasoning", "time?")
        assert done.returncode == 0, done.stderr
        assert "not run: time_get_current_time" in done.stderr
        assert "did not allow" in router.chat_requests()[-1].json["messages"][-1]["content"]

        router.script(Reply(tool_calls=[call]), Reply(content="allowed"))
        done = _llamachat(config, "ask", "--print", "--allow-tools", "time?")
        assert (done.returncode, done.stdout) == (0, "allowed\n"), done.stderr
        assert "datetime" in router.chat_requests()[-1].json["messages"][-1]["content"]

    def test_mcp_streamable_http_server_gets_its_header_from_the_environment(
        self, mcp_hub, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A `url` server is reached over Streamable HTTP with the header headers_env names."""

        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "llamachat.dev.mcp_faulty", "http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for(lambda: not _refuses_connections(port), 20, "the HTTP MCP server")
            monkeypatch.setenv("TEST_MCP_AUTH", "Bearer t0k3n")
            hub, _cfg = mcp_hub(
                f'[[mcp_servers]]\nname = "web"\nurl = "http://127.0.0.1:{port}/mcp"\n'
                'headers_env = { Authorization = "TEST_MCP_AUTH" }\n'
            )
            tools = {tool.name: tool for tool in hub.turn_tools(consent=_mcp_allow)}
            assert tools["web_header"].run('{"name": "authorization"}').text == "Bearer t0k3n"
            assert "t0k3n" not in (Path(_cfg.path).read_text(encoding="utf-8"))
        finally:
            process.kill()
            process.wait(10)

    def test_mcp_autostart_starts_at_once_and_disabled_never_starts(self, mcp_hub) -> None:
        """`autostart` starts a server before any turn; `enabled = false` keeps one off."""

        hub, _cfg = mcp_hub(
            _mcp_faulty_toml("image", autostart="true")
            + "\n"
            + _mcp_faulty_toml("huge", enabled="false")
        )
        assert [s.status for s in hub.states()] == ["not started", "off"]
        hub.start()
        _wait_for(lambda: hub.states()[0].status == "ready", 20, "the autostarted server")
        assert hub.states()[1].status == "off"
        assert [t.name for t in hub.turn_tools(consent=_mcp_allow)] == [
            "image_echo",
            "image_picture",
        ]
        assert hub.states()[1].status == "off"

    def test_mcp_outside_text_is_shown_as_plain_text(self, qtbot) -> None:
        """A tool's name, arguments and result reach the view and the consent box as text."""

        from llamachat.ui.views.tool_call import ToolCallView

        call = {
            "function": {"name": HOSTILE, "arguments": json.dumps({"q": HOSTILE})},
            "result": HOSTILE,
            "status": "ok",
            "server": HOSTILE,
        }
        view = ToolCallView(call)
        qtbot.addWidget(view)
        view.button.click()
        assert view.body.textFormat() == Qt.TextFormat.PlainText
        assert view.details().count("<img") == 3
        assert view.button.text() == f"Ran {HOSTILE}"

    def test_mcp_secrets_a_server_prints_are_masked_in_the_panel_and_its_log(
        self, chat_window, router, qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A server printing its env_vars token and the router's key on stderr: the panel
        and mcp-<name>.log show *** for both, never the values."""

        from llamachat import config as config_module

        token, router_key = "mcp-tok-Qw3rTy9UiOp2", "rk-Zx8cVb7nMl6kJh5g"
        monkeypatch.setenv("TEST_MCP_TOKEN", token)
        monkeypatch.setenv("TEST_ROUTER_KEY", router_key)
        path = tmp_path / "config.toml"
        path.write_text(
            _mcp_faulty_toml(
                "leak",
                env_vars='{ LEAK_TOKEN = "TEST_MCP_TOKEN" }',
                env=f'{{ LEAK_ROUTER = "{router_key}" }}',
            ),
            encoding="utf-8",
        )
        cfg = config_module.load(path)
        window, _history = chat_window(
            path=path, mcp_servers=cfg.mcp_servers, router_api_key_env="TEST_ROUTER_KEY"
        )
        panel = window.open_mcp_panel()
        item = panel.tree.topLevelItem(0)
        panel.tree.setCurrentItem(item)
        panel.restart_button.click()
        qtbot.waitUntil(lambda: panel.tree.topLevelItem(0).text(1) == "failed", timeout=30000)
        item = panel.tree.topLevelItem(0)
        shown = [item.text(2)] + [item.child(i).text(2) for i in range(item.childCount())]
        assert "auth failed: LEAK_TOKEN=*** was refused" in shown
        assert "auth failed: LEAK_ROUTER=*** was refused" in shown
        log_path = window.app.mcp.states()[0].log_path
        logged = log_path.read_text(encoding="utf-8")
        assert "LEAK_TOKEN=*** was refused" in logged
        assert token[:8] not in logged and router_key[:8] not in logged
        assert not any(token[:8] in text or router_key[:8] in text for text in shown)
        panel.close()

    def test_mcp_garbage_on_a_servers_stdout_is_one_line_in_its_log_not_a_traceback(
        self, router, tmp_path: Path
    ) -> None:
        """A server writing non-JSON and invalid JSON-RPC on stdout: `ask --print` still runs
        its tool, stderr has no traceback, and the server's log has one line for each."""

        config = _quick_config_file(tmp_path, router.url, _mcp_faulty_toml("garbage"))
        call = ToolCall("garbage_echo", '{"text": "still works"}')
        router.script(Reply(tool_calls=[call]), Reply(content="fine"))
        done = _llamachat(config, "ask", "--print", "--allow-tools", "--no-reasoning", "echo?")
        assert (done.returncode, done.stdout) == (0, "fine\n"), done.stderr
        assert done.stderr == ""
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "still works"
        log_path = tmp_path / "home/.local/state/llamachat/log/mcp-garbage.log"
        notes = [line for line in log_path.read_text().splitlines() if "Failed to parse" in line]
        assert len(notes) == 2
        assert "Invalid JSON" in notes[0] and "Server starting..." in notes[0]
        assert "JSONRPCRequest.id" in notes[1]

    def test_mcp_server_children_end_on_close_and_on_sigkill_of_llamachat(
        self, mcp_hub, tmp_path: Path
    ) -> None:
        """What a server starts (`sleep &`, `sh -c`) ends when the hub closes, and when the
        process holding the hub is killed with SIGKILL."""

        def spawned(log_path: Path) -> list[int]:
            def found() -> list[int]:
                text = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
                lines = [line for line in text.splitlines() if line.startswith("spawned ")]
                return [int(pid) for pid in lines[-1].split()[1:]] if lines else []

            return _wait_for(found, 30, "the server to say what it spawned")

        def alive(pid: int) -> bool:
            try:
                return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except FileNotFoundError:
                return False

        hub, _cfg = mcp_hub(_mcp_faulty_toml("spawner"))
        assert hub.turn_tools(consent=_mcp_allow)
        pids = spawned(hub.states()[0].log_path)
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        hub.close()
        _wait_for(lambda: not any(alive(pid) for pid in pids), 15, "the children to end on close")

        script = tmp_path / "host.py"
        script.write_text(
            "import sys, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import McpServerConfig\n"
            "from llamachat.tools import mcp as mcp_tools\n"
            "hub = mcp_tools.Hub([McpServerConfig('spawner', command=sys.executable,"
            " args=['-m', 'llamachat.dev.mcp_faulty', 'spawner'])], log_dir=Path(sys.argv[1]))\n"
            "assert hub.turn_tools(consent=lambda n, a: 'once')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
            encoding="utf-8",
        )
        host = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "host-logs")],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert host.stdout.readline().strip() == "ready"
            pids = spawned(tmp_path / "host-logs" / "mcp-spawner.log")
            assert all(alive(pid) for pid in pids)
            host.kill()
            host.wait(10)
            _wait_for(lambda: not any(alive(pid) for pid in pids), 15, "the children to end")
        finally:
            host.kill()
            host.wait(10)

    def test_mcp_window_says_it_waits_for_a_hung_server_skip_goes_on_and_no_second_wait(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A server that never answers `initialize`: the send shows "Waiting for MCP server
        hang…" with Skip; Skip sends at once; that chat does not wait for it again until
        it is restarted."""

        from PySide6.QtWidgets import QLabel, QPushButton

        window, _history = _mcp_window(chat_window, router, tmp_path, _mcp_faulty_toml("hang"))
        host = window.app.mcp

        def send_and_skip(text: str) -> None:
            _type(qtbot, window, text)
            window.send()
            qtbot.waitUntil(lambda: host.wait_notice is not None, timeout=5000)
            notice = host.wait_notice
            assert "Waiting for MCP server hang…" in [x.text() for x in notice.findChildren(QLabel)]
            started = time.monotonic()
            notice.findChild(QPushButton).click()
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
            assert time.monotonic() - started < 5 and host.wait_notice is None

        router.script(Reply(content="without it"))
        send_and_skip("hello")
        offered = router.chat_requests()[-1].json.get("tools", [])
        assert not any(t["function"]["name"].startswith("hang_") for t in offered)

        router.script(Reply(content="at once"))
        started = time.monotonic()
        _send(qtbot, window, "again")
        assert time.monotonic() - started < 5 and host.wait_notice is None

        host.restart("hang")
        router.script(Reply(content="waited again"))
        send_and_skip("after the restart")


# Token streams where appending words as plain text is easy to get wrong: a delimiter
# whose meaning the next character decides, spaces that end a paragraph, an entity or a
# link definition still being written, a heading's closing #s, a line that may still
# become a list item, a code block's last line and a fence closer.
TRICKY_STREAMS = [
    ["Some", " *(a)*", "b", " and", " more", " words"],
    ["Trailing", " ", " ", "spaces", "  ", "end", " "],
    ["An", " &amp", ";", " entity", " and", " &#35", ";"],
    ["[a]:", " /url", " title", "\n\nnext"],
    ["## Title", " #", " more", "\n\npara"],
    ["1", ". item", " text", "\n2", ". next", " one"],
    ["- one", " two", "\n", "- three", " four", "\n  ", "lazy", " text"],
    ["```python\n", "def", " f():", "\n", "    return", " 1", "\n", "``", "`", "\n", "after"],
    ["nbsp\u00a0", "word", " x", " y\u00a0", "z"],
    ["> quote", " more", "\n", "lazy", " line", " end"],
    ["x" * 70, "y" * 9, "z" * 5, " short", " words"],
    ["a  ", "  b", "   c", " | d", " e"],
]


class TestPerformance:
    """Issue 13's fast paths, each checked against the slow way it stands in for."""

    @pytest.mark.parametrize(
        "tokens",
        [sample_tokens(400, seed=seed) for seed in (1, 2, 3, 9)] + TRICKY_STREAMS,
        ids=[f"sample-{seed}" for seed in (1, 2, 3, 9)]
        + [f"tricky-{n}" for n in range(len(TRICKY_STREAMS))],
    )
    def test_plain_appends_show_exactly_what_rendering_the_tail_shows(
        self, qapp, tokens: list[str]
    ) -> None:
        """Words appended as plain text leave the document as a render of the open tail
        would, token after token and at the end."""

        fast, full = StreamingMarkdown(), StreamingMarkdown(plain_appends=False)
        fast_doc, full_doc = QTextDocument(), QTextDocument()
        writers = [(fast, _DocumentWriter(fast_doc)), (full, _DocumentWriter(full_doc))]
        for n, token in enumerate(tokens):
            for md, writer in writers:
                md.append(token)
                writer.write(md.flush())
            assert fast_doc.toHtml() == full_doc.toHtml(), repr("".join(tokens[: n + 1]))
        for md, writer in writers:
            writer.write(md.finish(), final=True)
        assert fast_doc.toHtml() == full_doc.toHtml()
        assert fast.text() == full.text() == "".join(tokens)
        assert full.stats.plain_appends == 0

    def test_plain_appends_serve_most_tokens_of_prose_and_code(self) -> None:
        """The fast path is the common one: most tokens of a usual reply take it, and an open
        code block's "Copy code" still copies all of its code."""

        md = StreamingMarkdown()
        tokens = sample_tokens(2000, seed=9)
        for token in tokens:
            md.append(token)
            md.flush()
        assert md.stats.plain_appends > len(tokens) / 2
        code = StreamingMarkdown()
        for token in ["```python\n", "def", " f(x):", "\n", "    return", " x", " + 1"]:
            code.append(token)
            code.flush()
        assert code.stats.plain_appends >= 3
        assert code.code(0) == "def f(x):\n    return x + 1"

    def test_send_starts_the_reply_before_the_window_is_shown_the_message(
        self, conversation, router, qtbot
    ) -> None:
        """The request leaves before the views are built: when the window hears of the
        message, the reply is already streaming, and its view attaches before any text."""

        chat, _history = conversation()
        streaming_when_shown: list[bool] = []
        chat.message_added.connect(lambda _row: streaming_when_shown.append(chat.is_streaming()))
        router.script(Reply(content=["Hello", " there."]))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("Hi") == controller.SENT
        assert streaming_when_shown == [True]
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "Hi"

    def test_backend_sent_is_set_once_the_request_is_written_before_any_answer(
        self, router
    ) -> None:
        """`stream_chat(sent=...)` says the request is on the wire while the server has not
        answered yet (a router loading a model), so the window need not wait for more."""

        router.script(Reply(content=["late"], delay=1.0))
        client = Client(router.url)
        sent = threading.Event()
        events: list = []
        reader = threading.Thread(
            target=lambda: events.extend(client.stream_chat("test-model", _user("hi"), sent=sent))
        )
        reader.start()
        try:
            assert sent.wait(10)
            assert events == []
        finally:
            reader.join(30)
            client.close()
        assert ("content", "late") in events

    def test_skills_folder_check_sees_added_skills_and_the_full_check_sees_edits(
        self, tmp_path: Path
    ) -> None:
        """Before a request leaves only the folders are stat'ed: a new skill is seen, a
        SKILL.md edited in place waits for the full check made after the request left."""

        root = tmp_path / "skills"
        _write_skill(root, "weather", SKILL_WEATHER)
        store = SkillStore(root)
        assert store.user_names() == ["weather"]
        old = time.time() - 3600  # settled files: their timestamps prove them unchanged
        for path in [root, root / "weather", root / "weather" / "SKILL.md"]:
            os.utime(path, (old, old))
        store.refresh()
        _write_skill(root, "gardening", _skill_md("gardening", "When to plant what."))
        assert store.refresh(files=False) is True
        assert store.user_names() == ["gardening", "weather"]
        for path in [root, root / "gardening", root / "gardening" / "SKILL.md"]:
            os.utime(path, (old, old))
        store.refresh()
        edited = root / "weather" / "SKILL.md"
        edited.write_text(SKILL_WEATHER.replace("Forecasts", "Rain"), encoding="utf-8")
        assert store.refresh(files=False) is False
        assert store.descriptions()["weather"].startswith("Forecasts")
        assert store.refresh() is True
        assert store.descriptions()["weather"].startswith("Rain")

    def test_send_rechecks_every_skill_file_once_the_request_left(
        self, conversation, router, qtbot, tmp_path
    ) -> None:
        """A description edited in place reaches the window's `/` completion after the next
        send, though that send itself only looked at the folders."""

        chat, _history = conversation()
        assert chat.store.descriptions()["weather"].startswith("Forecasts")
        edited = tmp_path / "skills" / "weather" / "SKILL.md"
        edited.write_text(SKILL_WEATHER.replace("Forecasts", "Rain"), encoding="utf-8")
        router.script(Reply(content="ok"))
        with qtbot.waitSignal(chat.store_changed, timeout=10000):
            assert chat.submit("Hi") == controller.SENT
        assert chat.store.descriptions()["weather"].startswith("Rain")
        qtbot.waitUntil(lambda: not chat.is_streaming(), timeout=10000)


class TestLibrary:
    """Chat with your files: text extraction, the index in library.db, search_documents."""

    def test_index_reads_every_kind_and_lists_the_skipped_with_why(self, tmp_path: Path) -> None:
        """PDFs by page, Markdown and HTML by heading, code as text; an encrypted, a broken
        and an unknown file are listed as skipped with the reason; hidden files are not."""
        from llamachat.dev.pytest_plugin import _library_folder
        from llamachat.library.store import LibraryStore

        root = _library_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(7, root)
        report = store.index(library)

        assert (report.indexed, report.skipped) == (7, 3)
        files = {row.path.relative_to(root).as_posix(): row for row in store.files(library)}
        assert sorted(files) == [
            "broken.pdf", "locked.pdf", "notes/llamas.md", "page.html", "photo.png",
            "report.pdf", "tool.py",
        ]  # fmt: skip
        assert files["locked.pdf"].skipped == "encrypted (a password is needed)"
        assert files["broken.pdf"].skipped.startswith("unreadable PDF (")
        assert files["photo.png"].skipped == "not a type llamachat reads (.png)"
        assert files["report.pdf"].passages == 2 and files["report.pdf"].skipped == ""

        [hit] = store.search("zebra revenue", 7, limit=1)
        assert (hit.path, hit.page) == (root / "report.pdf", 2)
        assert "42 million" in hit.text
        [hit] = store.search("What do llamas eat?", 7, limit=1)
        assert (hit.path.name, hit.page, hit.heading) == ("llamas.md", None, "Llamas")
        [hit] = store.search("alpacas fleece", 7)
        assert (hit.heading, hit.text) == ("Alpacas", "Alpacas have fluffy fleece.")
        assert store.search("scriptword", 7) == []
        assert store.search("ostrich_speed", 7)[0].path == root / "tool.py"
        assert store.search("zebra", 8) == []  # another chat's libraries are not searched
        [row] = store.libraries(7)
        assert (row.root, row.files, row.skipped) == (root, 7, 3)
        store.close()

    def test_reindex_reads_only_changed_files_and_forgets_removed_ones(
        self, tmp_path: Path
    ) -> None:
        """Unchanged files (same size and mtime) are not read again; an edited file is,
        a new one is added, a deleted one leaves the index."""
        from llamachat.dev.pytest_plugin import _library_folder
        from llamachat.library.store import LibraryStore

        root = _library_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(1, root)
        store.index(library)
        again = store.index(library)
        assert (again.indexed, again.unchanged, again.removed) == (0, 7, 0)

        (root / "notes" / "llamas.md").write_text("# Llamas\nLlamas now eat camel cakes.\n")
        (root / "new.txt").write_text("Vicunas are wild.")
        (root / "tool.py").unlink()
        report = store.index(library)
        assert (report.indexed, report.unchanged, report.removed) == (2, 5, 1)
        assert store.search("camel", 1)[0].path.name == "llamas.md"
        assert store.search("grass", 1) == []
        assert store.search("vicunas", 1)[0].path.name == "new.txt"
        assert store.search("ostrich_speed", 1) == []

        store.remove(library)
        assert store.libraries(1) == [] and store.search("vicunas", 1) == []
        store.close()

    def test_huge_and_non_utf8_files_are_skipped_and_listed(self, tmp_path: Path) -> None:
        """A text file over the limit and one that is not UTF-8 are listed, not indexed."""
        from llamachat.library import extract
        from llamachat.library.store import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        (root / "huge.txt").write_bytes(b"word " * (extract.MAX_TEXT_BYTES // 5 + 1))
        (root / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(1, root)
        store.index(library)
        why = {row.path.name: row.skipped for row in store.files(library)}
        assert why == {
            "huge.txt": "too large (8.0 MB; the limit is 8.0 MB)",
            "latin.txt": "not UTF-8 text",
        }
        store.close()

    def test_split_keeps_passages_near_the_target_length(self) -> None:
        """Paragraphs are joined up to the target, a long one is cut at words."""
        from llamachat.library.extract import split

        text = "\n\n".join(f"Paragraph {n} " + "word " * 50 for n in range(20))
        pieces = split(text, 600)
        assert all(len(piece) <= 600 for piece in pieces)
        assert "".join(pieces).count("Paragraph") == 20
        assert split("x" * 1500, 600) == ["x" * 600, "x" * 600, "x" * 300]

    def test_search_documents_call_through_the_router_reads_passages_with_file_and_page(
        self, router, tmp_path: Path
    ) -> None:
        """A built Turn with a library offers search_documents; the model's call is answered
        with the best passages (file, page), bounded, and the sources come as file links."""
        from llamachat.dev.pytest_plugin import _library_folder
        from llamachat.library.store import LibraryStore
        from llamachat.tools import documents

        root = _library_folder(tmp_path / "docs")
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        store.index(store.attach(5, root))
        store.close()
        library = documents.LibraryConfig(db, 5)
        request = turn.build_turn(
            Config(),
            model="test-model",
            system=(),
            messages=[{"role": "user", "content": "How did the zebra division do?"}],
            library=library,
        )
        assert [t["function"]["name"] for t in request.tools] == ["search_documents"]
        assert request.parts()[-1].name == "tools"  # the meter counts what it adds
        router.script(
            Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra revenue"}', id="d1")]),
            Reply(content="It rose to 42 million (report.pdf, page 2)."),
        )
        client = Client(router.url)
        try:
            events = list(client.stream_chat("test-model", request=request))
        finally:
            client.close()

        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [documents.TOOL_SCHEMA]
        result = second["messages"][-1]
        assert result["tool_call_id"] == "d1"
        assert result["content"].startswith('Passages from the attached documents for "zebra')
        assert "[1] report.pdf, page 2 — " in result["content"]
        assert "42 million" in result["content"]
        [done] = [value for kind, value in events if kind == "search_done"]
        assert done["title"] == "Searched documents" and done["query"] == "zebra revenue"
        assert done["results"][0]["title"] == "report.pdf, page 2"
        assert done["results"][0]["url"] == (root / "report.pdf").as_uri()
        # Without a library the tool is not offered.
        plain = turn.build_turn(Config(), model="m", system=(), messages=[])
        assert plain.tools == ()

    def test_search_documents_result_is_bounded_and_says_when_nothing_matched(
        self, tmp_path: Path
    ) -> None:
        """Five long passages stay within RESULT_CHARS; no match is a sentence, not silence."""
        from llamachat.library.store import Hit
        from llamachat.tools import documents

        hits = [Hit(tmp_path / f"f{n}.txt", None, "", "long " * 5000, -1.0) for n in range(5)]
        text = documents.result_text("long", hits)
        assert len(text) <= documents.RESULT_CHARS + 200
        assert text.count("…") == 5
        assert "No passage" in documents.result_text("zebra", [])
        tool = documents.SearchDocuments(documents.LibraryConfig(tmp_path / "library.db", 1))
        with pytest.raises(tools.ToolError):
            tool.run('{"query": ""}')
        assert tool.run('{"query": "zebra"}').text.startswith("No passage")

    def test_window_folder_dropped_on_a_new_chat_is_indexed_and_searched_by_the_model(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A folder dropped on the composer of an unsaved chat is attached with its first
        message, indexed off the GUI thread with a progress bar, offered to the model as
        search_documents, its sources shown as file links (names as plain text), and the
        Libraries panel lists its files, the skipped ones with why."""
        from llamachat.dev.pytest_plugin import _library_folder
        from llamachat.ui.library.panel import LibrariesPanel

        root = _library_folder(tmp_path / "docs <b>x</b>")
        window, _history = chat_window()
        progress: list[tuple[int, int]] = []
        window.app.libraries.progress.connect(
            lambda done, total, _name: progress.append((done, total))
        )
        data = QMimeData()
        data.setUrls([QUrl.fromLocalFile(str(root))])
        window.composer.editor.insertFromMimeData(data)
        assert window.composer.attachments() == []
        assert "Library added with your first message" in window.statusBar().currentMessage()

        router.script(Reply(content="Attached."))
        _send(qtbot, window, "Here are my documents.")
        qtbot.waitUntil(lambda: not window.app.libraries.busy(), timeout=20000)
        assert progress[-1] == (0, 0) and (7, 7) in progress
        [first] = (r.json for r in router.chat_requests())
        assert "search_documents" in [t["function"]["name"] for t in first["tools"]]

        router.script(
            Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra revenue"}')]),
            Reply(content="42 million, says report.pdf page 2."),
        )
        _send(qtbot, window, "How did the zebra division do?")
        result = router.chat_requests()[-1].json["messages"][-1]
        assert result["role"] == "tool" and "42 million" in result["content"]
        [row] = window.app.libraries.libraries(window.session_id)
        assert (row.root, row.files, row.skipped) == (root.resolve(), 7, 3)
        [results] = [
            label
            for label in window.conversation.last_assistant().findChildren(QLabel)
            if label.accessibleName() == "Searched documents"
        ]
        assert ">report.pdf, page 2</a>" in results.text()
        assert (root.resolve() / "report.pdf").as_uri() in results.text()

        window.libraries.open_panel()
        panel = window.libraries.panel
        assert isinstance(panel, LibrariesPanel)
        top = panel.tree.topLevelItem(0)
        assert top.text(0) == str(root.resolve())
        skipped = {top.child(n).text(0): top.child(n).text(3) for n in range(top.childCount())}
        assert skipped["locked.pdf"] == "encrypted (a password is needed)"
        assert skipped["photo.png"] == "not a type llamachat reads (.png)"
        panel.remove_button.click()
        assert window.app.libraries.libraries(window.session_id) == []
        panel.close()

    def test_window_attach_files_as_library_indexes_just_those_files(
        self, chat_window, router, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """Attach > Add files as library…: each chosen file becomes a library of its own
        (searched by the model, not pasted into the message), indexed and listed."""
        from PySide6.QtWidgets import QFileDialog

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.md").write_text("# Zebra\n\nThe zebra division grew.\n")
        (root / "other.txt").write_text("Not chosen.")
        chosen = [str(root / "zebra.md")]
        monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *_a, **_k: (chosen, ""))
        window, _history = chat_window()
        menu = window.composer.attach_button.menu()
        [action] = [a for a in menu.actions() if a.text() == "Add files as library…"]
        action.trigger()
        router.script(Reply(content="Noted."))
        _send(qtbot, window, "Read my notes.")
        qtbot.waitUntil(lambda: not window.app.libraries.busy(), timeout=20000)
        [row] = window.app.libraries.libraries(window.session_id)
        assert (row.root, row.files, row.passages) == ((root / "zebra.md").resolve(), 1, 1)
        assert not window.composer.attachments()

    def test_a_chat_deleted_for_good_takes_its_libraries_index_with_it(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Deleting a chat keeps its library while Undo is offered; once the notice goes,
        its index leaves library.db (its files stay). A chat purged while llamachat was not
        running loses its libraries' index at the next start; a live chat keeps its own."""
        from llamachat.ui.library.host import LibraryHost

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        history = _chrome_history(tmp_path)
        ids = []
        for text in ("kept", "deleted", "purged"):
            ids.append(history.create_session("chat"))
            history.add_message(ids[-1], "user", text)
        host = LibraryHost(tmp_path / "library.db")
        for sid in ids:
            host.attach(sid, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        sidebar = SessionSidebar(history)
        sidebar.libraries = host
        qtbot.addWidget(sidebar)
        sidebar.delete_session(ids[1])
        assert host.libraries(ids[1])  # Undo is still offered
        [close] = [
            w for w in sidebar.notice.findChildren(QWidget) if w.accessibleName() == "Close notice"
        ]
        close.click()
        assert host.libraries(ids[1]) == [] and host.libraries(ids[0])
        history.delete_session(ids[2])
        history.purge_deleted([ids[2]])
        host.forget_gone_chats(lambda sid: history.get_session(sid) is not None)
        assert host.libraries(ids[2]) == [] and host.libraries(ids[0])
        assert (root / "zebra.txt").exists()
        host.close()
        history.close()

    def test_app_forgets_the_libraries_of_chats_purged_while_it_was_not_running(
        self, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """Shortly after start, the App forgets the libraries of chats no longer in the
        history and keeps a live chat's; an App whose history was closed by then (quit)
        raises nothing."""
        from llamachat.library.store import default_path
        from llamachat.ui import app as app_module
        from llamachat.ui.library.host import LibraryHost

        monkeypatch.setattr(app_module, "FORGET_GONE_CHATS_MS", 0)
        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        history = History(tmp_path / "history.db")
        live, gone = history.create_session("chat"), history.create_session("chat")
        history.delete_session(gone)
        history.purge_deleted([gone])
        host = LibraryHost(default_path(history.path))
        host.attach(live, root)
        host.attach(gone, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        host.close()
        cfg = Config(history_path=history.path, router_url="http://127.0.0.1:9")
        started = _app(cfg, history)
        qtbot.waitUntil(lambda: started.libraries.libraries(gone) == [], timeout=5000)
        assert started.libraries.libraries(live)
        closed_history = History(tmp_path / "other.db")
        quitting = _app(Config(history_path=closed_history.path), closed_history)
        closed_history.close()
        quitting.libraries.attach(1, root)
        qtbot.wait(50)  # its timer fires with the history closed: nothing is raised
        for app in (started, quitting):
            app.libraries.close()
        history.close()

    def test_window_temporary_chat_neither_takes_nor_searches_a_library(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A temporary chat's session ids are an in-memory database's: a saved chat with the
        same id keeps its library to itself, and a folder added in the temporary chat is
        refused with a word, not attached to that saved chat."""
        from llamachat.dev.pytest_plugin import _library_folder

        root = _library_folder(tmp_path / "docs")
        window, _history = chat_window()
        window.libraries.add_folders([root])
        router.script(Reply(content="Saved."))
        _send(qtbot, window, "A saved chat with a library.")
        saved = window.session_id
        qtbot.waitUntil(lambda: not window.app.libraries.busy(), timeout=20000)
        assert window.app.libraries.libraries(saved)

        window.chat.start_temporary()
        try:
            router.script(Reply(content="Temporary."), Reply(content="Again."))
            _send(qtbot, window, "A temporary question.")
            assert window.chat.state.session_id == saved  # a memory database counts from 1 too
            assert "search_documents" not in json.dumps(router.chat_requests()[-1].json)
            window.libraries.add_folders([root])
            assert "temporary chat has no libraries" in window.statusBar().currentMessage()
            _send(qtbot, window, "And again.")
            assert "search_documents" not in json.dumps(router.chat_requests()[-1].json)
            assert len(window.app.libraries.libraries(saved)) == 1
        finally:
            # Closing a temporary chat with messages asks first: nobody would answer.
            window.chat.discard_temporary()

    def test_host_shows_the_page_of_a_long_pdf_while_indexing_it(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Indexing a long PDF, the host says the page it got to, not only the files done,
        and the Libraries panel reads "book.pdf, page N of 120"; idle, the bar is hidden."""
        from llamachat.dev.pytest_plugin import _library_pdf
        from llamachat.library import extract
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.panel import LibrariesPanel

        root = tmp_path / "docs"
        _library_pdf(
            root / "book.pdf", [f"Page {n} tells of llamas in the Andes." for n in range(120)]
        )
        reads: list[tuple[int, int]] = []
        extract.extract(root / "book.pdf", 1, on_page=lambda *pages: reads.append(pages))
        assert len(reads) >= 120 // extract.PART_PAGES and reads[-1] == (120, 120)
        assert [page for page, _pages in reads] == sorted({page for page, _pages in reads})

        host = LibraryHost(tmp_path / "library.db")
        panel = LibrariesPanel(host, 3)
        qtbot.addWidget(panel)
        seen: list[tuple] = []
        labels: list[str] = []

        def on_progress(*args: object) -> None:
            seen.append(args)
            labels.append(panel.progress_label.text())  # the panel's slot ran first

        host.progress.connect(on_progress)
        host.attach(3, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        host.close()
        pages = [(page, total) for _done, _files, _name, page, total in seen if total]
        assert pages and {total for _page, total in pages} == {120}
        assert 0 < pages[0][0] < 120  # the first part of the file
        assert re.fullmatch(
            r"0 of 1 files: book\.pdf, page \d+ of 120",
            labels[seen.index((0, 1, "book.pdf", *pages[0]))],
        )
        assert seen[-1] == (0, 0, "", 0, 0)
        assert panel.progress.isHidden() and panel.progress_label.isHidden()
        [row] = host.libraries(3)
        assert row.passages == 120

    def test_host_reads_files_in_a_child_process_that_closing_ends(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The host's indexing reads the files in a child process at a lower CPU priority
        (pypdf off the window's GIL), with the same result as reading them here; the child
        ends with the run. Closing the host while a long PDF is read ends the child at once,
        and that file is not taken as indexed."""
        import multiprocessing

        from llamachat.dev.pytest_plugin import _library_folder, _library_pdf
        from llamachat.library import child
        from llamachat.library.store import LibraryStore
        from llamachat.ui.library.host import LibraryHost

        def readers() -> list:
            return [p for p in multiprocessing.active_children() if p.name == "llamachat-reader"]

        root = _library_folder(tmp_path / "docs")
        here = LibraryStore(tmp_path / "here.db")
        here.index(here.attach(1, root))
        host = LibraryHost(tmp_path / "library.db")
        during: list[int] = []
        host.progress.connect(lambda *_args: during.extend(p.pid for p in readers()))
        host.attach(1, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        [library] = host.libraries(1)
        assert host.files(library.id) == here.files(here.attach(1, root))
        here.close()
        assert during and os.getpid() not in during
        assert readers() == []

        long = tmp_path / "long"
        _library_pdf(long / "long.pdf", ["An alpaca sleeps under the stars."] * 400)
        reading: list[tuple[int, int]] = []

        def on_progress(_done: int, _files: int, _name: str, page: int, _pages: int) -> None:
            if page and not reading:
                [reader] = readers()
                reading.append((reader.pid, os.getpriority(os.PRIO_PROCESS, reader.pid)))
                host.close()  # in the middle of the PDF

        host.progress.connect(on_progress)
        host.attach(1, long)
        qtbot.waitUntil(lambda: bool(reading) and not host.busy(), timeout=60000)
        [(pid, niceness)] = reading
        assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + child.NICENESS)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert readers() == []
        [stopped] = [row for row in host.libraries(1) if row.root == long.resolve()]
        assert stopped.files == 0  # read again next time, not kept half read

    def test_viewer_command_opens_a_pdf_at_its_page_in_a_known_viewer(
        self, tmp_path: Path, monkeypatch
    ) -> None:
        """The desktop's default PDF application (xdg-mime, its .desktop file's Exec) opens
        the page when it is a viewer known to take one; another default gets no command
        (the desktop opens the file); with no default, the first known viewer on PATH does;
        a file that is not a PDF gets none."""
        from llamachat.dev.pytest_plugin import _recording_program
        from llamachat.library.open_at_page import viewer_command

        bin_dir, record = tmp_path / "bin", tmp_path / "args.txt"
        monkeypatch.setenv("PATH", str(bin_dir))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
        monkeypatch.setenv("XDG_DATA_DIRS", str(tmp_path / "none"))
        apps = tmp_path / "share" / "applications"
        apps.mkdir(parents=True)
        (apps / "org.kde.okular.desktop").write_text(
            "[Desktop Entry]\nName=Okular\nExec=okular %U\n[Desktop Action new]\nExec=no\n"
        )
        (apps / "firefox.desktop").write_text("[Desktop Entry]\nExec=firefox %u\n")
        for name in ("evince", "okular", "firefox"):
            _recording_program(bin_dir / name, record)
        pdf = tmp_path / "q&a #1.pdf"

        _recording_program(bin_dir / "xdg-mime", tmp_path / "asked.txt", "org.kde.okular.desktop")
        command = viewer_command(pdf, 340)
        assert command == [str(bin_dir / "okular"), "--page", "340", str(pdf)]
        subprocess.run(command, check=True)
        assert record.read_text().splitlines()[1:] == ["--page", "340", str(pdf)]
        assert (tmp_path / "asked.txt").read_text().split() == [
            str(bin_dir / "xdg-mime"), "query", "default", "application/pdf",
        ]  # fmt: skip

        _recording_program(bin_dir / "xdg-mime", tmp_path / "asked.txt", "firefox.desktop")
        assert viewer_command(pdf, 340) is None
        (bin_dir / "xdg-mime").unlink()
        assert viewer_command(pdf, 2) == [str(bin_dir / "evince"), "-i", "2", str(pdf)]
        assert viewer_command(tmp_path / "notes.txt", 2) is None
        assert viewer_command(pdf, 0) is None

    def test_document_source_link_opens_the_pdf_at_its_page(
        self, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """A document search's source in a reply links to its file with #page=N, its name
        as text; activating it starts the viewer found for the page, detached."""
        from llamachat.dev.pytest_plugin import _recording_program

        bin_dir, record = tmp_path / "bin", tmp_path / "args.txt"
        monkeypatch.setenv("PATH", str(bin_dir))
        _recording_program(bin_dir / "evince", record)
        pdf = tmp_path / "docs" / "q&a <b>#1.pdf"
        view = MessageView({"role": "assistant", "status": "complete", "content": "See it."})
        qtbot.addWidget(view)
        view.add_search(
            "zebra",
            [{"title": f"{pdf.name}, page 2", "url": pdf.as_uri(), "path": str(pdf), "page": 2}],
            title="Searched documents",
        )
        [label] = [
            label
            for label in view.findChildren(QLabel)
            if label.accessibleName() == "Searched documents"
        ]
        assert ">q&amp;a &lt;b&gt;#1.pdf, page 2</a>" in label.text()
        [href] = re.findall(r'href="([^"]+)"', label.text())
        assert href == f"{pdf.as_uri()}#page=2"
        label.linkActivated.emit(href)
        qtbot.waitUntil(lambda: record.exists() and len(record.read_text().splitlines()) == 4)
        assert record.read_text().splitlines()[1:] == ["-i", "2", str(pdf)]

    def test_vectors_find_a_passage_by_meaning_through_the_tool(
        self, router, tmp_path: Path
    ) -> None:
        """With an embedding model, indexing stores a vector per passage from the router's
        /v1/embeddings (batched), and search_documents finds a passage whose words are not
        the query's but whose vector is near it; full text alone finds nothing."""
        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.library.store import LibraryStore
        from llamachat.tools import documents

        root = tmp_path / "docs"
        root.mkdir()
        (root / "garage.txt").write_text("The automobile needs new tyres before winter.")
        (root / "kitchen.txt").write_text("Bake the bread for forty minutes.\n\n" * 3)
        router.synonyms = {"vehicle": "automobile"}
        db = tmp_path / "library.db"
        client = Client(router.url)
        try:
            embedder = _embedder(client)
            store = LibraryStore(db)
            report = store.index(store.attach(3, root), embedder=embedder)
            assert (report.embedded, report.vectors) == (report.passages, "")
            assert store.search("vehicle", 3) == []  # no passage holds the word
            store.close()
            [sent] = [r.json for r in router.requests if r.path == "/v1/embeddings"][:1]
            assert sent["model"] == "test-model" and isinstance(sent["input"], list)
            tool = documents.SearchDocuments(documents.LibraryConfig(db, 3, embedder=embedder))
            result = tool.run('{"query": "vehicle"}')
        finally:
            client.close()
        assert "[1] garage.txt — " in result.text and "automobile" in result.text
        [(_kind, event)] = result.events
        assert event["results"][0]["title"] == "garage.txt"

    def test_fusion_ranks_what_both_rankings_put_forward_first(self, router, tmp_path) -> None:
        """Reciprocal rank fusion: a passage in both lists beats one first in a single list;
        a search fuses BM25's list with the vectors' (each one's best is in the answer)."""
        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.library.store import LibraryStore
        from llamachat.library.vectors import fuse

        assert [item for item, _score in fuse([[1, 2, 3], [3, 4]])] == [3, 1, 2, 4]
        assert [item for item, _score in fuse([[5], []])] == [5]
        root = tmp_path / "docs"
        root.mkdir()
        (root / "words.txt").write_text("Zebra stripes are black and white.")
        (root / "meaning.txt").write_text("The automobile is parked outside.")
        (root / "both.txt").write_text("A zebra ran past the automobile.")
        (root / "none.txt").write_text("Nothing to see in this one at all.")
        router.synonyms = {"vehicle": "automobile"}
        client = Client(router.url)
        try:
            store = LibraryStore(tmp_path / "library.db")
            store.index(store.attach(1, root), embedder=_embedder(client))
            hits = store.search("zebra vehicle", 1, limit=3, embedder=_embedder(client))
            store.close()
        finally:
            client.close()
        names = [hit.path.name for hit in hits]
        assert names[0] == "both.txt", names  # second in BM25, first by vector
        assert {"words.txt", "meaning.txt"} <= set(names)
        assert hits[0].rank < hits[1].rank  # lower is better, as BM25's

    def test_reindex_embeds_only_changed_files_and_drops_the_vectors_of_removed_ones(
        self, router, tmp_path: Path
    ) -> None:
        """Vectors are incremental like the full text: an edited file's passages are sent
        again, unchanged files' are not, a removed file's vectors go with it."""
        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.library.store import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        for name in ("a", "b", "c"):
            (root / f"{name}.txt").write_text(f"File {name} talks about {name}nimals.")
        client = Client(router.url)
        try:
            store = LibraryStore(tmp_path / "library.db")
            library = store.attach(1, root)
            assert store.index(library, embedder=_embedder(client)).embedded == 3
            before = len(router.requests)
            (root / "a.txt").write_text("File a now talks about aardvarks, at length.")
            (root / "c.txt").unlink()
            report = store.index(library, embedder=_embedder(client))
            sent = [r.json["input"] for r in router.requests[before:] if "embeddings" in r.path]
            count = store._db.execute("SELECT COUNT(*) FROM passage_vectors").fetchone()[0]
            store.close()
        finally:
            client.close()
        assert (report.indexed, report.removed, report.embedded) == (1, 1, 1)
        assert sent == [["File a now talks about aardvarks, at length."]]
        assert count == 2

    def test_another_embedding_model_embeds_everything_again(self, tmp_path: Path) -> None:
        """A new embedding_model makes every vector again (another model's vectors are not
        comparable); a search with the old model's name uses full text only, no vectors."""
        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.library.store import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        (root / "a.txt").write_text("Alpha passage.")
        (root / "b.txt").write_text("Beta passage.")
        models = [Model("test-model", "loaded"), Model("embed-b", "loaded")]
        with ScriptedRouter(models) as router:
            client = Client(router.url)
            try:
                store = LibraryStore(tmp_path / "library.db")
                library = store.attach(1, root)
                store.index(library, embedder=_embedder(client, "test-model"))
                report = store.index(library, embedder=_embedder(client, "embed-b"))
                row = store._db.execute("SELECT model, dimension FROM vector_model").fetchone()
                before = len(router.requests)
                hits = store.search("alpha", 1, embedder=_embedder(client, "test-model"))
                store.close()
            finally:
                client.close()
        assert (report.indexed, report.embedded) == (0, 2)
        assert row == ("embed-b", 64)
        assert [hit.path.name for hit in hits] == ["a.txt"]
        assert len(router.requests) == before  # no query vector of a model not stored

    def test_router_down_or_refusing_keeps_full_text_and_the_panel_says_why(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Indexing in the background with a router that refuses embeddings (a model not
        started with --embeddings), then with none answering: the full-text index is made
        and searched all the same, and the Libraries panel says why there are no vectors."""
        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.library.store import LibraryStore
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.panel import LibrariesPanel

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        db = tmp_path / "library.db"
        with ScriptedRouter([Model("chat-only", "loaded", embeddings=False)]) as router:
            client = Client(router.url)
            host = LibraryHost(db, embedder=lambda: _embedder(client, "chat-only"))
            panel = LibrariesPanel(host, 4)
            qtbot.addWidget(panel)
            host.attach(4, root)
            qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
            assert "does not support embeddings" in host.vectors_note
            assert "full text only" in panel.summary.text()
            assert "does not support embeddings" in panel.summary.text()
        # The router is gone now: nothing answers.
        (root / "more.txt").write_text("More zebra news.")
        host.reindex_all()
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        client.close()
        assert "gave no vectors" in panel.summary.text()
        store = LibraryStore(db)
        try:
            names = {hit.path.name for hit in store.search("zebra", 4)}
        finally:
            store.close()
        assert names == {"zebra.txt", "more.txt"}
        host.close()

    def test_libraries_panel_says_the_search_uses_vectors_when_it_does(
        self, qtbot, router, tmp_path: Path
    ) -> None:
        """With vectors made, the panel says the search goes by meaning too and with which
        model; without an embedding model it says nothing of vectors."""
        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.panel import LibrariesPanel

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        client = Client(router.url)
        embedders = [_embedder(client), None]
        host = LibraryHost(tmp_path / "library.db", embedder=lambda: embedders[0])
        panel = LibrariesPanel(host, 4)
        qtbot.addWidget(panel)
        host.attach(4, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        panel.refresh()
        assert "by meaning too, with vectors from test-model" in panel.summary.text()
        embedders.pop(0)
        panel.refresh()
        assert "meaning" not in panel.summary.text() and "vectors" not in panel.summary.text()
        host.close()
        client.close()

    def test_without_sqlite_vec_the_library_searches_full_text_and_says_so(
        self, router, tmp_path: Path, monkeypatch
    ) -> None:
        """sqlite-vec that will not load leaves the library working on full text, the
        reason in the report (what the panel shows), never an error."""
        import sqlean
        import sqlite_vec

        from llamachat.dev.pytest_plugin import _embedder
        from llamachat.library.store import LibraryStore

        def refuse(_db: object) -> None:
            raise sqlean.OperationalError("vec0.so: cannot open shared object file")

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        monkeypatch.setattr(sqlite_vec, "load", refuse)
        client = Client(router.url)
        try:
            store = LibraryStore(tmp_path / "library.db")
            report = store.index(store.attach(1, root), embedder=_embedder(client))
            hits = store.search("zebra", 1, embedder=_embedder(client))
            store.close()
        finally:
            client.close()
        assert not store.vectors
        assert "sqlite-vec could not be loaded (vec0.so" in report.vectors
        assert [hit.path.name for hit in hits] == ["zebra.txt"]
        assert not [r for r in router.requests if "embeddings" in r.path]

    def test_config_embedding_model_key_and_its_check(self, tmp_path: Path) -> None:
        """embedding_model: off by default, a model name as the router lists it; a name
        with spaces around it or a control character is refused with the key's name."""
        assert config.Config().embedding_model == ""
        cfg = config.load(_write_config(tmp_path, 'embedding_model = "nomic-embed:Q8_0"\n'))
        assert cfg.embedding_model == "nomic-embed:Q8_0"
        for bad in ('" nomic"', '"a\\tb"'):
            error = _config_error(_write_config(tmp_path, f"embedding_model = {bad}\n"))
            assert error.key == "embedding_model" and "model name" in str(error)
        assert "# embedding_model = " in config.DEFAULT_TEXT

    @pytest.mark.real_router
    def test_real_router_embeds_passages_with_smollm2_in_embedding_mode(
        self, real_router, tmp_path: Path
    ) -> None:
        """The real llama-server router, SmolLM2 under a second preset name with
        `embeddings = true` and mean pooling: /v1/embeddings answers one vector a text,
        a library is indexed with them and searched by fusion; the chat model refuses."""
        from llamachat.dev.pytest_plugin import SMOL_EMBED_ID, _embedder
        from llamachat.library.store import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        (root / "llamas.txt").write_text("Llamas eat grass and hay in the Andes.")
        (root / "bread.txt").write_text("Bake the bread for forty minutes.")
        client = Client(real_router.url)
        try:
            got = embeddings(client, SMOL_EMBED_ID, ["a llama", "some bread"], timeout=120)
            assert [len(v) for v in got] == [576, 576]
            store = LibraryStore(tmp_path / "library.db")
            report = store.index(store.attach(1, root), embedder=_embedder(client, SMOL_EMBED_ID))
            hits = store.search("llamas", 1, embedder=_embedder(client, SMOL_EMBED_ID))
            row = store._db.execute("SELECT model, dimension FROM vector_model").fetchone()
            store.close()
            with pytest.raises(ServerError, match="does not support embeddings"):
                embeddings(client, SMOL_ID, ["x"], timeout=60)
            Models(client).unload(SMOL_EMBED_ID)
        finally:
            client.close()
        assert (report.embedded, report.vectors) == (2, "")
        assert row == (SMOL_EMBED_ID, 576)
        assert hits[0].path.name == "llamas.txt" and len(hits) == 2

    def test_vectors_bits_first_then_floats_keep_the_exact_nearest_first(
        self, tmp_path: Path
    ) -> None:
        """The vectors' nearest are the 200 nearest by their bits, ranked by cosine on the
        floats: over 600 passages in clusters (vectors of 100 values, not a multiple of 8),
        the exact nearest is always first and nearly all of the exact 20 are found."""
        from llamachat.dev.bench_library import LocalVectors
        from llamachat.library import vectors
        from llamachat.library.store import COARSE_CANDIDATES, LibraryStore
        from llamachat.library.vectors import Embedder

        root = tmp_path / "docs"
        root.mkdir()
        for name in range(3):
            # Over half a passage long each: one passage a paragraph.
            paragraphs = [f"Passage {name}-{i}: " + "more notes " * 60 for i in range(200)]
            (root / f"notes-{name}.txt").write_text("\n\n".join(paragraphs))
        local = LocalVectors(100)
        embedder = Embedder("local", local.embed)
        store = LibraryStore(tmp_path / "library.db")
        report = store.index(store.attach(1, root), embedder=embedder)
        assert report.embedded == 600 > COARSE_CANDIDATES
        found = 0
        try:
            for n in range(20):
                query = f"question {n}"
                near = store._nearest(query, 1, embedder, 20)
                exact = [
                    rowid
                    for (rowid,) in store._db.execute(
                        "SELECT rowid FROM passage_vectors"
                        " ORDER BY vec_distance_cosine(embedding, ?) LIMIT 20",
                        (vectors.pack(local.vector(query)),),
                    )
                ]
                assert near[0] == exact[0], query
                found += len(set(near) & set(exact))
            assert store._nearest("question 0", 2, embedder, 20) == []  # another chat's
        finally:
            store.close()
        assert found >= 0.9 * 20 * 20

    def test_a_version_1_library_db_keeps_its_vectors_given_their_bits(
        self, tmp_path: Path
    ) -> None:
        """library.db made before the bits (version 1: float vectors searched by brute
        force) is converted by the next indexing: every vector kept, nothing sent to the
        router again, the search finds what it found; a version 1 file whose vectors name
        no model has them made again."""
        from llamachat.dev.pytest_plugin import _recording_embedder
        from llamachat.library.schema import SCHEMA_VERSION
        from llamachat.library.store import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        for name in ("alpha", "beta", "gamma"):
            (root / f"{name}.txt").write_text(f"The {name} notes.\n\nMore on {name}.")
        embedder, sent = _recording_embedder(64)
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        library = store.attach(1, root)
        store.index(library, embedder=embedder)
        before = [hit.text for hit in store.search("beta", 1, limit=6, embedder=embedder)]
        # Back to version 1's layout, as its LibraryStore made it.
        rows = store._db.execute(
            "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
        ).fetchall()
        store._db.execute("DROP TABLE passage_vectors")
        store._db.execute(
            "CREATE VIRTUAL TABLE passage_vectors USING vec0(session_id INTEGER PARTITION KEY,"
            " embedding float[64] distance_metric=cosine)"
        )
        store._db.executemany(
            "INSERT INTO passage_vectors (rowid, session_id, embedding) VALUES (?, ?, ?)", rows
        )
        store._db.execute("PRAGMA user_version = 1")
        store._db.commit()
        store.close()

        store = LibraryStore(db)
        sent.clear()
        try:
            # Indexing converts it (in its thread: the window opens library.db too).
            report = store.index(library, embedder=embedder)
            version = store._db.execute("PRAGMA user_version").fetchone()[0]
            kept = store._db.execute(
                "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
            ).fetchall()
            after = [hit.text for hit in store.search("beta", 1, limit=6, embedder=embedder)]
        finally:
            store.close()
        assert version == SCHEMA_VERSION and len(rows) == 3
        assert kept == rows
        assert after == before
        assert report.embedded == 0 and sent == ["beta"]  # the query's vector only

        store = LibraryStore(db)
        store._db.execute("DELETE FROM vector_model")
        store._db.execute("PRAGMA user_version = 1")
        store._db.commit()
        store.close()
        store = LibraryStore(db)
        try:
            assert store.index(library, embedder=embedder).embedded == 3
        finally:
            store.close()

    def test_window_project_library_is_indexed_once_and_searched_by_each_chat_of_it(
        self, chat_window, router, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """A folder added in the project's dialog is indexed once, searched by each chat
        of the project (through the model's tool call) and listed in their Libraries
        panel as the project's; a chat moved out of the project searches it no more."""
        from PySide6.QtWidgets import QFileDialog

        from llamachat.dev.pytest_plugin import _library_folder

        root = _library_folder(tmp_path / "docs")
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(root))
        window, history = chat_window()
        project = history.projects.create("Work <b>x</b>")
        window.sidebar.refresh()
        dialog = window.sidebar.edit_project(project)
        assert dialog is not None
        dialog.add_folder_button.click()
        host = window.app.libraries
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        assert [dialog.folders.item(n).text() for n in range(dialog.folders.count())] == [
            str(root.resolve())
        ]
        dialog.reject()

        chats = []
        for question in ("How did the zebra division do?", "And the zebra revenue?"):
            menu = window.sidebar.project_menu(project)
            next(a for a in menu.actions() if a.text() == "New chat in this project").trigger()
            router.script(
                Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra revenue"}')]),
                Reply(content="42 million."),
            )
            _send(qtbot, window, question)
            result = router.chat_requests()[-1].json["messages"][-1]
            assert result["role"] == "tool" and "42 million" in result["content"]
            chats.append(window.session_id)
        [row] = host.libraries()  # one index for the project, none per chat
        assert (row.project_id, row.session_id, row.files) == (project, None, 7)

        window.libraries.open_panel()
        panel = window.libraries.panel
        assert panel is not None
        top = panel.tree.topLevelItem(0)
        assert top.text(0) == f"From project Work <b>x</b>: {root.resolve()}"
        assert panel.tree.topLevelItemCount() == 1
        panel.close()

        history.projects.move(chats[1], None)
        router.script(Reply(content="No documents here."))
        _send(qtbot, window, "Anything on zebras?")
        assert "search_documents" not in json.dumps(router.chat_requests()[-1].json)
        window.open_session(chats[0])
        router.script(Reply(content="Still searched."))
        _send(qtbot, window, "Still there?")
        assert "search_documents" in json.dumps(router.chat_requests()[-1].json["tools"])

    def test_project_dialog_adds_and_removes_a_folder_and_deleting_the_project_forgets_it(
        self, chat_window, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """The project dialog's Libraries row adds a folder (indexed) and removes it; a
        project deleted takes its libraries' index with it, not their files."""
        from PySide6.QtWidgets import QFileDialog

        from llamachat.dev.pytest_plugin import _library_folder
        from llamachat.library.store import LibraryStore

        root = _library_folder(tmp_path / "docs")
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(root))
        window, history = chat_window()
        host = window.app.libraries
        project = history.projects.create("Work")
        window.sidebar.refresh()
        dialog = window.sidebar.edit_project(project)
        assert dialog is not None and dialog.folders.count() == 0
        assert not dialog.remove_folder_button.isEnabled()
        dialog.add_folder_button.click()
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        assert dialog.folders.count() == 1 and dialog.remove_folder_button.isEnabled()
        dialog.remove_folder_button.click()
        assert dialog.folders.count() == 0 and host.libraries(project_id=project) == []
        dialog.reject()

        host.attach_to_project(project, root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=20000)
        assert host.config_for(None, 2, project) is not None
        menu = window.sidebar.project_menu(project)
        next(a for a in menu.actions() if a.text().startswith("Delete project")).trigger()
        assert history.projects.get(project) is None
        assert host.libraries() == [] and host.config_for(None, 2, project) is None
        store = LibraryStore(host.path)
        try:
            assert store._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0] == 0
        finally:
            store.close()
        assert (root / "report.pdf").exists()

    def test_library_db_version_2_keeps_its_chat_libraries_and_vectors_and_takes_projects(
        self, tmp_path: Path
    ) -> None:
        """library.db made before projects (version 2: libraries of chats only) is migrated
        when opened: the chat's library keeps its id, files and vectors (nothing sent to the
        router again), and a project's library beside it is searched by the project's chat
        alone, by words and by vectors."""
        from llamachat.dev.pytest_plugin import _recording_embedder
        from llamachat.library.schema import SCHEMA_VERSION
        from llamachat.library.store import LibraryStore

        chat_docs, project_docs = tmp_path / "chat", tmp_path / "project"
        for folder, word in ((chat_docs, "alpha"), (project_docs, "omega")):
            folder.mkdir()
            (folder / f"{word}.txt").write_text(f"The {word} notes.\n\nMore on {word}.")
        embedder, sent = _recording_embedder(64)
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        library = store.attach(1, chat_docs)
        store.index(library, embedder=embedder)
        before = [hit.text for hit in store.search("alpha", 1, limit=6, embedder=embedder)]
        vectors_before = store._db.execute(
            "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
        ).fetchall()
        # Back to version 2's libraries table, as its LibraryStore made it.
        store._db.execute("PRAGMA foreign_keys=OFF")
        store._db.executescript(
            "CREATE TABLE old (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL,"
            " root TEXT NOT NULL, indexed_at REAL NOT NULL DEFAULT 0,"
            " UNIQUE (session_id, root));"
            "INSERT INTO old SELECT id, session_id, root, indexed_at FROM libraries;"
            "DROP TABLE libraries; ALTER TABLE old RENAME TO libraries;"
            "PRAGMA user_version = 2;"
        )
        store.close()

        store = LibraryStore(db)
        sent.clear()
        try:
            version = store._db.execute("PRAGMA user_version").fetchone()[0]
            [row] = store.libraries()
            assert (row.id, row.session_id, row.project_id, row.files) == (library, 1, None, 1)
            assert store.index(library, embedder=embedder).embedded == 0
            assert (
                store._db.execute(
                    "SELECT rowid, session_id, embedding FROM passage_vectors ORDER BY rowid"
                ).fetchall()
                == vectors_before
            )
            after = [hit.text for hit in store.search("alpha", 1, limit=6, embedder=embedder)]
            store.index(store.attach_to_project(3, project_docs), embedder=embedder)
            mine = {hit.path.name for hit in store.search("omega", 1, 6, embedder, 3)}
            others = {hit.path.name for hit in store.search("omega", 2, 6, embedder)}
            near_mine = store._nearest("omega", 1, embedder, 20, 3)
            near_others = store._nearest("omega", 2, embedder, 20)
            passages = store._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        finally:
            store.close()
        assert version == SCHEMA_VERSION and after == before
        assert "omega.txt" in mine and others == set()
        # The chat's vectors and its project's, ranked together; none for another chat.
        assert len(near_mine) == passages == 2 and near_others == []


class TestImport:
    """Chats imported from other apps' exports and our Markdown (`history.importers`)."""

    @staticmethod
    def _write(tmp_path: Path, name: str, data: object) -> Path:
        source = tmp_path / name
        text = data if isinstance(data, str) else json.dumps(data)
        source.write_text(text, encoding="utf-8")
        return source

    @staticmethod
    def _rows(history: History, session_id: int) -> list[tuple]:
        return [
            (m["role"], m["content"], m["reasoning"], m["model"])
            for m in history.messages(session_id)
        ]

    def test_import_chatgpt_tree_becomes_versions_with_the_current_node_active(
        self, tmp_path: Path
    ) -> None:
        """ChatGPT's mapping is the tree: a regenerated answer is a version and
        current_node the active leaf; root, system, tool and recap nodes are left out;
        thoughts become the answer's reasoning, an image a placeholder; models and times
        kept; the newest conversation is listed first."""
        from llamachat.dev.chat_exports import BASE_TIME, chatgpt_export

        history = History(tmp_path / "h.db")
        source = self._write(tmp_path, "conversations.json", chatgpt_export(3))
        ids = import_chats(history.path, source)
        assert [s["title"] for s in history.list_sessions()] == [
            "Chat 2 (imported)",
            "Chat 1 (imported)",
            "Chat 0 (imported)",
        ]
        assert [s["id"] for s in history.list_sessions()] == ids[::-1]
        first = ids[0]
        session = history.get_session(first)
        assert (session["created_at"], session["model"]) == (BASE_TIME, "gpt-4o-mini")
        rows = self._rows(history, first)
        assert rows[:6] == [
            ("user", "Question 0 of chat 0", "", ""),
            ("assistant", "Answer 0 of chat 0", "", "gpt-4o"),
            ("user", "[image]\n\nQuestion 1 of chat 0", "", ""),
            ("assistant", "Answer 1 of chat 0", "", "gpt-4o"),
            ("user", "Question 2 of chat 0", "", ""),
            ("assistant", "Answer 2 of chat 0", "Thinking about chat 0", "gpt-4o"),
        ]
        assert len(rows) == 10 and rows[7] == ("assistant", "Answer 3 of chat 0", "", "gpt-4o")
        assert rows[-1] == ("assistant", "Answer 4 of chat 0, regenerated", "", "gpt-4o-mini")
        messages = history.messages(first)
        assert messages[0]["created_at"] == BASE_TIME and messages[1]["created_at"] == BASE_TIME + 5
        last = messages[-1]
        assert len(last["versions"]) == 2 and last["versions"][-1] == last["id"]
        earlier = history.select_version(first, last["versions"][0])[-1]
        assert (earlier["content"], earlier["model"]) == ("Answer 4 of chat 0", "gpt-4o")
        assert all(len(m["versions"]) == 0 for m in history.messages(ids[1]))
        history.close()

    def test_import_open_webui_history_tree_reasoning_and_models(self, tmp_path: Path) -> None:
        """Open WebUI's history.messages tree: an edited question is a version, currentId
        the active leaf; its reasoning block becomes the reply's reasoning; model and
        times (seconds) kept."""
        from llamachat.dev.chat_exports import BASE_TIME, open_webui_export

        history = History(tmp_path / "h.db")
        ids = import_chats(history.path, self._write(tmp_path, "chat.json", open_webui_export(2)))
        assert history.get_session(ids[-1])["title"] == "Web chat 1 (imported)"
        session = history.get_session(ids[0])
        assert (session["created_at"], session["model"]) == (BASE_TIME, "llama3:8b")
        assert self._rows(history, ids[0]) == [
            ("user", "Edited question of chat 0", "", ""),
            ("assistant", "Answer of chat 0", "Thinking about chat 0\nin two lines", "llama3:8b"),
        ]
        question = history.messages(ids[0])[0]
        assert question["created_at"] == BASE_TIME + 60 and len(question["versions"]) == 2
        other = history.select_version(ids[0], question["versions"][0])
        assert [m["content"] for m in other] == ["First question of chat 0", "First answer"]
        history.close()

    def test_import_llama_cpp_web_ui_exports_one_all_and_the_older_shape(
        self, tmp_path: Path
    ) -> None:
        """The web UI's {conv, messages} (one, or a list): its root left out, an edited
        question a version, currNode active, thinking the reasoning, times in ms; the
        older web UI's numbered ids and <think> reasoning too."""
        from llamachat.dev.chat_exports import BASE_TIME, llama_cpp_conversation, llama_cpp_export

        history = History(tmp_path / "h.db")
        ids = import_chats(history.path, self._write(tmp_path, "all.json", llama_cpp_export(2)))
        assert len(ids) == 2
        [one] = import_chats(
            history.path, self._write(tmp_path, "one.json", llama_cpp_conversation(5))
        )
        assert history.get_session(one)["title"] == "Local chat 5 (imported)"
        assert self._rows(history, ids[0]) == [
            ("user", "Edited question of chat 0\n\n[image: photo.png]", "", ""),
            ("assistant", "Answer of chat 0", "Thinking about chat 0", "qwen3-4b"),
        ]
        question = history.messages(ids[0])[0]
        assert question["created_at"] == BASE_TIME + 60 and len(question["versions"]) == 2
        assert history.get_session(ids[0])["model"] == "qwen3-4b"
        older = {
            "conv": {"id": "conv-1", "name": "Old", "lastModified": 1_700_000_000_000, "currNode": 3},
            "messages": [
                {"id": 1, "convId": "conv-1", "type": "root", "timestamp": 1_700_000_000_000,
                 "role": "system", "content": "", "parent": -1, "children": [2]},
                {"id": 2, "convId": "conv-1", "type": "text", "timestamp": 1_700_000_001_000,
                 "role": "user", "content": "Hi", "parent": 1, "children": [3]},
                {"id": 3, "convId": "conv-1", "type": "text", "timestamp": 1_700_000_002_000,
                 "role": "assistant", "content": "<think>Hmm.</think>Hello!", "parent": 2,
                 "children": []},
            ],
        }  # fmt: skip
        [old] = import_chats(history.path, self._write(tmp_path, "old.json", older))
        assert self._rows(history, old) == [
            ("user", "Hi", "", ""),
            ("assistant", "Hello!", "Hmm.", ""),
        ]
        history.close()

    def test_import_markdown_export_round_trip_gives_back_the_path(self, tmp_path: Path) -> None:
        """export_markdown then import: the same path (roles, text, reasoning, models,
        a stopped and a failed reply, tool calls, a fenced '## You' inside a reply)."""
        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "qwen")
        history.add_message(sid, "user", "Name three rivers.\n\nIn Africa, please.")
        history.add_message(sid, "assistant", "First try", model="qwen")
        history.add_message(
            sid,
            "assistant",
            "Nile.",
            model="qwen",
            parent=history.messages(sid)[0]["id"],
            reasoning="Think\n\nhard",
        )
        history.add_message(sid, "user", "A code block?")
        history.add_message(
            sid, "assistant", "```md\n## You\n```\n\nDone.", model="llama", status="stopped"
        )
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"q": "x"}'},
        }
        history.add_message(sid, "assistant", "Let me look.", tool_calls=[call], model="llama")
        history.add_message(sid, "tool", "found it")
        history.add_message(sid, "assistant", "", model="llama", status="error", error="HTTP 500")
        source = self._write(tmp_path, "chat.md", history.export_markdown(sid))
        [new] = import_chats(history.path, source)
        fields = ("role", "content", "reasoning", "model", "status", "error", "tool_calls")
        assert [[m[f] for f in fields] for m in history.messages(new)] == [
            [m[f] for f in fields] for m in history.messages(sid)
        ]
        session = history.get_session(new)
        assert (session["mode"], session["model"]) == ("chat", "qwen")
        assert session["title"] == "Name three rivers. (imported)"
        history.close()

    @pytest.mark.parametrize(
        ("key", "make", "words"),
        [
            (
                "chatgpt",
                lambda e: e["chatgpt"][1]["mapping"]["q0-1"]["message"].update(create_time="noon"),
                'conversation 2 "Chat 1": mapping["q0-1"].message.create_time must be a time',
            ),
            (
                "chatgpt",
                lambda e: e["chatgpt"][0]["mapping"]["root-2"].update(parent="q4-2"),
                "conversation 1 \"Chat 2\": message 'root-2' is among its own parents",
            ),
            (
                "chatgpt",
                lambda e: e["chatgpt"][0].update(update_time=float("nan")),
                "update_time must be a time in seconds since 1970, got nan",
            ),
            (
                "webui",
                lambda e: e["webui"][0]["chat"]["history"].update(messages=[]),
                'conversation 1 "Web chat 1": chat.history.messages must be an object',
            ),
            (
                "llamacpp",
                lambda e: e["llamacpp"][1]["messages"][2].update(id="u1-1"),
                'conversation 2 "Local chat 1": messages[3].id must be an id no other message',
            ),
            (
                "llamacpp",
                lambda e: e["llamacpp"][0]["messages"][1].update(timestamp=-5),
                "messages[2].timestamp must be a time in milliseconds since 1970, got -5",
            ),
            (
                "markdown",
                lambda e: e.update(markdown="# Notes\n\nJust some notes.\n\n## You\n\nhi\n"),
                "line 3 is not under a '## You' or '## Assistant' heading",
            ),
            (
                "other",
                lambda e: e.update(other=[{"hello": 1}]),
                "not a chat export llamachat reads",
            ),
            (
                "deep",
                lambda e: e.update(deep="[" * 200_000 + "]" * 200_000),
                "conversation 1 nests",
            ),
            ("empty", lambda e: e.update(empty=[]), "the file holds no conversations"),
            (
                "chatgpt",
                lambda e: e["chatgpt"][2]["mapping"]["a1-0"]["message"]["content"].update(
                    parts=["x" * 2000]
                ),
                'conversation 3 "Chat 0": message 4 is 2,000 characters long; the limit is 1,000',
            ),
        ],
    )
    def test_import_bad_file_names_the_problem_and_imports_nothing(
        self, tmp_path: Path, key: str, make, words: str
    ) -> None:
        """Each format's mistakes name the conversation and the field; nothing is added,
        the good conversations before the bad one included."""
        from llamachat.dev.chat_exports import chatgpt_export, llama_cpp_export, open_webui_export

        exports: dict = {
            "chatgpt": chatgpt_export(3),
            "webui": open_webui_export(2),
            "llamacpp": llama_cpp_export(2),
        }
        make(exports)
        history = History(tmp_path / "h.db")
        source = self._write(tmp_path, "bad.json", exports[key])
        with pytest.raises(HistoryError, match=re.escape(words)):
            import_chats(history.path, source, max_message_chars=1000)
        assert history.count_sessions() == 0
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
        raw.close()
        history.close()

    def test_import_many_chats_through_the_sidebar_with_progress_and_cancel(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The sidebar's Import chats… writes every chat of a ChatGPT export in the
        background with rising progress, opens the newest and says how many; Cancel
        while writing a larger one keeps nothing of it."""
        from llamachat.dev.chat_exports import chatgpt_export

        history = _chrome_history(tmp_path)
        history.add_message(history.create_session("chat"), "user", "Mine")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        assert sidebar.import_action.text() == "Import chats…"
        source = self._write(tmp_path, "conversations.json", chatgpt_export(30))
        seen: list[int] = []
        sidebar.importer._progress.connect(seen.append)
        with qtbot.waitSignal(sidebar.session_activated, timeout=20000) as opened:
            sidebar.start_import(source)
            assert sidebar.import_progress is not None
        assert seen == sorted(seen) and seen[-1] >= 50
        assert sidebar.notice_text() == "Imported 30 chats from conversations.json."
        assert history.get_session(opened.args[0])["title"] == "Chat 29 (imported)"
        assert sidebar.current() == opened.args[0] == sidebar.session_ids()[0]
        assert history.count_sessions() == 31

        big = self._write(tmp_path, "big.json", chatgpt_export(400))
        dialog: list = []

        def cancel_while_writing(percent: int) -> None:
            if percent > 60 and not dialog:
                dialog.append(sidebar.import_progress)
                dialog[0].findChild(QPushButton).click()  # its Cancel

        sidebar.importer._progress.connect(cancel_while_writing)
        sidebar.start_import(big)
        qtbot.waitUntil(lambda: "cancelled" in sidebar.notice_text(), timeout=20000)
        assert (
            dialog and sidebar.notice_text() == "Import of big.json cancelled; nothing was added."
        )
        assert history.count_sessions() == 31
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 31
        raw.close()
        history.close()

    def test_import_hostile_titles_and_file_name_stay_plain_text(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Imported titles and the file's name reach the list, the notice and the progress
        dialog as text."""
        from llamachat.dev.chat_exports import chatgpt_export

        exported = chatgpt_export(2)
        exported[0]["title"] = HOSTILE
        history = _chrome_history(tmp_path)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        source = self._write(tmp_path, f"{HOSTILE}.json", exported)
        with qtbot.waitSignal(sidebar.session_activated, timeout=20000):
            sidebar.start_import(source)
            sidebar.import_progress.show()
            assert "Import progress" in " ".join(_outside_text_places())
        assert history.get_session(sidebar.current())["title"] == f"{HOSTILE} (imported)"
        places = " ".join(_outside_text_places())
        assert "Sessions notice" in places and "Sessions" in places.replace("Sessions notice", "")
        history.close()

    def test_import_runs_in_a_child_process_that_cancel_and_failure_leave_clean(
        self, tmp_path: Path
    ) -> None:
        """`import_in_child` imports in a process of its own (the window's GIL stays free);
        Cancel (its progress callback raising) keeps nothing; a bad file's HistoryError
        comes back whole."""
        import multiprocessing

        from llamachat.dev.chat_exports import chatgpt_export
        from llamachat.history.import_child import import_in_child

        source = self._write(tmp_path, "conversations.json", chatgpt_export(40))
        history = _chrome_history(tmp_path)
        children: set[str] = set()

        def watch(_share: float) -> None:
            children.update(p.name for p in multiprocessing.active_children())

        ids = import_in_child(history.path, source, watch)
        assert len(ids) == 40 and history.count_sessions() == 40
        assert "llamachat-import" in children

        def cancel(share: float) -> None:
            if share > 0.3:
                raise ImportCancelled

        with pytest.raises(ImportCancelled):
            import_in_child(history.path, source, cancel)
        assert history.count_sessions() == 40
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 40
        raw.close()
        bad = self._write(tmp_path, "bad.json", [{"title": "x", "mapping": 3}])
        with pytest.raises(HistoryError, match="mapping"):
            import_in_child(history.path, bad, watch)
        history.close()

    def test_import_refused_says_why_in_the_sidebar_whole_on_hover(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A bad export imports nothing; the notice names the conversation and field, and
        its tooltip holds the whole text (a narrow sidebar cuts a long field path)."""
        from llamachat.dev.chat_exports import chatgpt_export

        exported = chatgpt_export(3)
        node = list(exported[1]["mapping"].values())[2]
        node["message"]["create_time"] = "yesterday"
        history = _chrome_history(tmp_path)
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.start_import(self._write(tmp_path, "bad.json", exported))
        qtbot.waitUntil(lambda: "yesterday" in sidebar.notice_text(), timeout=20000)
        text = sidebar.notice_text()
        assert "conversation 2" in text and "create_time" in text
        assert "create_time" in sidebar.notice_label.toolTip()
        assert history.count_sessions() == 0
        history.close()
