"""The `llamachat` command: parse the arguments, load the configuration, hand over.

    llamachat [--config PATH] [--version]      open the chat window

The window opens at once; meanwhile the router at `router_url` is looked for and,
when it does not answer, a managed llama-server is started (`server.ensure_router`)
and stopped again on exit.

Exit codes: 0 fine, 1 the history file cannot be opened, 2 a bad command line or
configuration (ConfigError, printed to stderr, and shown in a dialog when the
window was going to open). Qt is imported only on the GUI path, so `--help` and
`--version` work without a display.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__, config

log = logging.getLogger(__name__)

Command = Callable[[argparse.Namespace, config.Config], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser.

    A subcommand is a subparser whose defaults set `run` to a `Command`, called with
    the parsed arguments and the loaded configuration; without one the window opens.
    """
    parser = argparse.ArgumentParser(
        prog="llamachat",
        description="A native desktop chat for local models served by llama.cpp's router.",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        help="configuration file (default: $LLAMACHAT_CONFIG, else "
        f"{config.default_path()}; created with the defaults on first run)",
    )
    parser.add_argument("--version", action="version", version=f"llamachat {__version__}")
    parser.add_argument("--debug", action="store_true", help="log debugging detail to stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `llamachat` command; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    command: Command = getattr(args, "run", _run_gui)
    gui = command is _run_gui
    try:
        cfg = load_or_create_config(args.config)
    except config.ConfigError as exc:
        return _config_failed(exc, gui=gui)
    return command(args, cfg)


def load_or_create_config(path: Path | None = None) -> config.Config:
    """Load the configuration, first writing the commented defaults when the file is missing."""
    path = path if path is not None else config.default_path()
    if not path.exists():
        try:
            config.write_default(path)
        except OSError as exc:
            raise config.ConfigError(
                f"cannot create the configuration: {exc.strerror or exc}", path=path
            ) from None
    return config.load(path)


def _config_failed(exc: config.ConfigError, *, gui: bool) -> int:
    print(f"llamachat: {exc}", file=sys.stderr)
    if gui and _has_display():
        from PySide6.QtWidgets import QApplication, QMessageBox

        app = QApplication.instance() or QApplication(sys.argv[:1])
        app.setApplicationName("llamachat")
        QMessageBox.critical(None, "llamachat: configuration error", str(exc))
    return 2


def _has_display() -> bool:
    """Whether a dialog can be seen: a desktop session, and not a headless Qt platform."""
    if os.environ.get("QT_QPA_PLATFORM", "").split(":")[0] in ("offscreen", "minimal", "vnc"):
        return False
    if sys.platform.startswith(("linux", "freebsd", "openbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _run_gui(args: argparse.Namespace, cfg: config.Config) -> int:
    """Open the chat window and run Qt's event loop until it closes."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QMessageBox

    from .db import History, HistoryError
    from .ui import ChatWindow
    from .ui.worker import CallWorker

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("llamachat")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("llamachat")
    try:
        history = History(cfg.history_path)
    except HistoryError as exc:
        print(f"llamachat: cannot open the history {cfg.history_path}: {exc}", file=sys.stderr)
        if _has_display():
            QMessageBox.critical(None, "llamachat", f"Cannot open the history:\n{exc}")
        return 1
    managed: list = []
    try:
        window = ChatWindow(cfg, history)
        window.show()

        def on_router(result: tuple) -> None:
            url, server, error = result
            if error:
                window.show_status(error, timeout=0)
                return
            if server is not None:
                managed.append(server)
            if server is not None or url != cfg.router_url:
                window.use_router(url)

        # Finding or starting the router can take a minute (a first start loads the
        # binary); the window is usable meanwhile. A daemon thread, because a start
        # still under way when the user quits must not hold the process open.
        finder = CallWorker(lambda: _find_router(cfg))
        finder.done.connect(on_router, Qt.ConnectionType.QueuedConnection)
        threading.Thread(target=finder.run, name="llamachat-router", daemon=True).start()
        return app.exec()
    finally:
        for server in managed:
            server.stop()
        history.close()


def _find_router(cfg: config.Config) -> tuple[str, object, str]:
    """The router to use, the server llamachat started for it (or None), and any error text."""
    from . import server

    try:
        url, started = server.ensure_router(cfg)
    except server.ServerError as exc:
        return "", None, exc.message
    return url, started, ""


if __name__ == "__main__":
    sys.exit(main())
