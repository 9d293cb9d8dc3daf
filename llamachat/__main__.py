"""The `llamachat` command: parse the arguments, load the configuration, hand over.

    llamachat [--config PATH] [--version]      open the chat window
    llamachat ask ["question"]                 the quick window (asking at once when given)
    llamachat ask --voice                      the quick window in voice mode (ui.voice.voice_mode)
    llamachat ask --print "question"           the answer on stdout, no window (llamachat.cli)
    llamachat worker [--host H] [--port P]     lend this machine to llama.cpp elsewhere (worker_command)
    llamachat --install-desktop                the menu entry and icon (ui.desktop.entry);
    llamachat --uninstall-desktop              and their removal

One llamachat runs per user and configuration (`ui.instance`): a later `llamachat`
or `llamachat ask` hands its arguments, working folder and piped stdin to the running
one and exits at once with 0; the running one raises its chat window or its quick
window. The first one finds the router at `router_url` meanwhile and, when it does not
answer, starts a managed llama-server (`server.ensure_router`), stopped again on exit;
its windows say so while it happens, and why when no router could be had.

Exit codes: 0 fine, 1 the history file cannot be opened or the running instance does
not answer (and for `ask --print`, see `cli.run`), 2 a bad command line or
configuration (ConfigError, printed to stderr, and shown in a dialog when the
window was going to open), or system libraries Qt's X11 plugin needs are missing (which
packages to install is printed; `qt_platform`). Qt is imported only on the GUI path, so `--help`,
`--version` and `ask --print` work without a display.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from llamachat import __version__, cli, config, outside, qt_platform, worker_command

if TYPE_CHECKING:
    from concurrent.futures import Future

    from llamachat.ui.app import App
    from llamachat.ui.instance import RunningInstance

log = logging.getLogger(__name__)

SIGNAL_POLL_MS = 300

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
    parser.add_argument(
        "--new-chat", action="store_true", help="open the chat window on a new chat"
    )
    parser.add_argument(
        "--background",
        action="store_true",
        help="start with no window: the tray icon and the quick ask shortcut (used at login)",
    )
    parser.add_argument(
        "--install-desktop",
        dest="run",
        action="store_const",
        const=_install_desktop,
        default=argparse.SUPPRESS,
        help="add llamachat to the applications menu (and to login, with autostart = true)",
    )
    parser.add_argument(
        "--uninstall-desktop",
        dest="run",
        action="store_const",
        const=_uninstall_desktop,
        default=argparse.SUPPRESS,
        help="remove what --install-desktop added",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    ask = commands.add_parser(
        "ask",
        help="ask one quick question (the quick window, or --print for the terminal)",
        description="Ask a quick question: in the quick window of the running llamachat, "
        "or with --print on stdout with no window. Piped stdin is appended in a fenced block.",
    )
    cli.add_arguments(ask)
    ask.set_defaults(run=_run_ask)
    lend = commands.add_parser(
        "worker",
        help="lend this machine's memory and compute to llama.cpp on another machine",
        description="Run llama.cpp's ggml-rpc-server: another machine's llamachat lists this "
        "one in rpc_workers and spreads models over it. The RPC protocol has no "
        "authentication: a trusted network only, or an SSH tunnel.",
    )
    worker_command.add_arguments(lend)
    lend.set_defaults(run=worker_command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `llamachat` command; returns the process exit code."""
    # A frozen build's child process (library.child) starts as this program again: this
    # runs the child instead, before the command line is read.
    multiprocessing.freeze_support()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    args.argv = argv
    outside.configure_logging(logging.DEBUG if args.debug else logging.WARNING, log_path=log_path())
    command: Command = getattr(args, "run", _run_gui)
    gui = command is _run_gui
    if gui or (command is _run_ask and not args.print_answer):
        # Before Qt starts: on a bare Linux its xcb plugin aborts the process instead.
        problem = qt_platform.problem()
        if problem:
            print(outside.terminal_safe(problem), file=sys.stderr)
            return 2
    try:
        cfg = load_or_create_config(args.config)
    except config.ConfigError as exc:
        return _config_failed(exc, gui=gui)
    return command(args, cfg)


def log_path() -> Path:
    """llamachat's own log file (an error page's body and every warning go there)."""
    return Path(platformdirs.user_log_dir("llamachat")) / "llamachat.log"


def load_or_create_config(path: Path | None = None) -> config.Config:
    """Load the configuration, first writing the commented defaults when the file is missing."""
    path = path if path is not None else config.default_path()
    try:
        # exists() raises, rather than says False, for a folder the user may not enter.
        missing = not path.exists() and not path.is_symlink()
    except OSError as exc:
        raise config.ConfigError(
            f"cannot read the configuration: {exc.strerror or exc}", path=path
        ) from None
    if missing:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise config.ConfigError(
                f"cannot create the configuration: {blocker} is a file, not a folder", path=path
            )
        config.write_default(path)
    return config.load(path)


def _config_failed(exc: config.ConfigError, *, gui: bool) -> int:
    outside.say(exc)
    if gui and _has_display():
        from PySide6.QtWidgets import QApplication, QMessageBox

        from llamachat.ui import plain

        app = QApplication.instance() or QApplication(sys.argv[:1])
        app.setApplicationName("llamachat")
        plain.message_box(
            None, QMessageBox.Icon.Critical, "llamachat: configuration error", str(exc)
        ).exec()
    return 2


def _has_display() -> bool:
    """Whether a dialog can be seen: a desktop session, and not a headless Qt platform."""
    if os.environ.get("QT_QPA_PLATFORM", "").split(":")[0] in ("offscreen", "minimal", "vnc"):
        return False
    if sys.platform.startswith(("linux", "freebsd", "openbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _run_ask(args: argparse.Namespace, cfg: config.Config) -> int:
    """`llamachat ask`: the answer on stdout with --print, else the quick window."""
    if args.print_answer:
        return cli.run(args, cfg)
    return _run_gui(args, cfg)


def _install_desktop(args: argparse.Namespace, cfg: config.Config) -> int:
    """`llamachat --install-desktop`: write the menu entry, the icon and maybe autostart."""
    from llamachat.ui.desktop import entry

    try:
        written = entry.install(entry.launcher(cfg.path), autostart=cfg.autostart)
    except OSError as exc:
        outside.say(f"cannot install the desktop entry: {exc}")
        return 1
    print(outside.terminal_safe("\n".join(str(path) for path in written)))
    return 0


def _uninstall_desktop(args: argparse.Namespace, cfg: config.Config) -> int:
    """`llamachat --uninstall-desktop`: remove what --install-desktop wrote."""
    from llamachat.ui.desktop import entry

    try:
        removed = entry.uninstall()
    except OSError as exc:
        outside.say(f"cannot remove the desktop entry: {exc}")
        return 1
    print(outside.terminal_safe("\n".join(str(path) for path in removed)) or "nothing to remove")
    if cfg.autostart and cfg.path is not None:
        # The login entry is gone: the setting says so too, or Settings would still tick
        # "Start at login" and --install-desktop would bring the entry back.
        try:
            config.update_file(cfg.path, {"autostart": False})
        except (OSError, config.ConfigError) as exc:
            outside.say(f"cannot set autostart = false in {cfg.path}: {exc}")
            return 1
        print(outside.terminal_safe(f"autostart = false in {cfg.path}"))
    return 0


def _run_gui(args: argparse.Namespace, cfg: config.Config) -> int:
    """Hand the arguments to the running llamachat, or become it and run Qt's event loop."""
    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from llamachat.history.store import History, HistoryError
    from llamachat.ui import instance, plain
    from llamachat.ui.app import App
    from llamachat.ui.desktop.icon import app_icon

    try:
        piped = cli.read_piped() if getattr(args, "run", None) is _run_ask else ""
    except cli.AskError as exc:
        outside.say(exc)
        return 2
    message = instance.payload(getattr(args, "argv", []), os.getcwd(), piped)
    name = instance.socket_name(cfg.path)
    try:
        if instance.hand_over(name, message):
            return 0
    except instance.InstanceError as exc:
        outside.say(exc)
        return 1

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("llamachat")
    app.setApplicationVersion(__version__)
    QApplication.setDesktopFileName("llamachat")
    QApplication.setWindowIcon(app_icon())
    # The running instance decides when to end: with a tray it outlives its windows.
    QApplication.setQuitOnLastWindowClosed(False)
    # A desktop logout sends SIGTERM: end like Quit does, so replies are saved, a
    # managed server stops and the socket goes. Caught from before this process takes
    # the socket, since a SIGTERM may come as soon as it answers there; acted on by the
    # wake-up timer below, once the instance and its event loop run.
    terminated = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: terminated.set())
    listener = instance.InstanceServer(name)
    try:
        if not listener.listen():
            # Another llamachat became the running one since the first attempt.
            return 0 if instance.hand_over(name, message) else 1
    except instance.InstanceError as exc:
        # Still useful without the hand-over: this process just runs on its own.
        log.warning("running without single-instance hand-over: %s", exc)
    try:
        history = History(cfg.history_path)
    except HistoryError as exc:
        outside.say(f"cannot open the history {cfg.history_path}: {exc}")
        if _has_display():
            plain.message_box(
                None, QMessageBox.Icon.Critical, "llamachat", f"Cannot open the history:\n{exc}"
            ).exec()
        listener.close()
        return 1
    # The theme is applied here, before any window: a cold `llamachat ask` has it too.
    state = App(cfg, history)
    state.install_excepthook()
    running = instance.RunningInstance(state)
    try:
        # Queued: a quit asked for before the event loop runs (an early SIGTERM) must
        # still end it once it starts.
        running.finished.connect(app.quit, Qt.ConnectionType.QueuedConnection)
        # Python only runs signal handlers between bytecodes, so a timer wakes it from
        # Qt's loop now and then, and ends the instance once a SIGTERM came.
        wake = QTimer()
        wake.timeout.connect(lambda: running.quit() if terminated.is_set() else None)
        wake.start(SIGNAL_POLL_MS)
        listener.received.connect(lambda handed: _act(running, handed))
        # Said before the first window is built, so it opens saying it.
        state.router_pending(f"Looking for the llama.cpp router at {cfg.router_url}…")
        _act(running, message)
        find_router(state)
        return app.exec()
    finally:
        running.shutdown()
        listener.close()
        managed = state.managed_server()
        state.close()
        if managed is not None:
            managed.stop()
        history.close()


def _act(running: RunningInstance, message: dict) -> None:
    """Do what a `llamachat` command line asks of the running instance."""
    try:
        args = build_parser().parse_args([str(item) for item in message.get("argv") or []])
    except SystemExit:
        log.warning("ignored a hand-over with a bad command line: %r", message.get("argv"))
        return
    if getattr(args, "run", None) is not _run_ask:
        if args.new_chat:
            running.show_chat().new_session()
        elif not args.background:
            running.show_chat()
        return
    typed = " ".join(args.question)
    text = cli.with_input(typed, str(message.get("stdin") or ""))
    running.ask(text, send=bool(typed.strip()), model=args.model, voice=args.voice)


def find_router(state: App) -> Future:
    """Find the router, or start llamachat's own, in the background (`App.find_router`)."""
    return state.find_router()


if __name__ == "__main__":
    sys.exit(main())
