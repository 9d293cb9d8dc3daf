"""One streaming reply: its worker, its view and its History row, saved as it streams.

`ReplyStream` adds the assistant row (status "streaming") and its `MessageView`, and
`start` runs a `StreamWorker` into both. While text arrives the row is rewritten at
most once a second, so a crash loses at most a second of it; the final save marks it
"complete", "stopped" or "error", and `ended` tells the window. The chat window and
the quick window stream replies alike and differ only in what they do with its
events (skills the model loads, search notices, stats, the end).

Errors: the constructor raises `db.HistoryError` when the reply's row cannot be
added; a later save that fails is reported through `save_failed` and the stream
goes on.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from .. import backend, providers
from ..db import History, HistoryError
from .conversation import ConversationView, MessageView
from .worker import StreamWorker, WorkerThreads

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000


class ReplyStream(QObject):
    """An assistant reply streaming into its MessageView and History row, saved as it comes."""

    search_started = Signal(str)
    skill_loaded = Signal(str)
    # object, not dict: PySide converts a dict signal through QVariantMap, which may drop it.
    stats = Signal(object)
    save_failed = Signal(str)
    ended = Signal(str, str)

    def __init__(
        self,
        history: History,
        conversation: ConversationView,
        registry: providers.Registry,
        *,
        session_id: int,
        model: str,
        messages: list[dict],
        search_cfg: backend.SearchConfig | None = None,
        skills_cfg: backend.SkillsConfig | None = None,
        parent: QObject | None = None,
    ) -> None:
        # The row first: a reply that cannot be saved leaves no object behind in `parent`.
        message_id = history.add_message(
            session_id, "assistant", "", model=model, status="streaming"
        )
        super().__init__(parent)
        self.history = history
        self.message_id = message_id
        self.view: MessageView = conversation.append_message(
            {
                "id": self.message_id,
                "session_id": session_id,
                "role": "assistant",
                "content": "",
                "reasoning": "",
                "model": model,
                "status": "streaming",
                "error": "",
            }
        )
        client, wire_model = registry.client_for(model)
        self._worker = StreamWorker(
            client,
            wire_model,
            messages,
            search_cfg=search_cfg,
            skills_cfg=skills_cfg,
        )
        self._worker.content.connect(self._on_content)
        self._worker.reasoning.connect(self._on_reasoning)
        self._worker.search_started.connect(self._on_search_started)
        self._worker.search_finished.connect(self._on_search_finished)
        self._worker.skill_loaded.connect(self._on_skill_loaded)
        self._worker.stats.connect(self._on_stats)
        self._worker.failed.connect(self._on_failed)
        self._worker.finished.connect(self._on_finished)
        self._usage: dict = {}
        self._timings: dict = {}
        self._error = ""
        self._dirty = False
        # Set when the reply ends: a stopped worker may still deliver events, which are dropped.
        self._ended = False
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self._save_partial)

    def start(self, threads: WorkerThreads) -> None:
        """Run the worker on a thread of `threads` and start the once-a-second save."""
        threads.start(self._worker)
        self._save_timer.start()

    def stop(self) -> None:
        """Stop the reply now, keeping what arrived (saved as "stopped")."""
        if self._ended:
            return
        # The worker may be blocked in a socket read; it is cancelled and left to unwind on
        # its own thread while the window moves on, so Stop never waits on the network.
        self._worker.cancel()
        self._end("stopped")

    @Slot(str)
    def _on_content(self, text: str) -> None:
        if not self._ended:
            self._dirty = True
            self.view.append_content(text)

    @Slot(str)
    def _on_reasoning(self, text: str) -> None:
        if not self._ended:
            self._dirty = True
            self.view.append_reasoning(text)

    @Slot(str)
    def _on_search_started(self, query: str) -> None:
        if not self._ended:
            self.search_started.emit(query)

    @Slot(object)
    def _on_search_finished(self, result: object) -> None:
        if not self._ended and isinstance(result, dict):
            self.view.add_search(
                str(result.get("query", "")),
                list(result.get("results") or []),
                str(result.get("error") or ""),
            )

    @Slot(str)
    def _on_skill_loaded(self, name: str) -> None:
        if not self._ended:
            self.skill_loaded.emit(name)

    @Slot(object)
    def _on_stats(self, stats: object) -> None:
        if not self._ended and isinstance(stats, dict):
            self._usage = dict(stats.get("usage") or {})
            self._timings = dict(stats.get("timings") or {})
            self.view.set_stats(self._usage, self._timings)
            self.stats.emit(stats)

    @Slot(str, object)
    def _on_failed(self, message: str, error: object) -> None:
        if not self._ended:
            self._error = message or "The reply failed."

    @Slot()
    def _on_finished(self) -> None:
        if not self._ended:
            self._end("error" if self._error else "complete")

    @Slot()
    def _save_partial(self) -> None:
        if self._ended or not self._dirty:
            return
        self._dirty = False
        try:
            self.history.update_message(
                self.message_id,
                content=self.view.content(),
                reasoning=self.view.reasoning(),
            )
        except HistoryError as exc:
            self.save_failed.emit(str(exc))

    def _end(self, status: str) -> None:
        self._ended = True
        self._save_timer.stop()
        try:
            self.history.update_message(
                self.message_id,
                content=self.view.content(),
                reasoning=self.view.reasoning(),
                status=status,
                error=self._error,
                usage=self._usage,
                timings=self._timings,
            )
        except HistoryError as exc:
            self.save_failed.emit(str(exc))
        self.view.finish()
        self.view.set_status(status, self._error)
        self.ended.emit(status, self._error)
        # The window lets go of a reply once it ended; the worker may outlive it.
        self.deleteLater()
