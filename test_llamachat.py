"""The llamachat test suite.

Real parts throughout: HTTP to a scripted OpenAI-compatible router on 127.0.0.1
(and to the real llama-server where it is installed), real SQLite files, real
files on disk, real Qt widgets under QT_QPA_PLATFORM=offscreen. Every test runs
with HOME and the XDG folders pointed at its own temporary directory, so nothing
here reads or writes the developer's own configuration, history or skills.

Sections mirror the package: config, db, prompts, skills, search, backend, models,
providers, server, ui, quick window, cli, faults.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


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


# ---------------------------------------------------------------- layering


def test_core_modules_import_without_qt() -> None:
    """The core is Qt-free: importing it in a fresh interpreter loads no PySide6."""
    import subprocess

    core = [
        name
        for name in (
            "config", "db", "prompts", "skills", "search", "backend", "models",
            "providers", "server", "scripted_router",
        )
        if (Path(__file__).parent / "llamachat" / f"{name}.py").exists()
    ]
    code = (
        "import sys, importlib\n"
        f"for name in {core!r}: importlib.import_module('llamachat.' + name)\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert core, "no core modules found"
    assert out == "", f"core modules pulled in Qt: {out}"


# ==== section: config (helper: foundation) ====

# ==== end section: config ====

# ==== section: db (helper: foundation) ====

# ==== end section: db ====

# ==== section: prompts (helper: foundation) ====

# ==== end section: prompts ====

# ==== section: skills (helper: skills) ====

# ==== end section: skills ====

# ==== section: router fixtures, search, backend, models, providers (helper: backend) ====

# ==== end section: backend ====

# ==== section: real llama-server, managed server (helper: server) ====

# ==== end section: server ====

# ==== section: conversation view (helper: render) ====

# ==== end section: conversation view ====

# ==== section: chat window (helper: window) ====

# ==== end section: chat window ====
