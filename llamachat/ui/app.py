"""The one owner of llamachat's state while it runs: the configuration and the router.

`App(cfg, history)` holds the configuration in effect (`config`), what config.toml
says (`file_config`), the History, the `providers.Registry` every window talks
through, and how the router stands (`router`, a `RouterState`: being looked for or
started, in use, or failed with why; and the llama-server llamachat started, if any).
Windows never keep a copy: they read `app.config` / `app.router` / `app.registry`
when they need them, and follow `config_changed`, `router_changed` and
`server_event`, so a window opened later starts from the same state as the others.

Settings are written through the App (`save_settings`, `config.update_file`), which
applies the theme and tells every window. The history and prompts folders stay
where they were opened until a restart. The router's URL in `config` is the one in
use (a managed server's), which Settings neither shows nor saves: `file_config`
has the file's.

`install_excepthook()` makes a bug (an exception nothing caught) a logged traceback
and a dialog shown once per bug; an environment fault (`ENVIRONMENT_FAULTS`: the
history, the config file, a server, the disk) is a message to the user instead.

Errors: `config.ConfigError` from `save_settings`, for a value the file cannot hold
(nothing is written then).
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import sys
import threading
import traceback
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QApplication, QMessageBox

from llamachat import config
from llamachat.config import Config, ConfigError
from llamachat.history.store import History, HistoryError
from llamachat.library.index import default_path as library_path
from llamachat.library.vectors import Embedder
from llamachat.router import client, providers
from llamachat.router.server import ManagedServerError
from llamachat.ui import plain, tasks
from llamachat.ui.desktop import entry
from llamachat.ui.first_run import event_text
from llamachat.ui.library.host import LibraryHost
from llamachat.ui.mcp.mcp_host import McpHost
from llamachat.ui.models.in_use import ModelsInUse
from llamachat.ui.theme import apply_theme
from llamachat.ui.voice.read_aloud import ReadAloud

if TYPE_CHECKING:
    from llamachat.router.server import ManagedServer

log = logging.getLogger(__name__)

# The states of `RouterState.status`.
CONFIGURED = "configured"  # as the settings say, not yet known to answer
PENDING = "pending"  # being looked for or started
READY = "ready"  # found or started: in use
FAILED = "failed"  # none could be had; `text` says why

# Exceptions that are the environment's fault, not a bug: shown as a message, no traceback.
ENVIRONMENT_FAULTS: tuple[type[BaseException], ...] = (
    HistoryError,
    ConfigError,
    client.BackendError,
    ManagedServerError,
    OSError,
)


@dataclasses.dataclass(frozen=True)
class RouterState:
    """How the router stands: its URL, status, what to say about it, and llamachat's server."""

    url: str
    status: str = CONFIGURED
    text: str = ""
    server: ManagedServer | None = None


def _registry_changed(old: Config, new: Config) -> bool:
    """Whether the servers (router URL, its key, the providers) differ between two configs."""
    return (old.router_url, old.router_api_key_env, old.providers) != (
        new.router_url,
        new.router_api_key_env,
        new.providers,
    )


FORGET_GONE_CHATS_MS = 3000
"""How long after start the libraries of chats gone from the history are forgotten."""


class App(QObject):
    """The configuration, the router's state and the registry, shared by every window."""

    config_changed = Signal(object)  # the Config now in effect
    router_changed = Signal(object)  # the RouterState now
    server_event = Signal(str, str)  # a managed server's event (kind, message), on this thread
    _server_event_posted = Signal(str, str)

    def __init__(self, cfg: Config, history: History, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self._started = cfg
        self._file_config = cfg
        self._router = RouterState(cfg.router_url)
        self._registry = providers.Registry(cfg)
        # Replaced registries may still serve a reply being stopped: closed at close().
        self._old_registries: list[providers.Registry] = []
        self._config = cfg
        self._hook: ExceptionHook | None = None
        self.shortcut_note = ""
        # Built here, on the GUI thread, before any task may be started from elsewhere.
        tasks.manager()
        self._server_event_posted.connect(
            self._on_server_event_posted, Qt.ConnectionType.QueuedConnection
        )
        self._apply_theme()
        # The model each window's conversation uses: a load must not unload one unsaid.
        self.models_in_use = ModelsInUse()
        # MCP servers' tools and the consent asked for them (started lazily, see McpHost).
        self.mcp = McpHost(self, parent=self)
        # Replies read aloud, one at a time for every window (one voice, one speaker).
        self.read_aloud = ReadAloud(self, parent=self)
        # Folders attached to chats as libraries, indexed in the background.
        self.libraries = LibraryHost(
            library_path(cfg.history_path), parent=self, embedder=self.embedder
        )
        # Chats purged at start (deleted long ago) or by another copy of llamachat leave
        # their libraries' index behind: forgotten once the window is up, off start-up.
        QTimer.singleShot(FORGET_GONE_CHATS_MS, self, self._forget_gone_chats)

    @Slot()
    def _forget_gone_chats(self) -> None:
        try:
            self.libraries.forget_gone_chats(lambda sid: self.history.get_session(sid) is not None)
        except (HistoryError, sqlite3.Error) as exc:
            # A history closed already (quitting): the next start forgets them.
            log.info("the libraries of deleted chats are kept for now: %s", exc)

    # ------------------------------------------------------------------ state

    @property
    def config(self) -> Config:
        """The configuration in effect (router_url: the router in use)."""
        return self._config

    @property
    def file_config(self) -> Config:
        """What config.toml says, as last read or saved (for Settings)."""
        return self._file_config

    @property
    def router(self) -> RouterState:
        """How the router stands now."""
        return self._router

    @property
    def registry(self) -> providers.Registry:
        """The router and providers every window talks to now."""
        return self._registry

    def embedder(self) -> Embedder | None:
        """The libraries' embedding model on the router (None: they search full text only)."""
        model = self._config.embedding_model
        if not model:
            return None
        router = self._registry.router()
        return Embedder(
            model, lambda texts, timeout: client.embeddings(router, model, texts, timeout)
        )

    def set_shortcut_note(self, text: str) -> None:
        """Keep how the quick ask shortcut stands (`shortcut_note`), for Settings to show."""
        self.shortcut_note = text

    def find_router(self, *, beside: bool = False) -> Future:
        """Find the router, or start llamachat's own, in the background; windows are told how.

        They hear a managed server's events as they happen, then `use_router` (with the
        server llamachat started) or `router_failed`. With `beside`, llamachat's own starts
        on a free port even though a router answers at router_url (the user asked for it).
        """
        from llamachat.router import server

        cfg = self.config

        def find() -> tuple[str, ManagedServer | None, str]:
            try:
                url, started = server.ensure_router(
                    cfg, on_event=self.post_server_event, beside=beside
                )
            except server.ManagedServerError as exc:
                return "", None, exc.message
            return url, started, ""

        def on_router(future: Future) -> None:
            try:
                url, started, error = future.result()
            except Exception as exc:
                # A bug: the windows say the router is not coming, the excepthook shows why.
                self.router_failed(f"Finding the router failed: {type(exc).__name__}: {exc}")
                raise
            if error:
                self.router_failed(error)
            else:
                self.use_router(url, server=started)

        # Finding or starting the router can take a minute (a first start loads the
        # binary); the windows are usable meanwhile. A daemon thread, because a start
        # still under way when the user quits must not hold the process open.
        return tasks.run_in_background(find, on_router, daemon=True)

    def managed_server(self) -> ManagedServer | None:
        """The llama-server llamachat started (None when it uses a router already running)."""
        return self._router.server

    # ------------------------------------------------------------------ settings

    def save_settings(self, values: dict[str, object]) -> Config:
        """Write `values` into config.toml (comments kept), apply the result everywhere, return it.

        Raises ConfigError, writing nothing, when the file would not load afterwards.
        """
        path = self._file_config.path or config.default_path()
        if values or not path.exists():
            config.update_file(path, values)
        new = config.load(path)
        self._apply_file(new)
        return new

    def _apply_file(self, new: Config) -> None:
        old, self._file_config = self._file_config, new
        replace_registry = _registry_changed(old, new)
        if replace_registry:
            # Another router in the file is used from now on, as configured; with the same
            # one, the router in use (maybe a managed server) stays, with the new key or
            # providers. Either way, whether it answers is news again.
            url = new.router_url if new.router_url != old.router_url else self._router.url
            self._router = dataclasses.replace(self._router, url=url, status=CONFIGURED, text="")
            self._replace_registry()
        self._config = self._effective()
        if new.theme != old.theme:
            self._apply_theme()
        if new.embedding_model != old.embedding_model:
            self.libraries.reindex_all()  # the vectors of the new model (or none)
        self.config_changed.emit(self._config)
        if replace_registry:
            self.router_changed.emit(self._router)
        if new.autostart != old.autostart:
            entry.set_autostart(entry.launcher(new.path), new.autostart)

    def _effective(self) -> Config:
        return dataclasses.replace(
            self._file_config,
            history_path=self._started.history_path,
            prompts_dir=self._started.prompts_dir,
            router_url=self._router.url,
        )

    def _apply_theme(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, self._config.theme)

    def _replace_registry(self) -> None:
        self._old_registries.append(self._registry)
        self._registry = providers.Registry(self._effective())

    # ------------------------------------------------------------------ router

    def router_pending(self, text: str) -> None:
        """Say in every window that the router is being looked for or started (`text`)."""
        self._set_router(dataclasses.replace(self._router, status=PENDING, text=text))

    def use_router(self, url: str, *, server: ManagedServer | None = None) -> None:
        """Talk to the router at `url` from now on, in every window.

        `server` is the llama-server llamachat started for it: its log and models
        folder are offered in every window, later ones too.
        """
        changed = url != self._router.url
        self._router = RouterState(url, READY, "", server or self._router.server)
        if changed:
            self._replace_registry()
            self._config = self._effective()
            self.config_changed.emit(self._config)
        self.router_changed.emit(self._router)

    def router_failed(self, message: str) -> None:
        """Say in every window that no router could be found or started, and why."""
        self._set_router(dataclasses.replace(self._router, status=FAILED, text=message))

    def post_server_event(self, kind: str, message: str) -> None:
        """Relay a managed server's event (`ManagedServer(on_event=...)`); safe from any thread."""
        self._server_event_posted.emit(kind, message)

    def _set_router(self, state: RouterState) -> None:
        self._router = state
        self.router_changed.emit(state)

    @Slot(str, str)
    def _on_server_event_posted(self, kind: str, message: str) -> None:
        if kind == "gave_up":
            # The supervisor stopped restarting it: nothing answers until the user acts.
            self.router_failed(message)
        elif kind == "starting" and self._router.status == PENDING:
            self.router_pending(event_text(kind, message))
        self.server_event.emit(kind, message)

    # ------------------------------------------------------------------ bugs and closing

    def install_excepthook(self) -> ExceptionHook:
        """Route uncaught exceptions (any thread) to a log entry and a dialog; see ExceptionHook."""
        if self._hook is None:
            self._hook = ExceptionHook(self)
            self._hook.install()
        return self._hook

    def close(self) -> None:
        """Let background calls end, close the registries, and put back the excepthook."""
        self.libraries.close()
        self.read_aloud.close()
        if not tasks.manager().wait(10.0):
            log.warning("a background call did not end within 10 s of closing")
        for registry in (*self._old_registries, self._registry):
            registry.close()
        self.mcp.close()
        self._old_registries = []
        if self._hook is not None:
            self._hook.uninstall()
            self._hook = None


class ExceptionHook(QObject):
    """sys.excepthook and threading.excepthook: bugs logged and shown once, faults as messages.

    A bug is known by its type and where it was raised: the same bug again is logged
    but not shown again. Text in the dialogs is plain (an exception's message is text
    from outside), the traceback in the details.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._shown: set[tuple[str, str, int]] = set()
        self._previous = (sys.excepthook, threading.excepthook)
        self.dialogs: list[QMessageBox] = []

    def install(self) -> None:
        """Become sys.excepthook and threading.excepthook."""
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self.handle
        threading.excepthook = self._handle_thread

    def uninstall(self) -> None:
        """Put back the hooks there were before install()."""
        if sys.excepthook == self.handle:
            sys.excepthook = self._previous[0]
        if threading.excepthook == self._handle_thread:
            threading.excepthook = self._previous[1]

    def handle(
        self,
        exc_type: type[BaseException],
        exc: BaseException,
        tb: TracebackType | None,
    ) -> None:
        """Log `exc`; show it (a bug once, with its traceback; a fault as its message)."""
        if issubclass(exc_type, KeyboardInterrupt):
            self._previous[0](exc_type, exc, tb)
            return
        if isinstance(exc, ENVIRONMENT_FAULTS):
            text = getattr(exc, "message", "") or str(exc) or exc_type.__name__
            log.warning("%s: %s", exc_type.__name__, text)
            self._show(QMessageBox.Icon.Warning, "llamachat", text, "")
            return
        log.error("a bug in llamachat", exc_info=(exc_type, exc, tb))
        key = _where(exc_type, tb)
        if key in self._shown:
            return
        self._shown.add(key)
        details = "".join(traceback.format_exception(exc_type, exc, tb))
        self._show(
            QMessageBox.Icon.Critical,
            "llamachat: a bug",
            f"Something went wrong inside llamachat (a bug):\n{exc_type.__name__}: {exc}\n\n"
            "It was logged; the details below help fixing it.",
            details,
        )

    def _handle_thread(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None:
            return
        exc_type, exc, tb = args.exc_type, args.exc_value, args.exc_traceback
        # Dialogs belong to the GUI thread.
        tasks.run_on_main(lambda: self.handle(exc_type, exc, tb))

    def _show(self, icon: QMessageBox.Icon, title: str, text: str, details: str) -> None:
        if QApplication.instance() is None:
            return
        box = plain.message_box(None, icon, title, text)
        if details:
            box.setDetailedText(details)
        self.dialogs.append(box)
        # Not exec(): a bug in a slot must not start a nested event loop inside it.
        box.show()


def _where(exc_type: type[BaseException], tb: TracebackType | None) -> tuple[str, str, int]:
    """A bug's identity: its type and the innermost place it was raised."""
    frames = traceback.extract_tb(tb) if tb is not None else []
    last = frames[-1] if frames else None
    return (
        exc_type.__qualname__,
        last.filename if last else "",
        last.lineno or 0 if last else 0,
    )
