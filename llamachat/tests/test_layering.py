"""The package's layers: a Qt-free core, one name per exception."""

from __future__ import annotations

import inspect
import pkgutil
import subprocess
import sys

import llamachat
from llamachat.dev import structure


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

    def test_no_two_exception_classes_share_a_name(self) -> None:
        """Every exception class of the package has a name of its own (an `except X` is unambiguous)."""
        import importlib

        owners: dict[str, set[str]] = {}
        for info in pkgutil.walk_packages(llamachat.__path__, "llamachat."):
            if info.name.startswith("llamachat.tests"):
                continue  # the tests' own classes are not the package's
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

    def test_a_conversations_logic_holds_no_widgets(self) -> None:
        """`ui/chat` is a conversation's logic: importing all of it loads QtCore, never QtGui or
        QtWidgets (consent boxes and notices live with the MCP panel in `ui/mcp`)."""
        chat = sorted(
            name for name in structure.product_modules() if name.startswith("llamachat.ui.chat.")
        )
        code = (
            "import sys, importlib\n"
            f"for name in {chat!r}: importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m in ('PySide6.QtGui', 'PySide6.QtWidgets'))\n"
            "print(','.join(bad))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert len(chat) > 10, chat
        assert out == "", f"ui/chat pulled in widgets: {out}"
