"""The prompt cache kept warm: the server reads a chat ahead of the next message.

On local hardware the wait before a reply's first token is mostly the model reading the
chat (prompt processing). llama.cpp keeps a chat's prefix cached while its model stays
loaded, but the cache goes cold when llamachat restarts, a model (re)loads, a skill is
loaded (the system message changes), a message is edited or a version switched.
`Warmer(builder, ...)` sends, while a chat is open and its model loaded, the request the
next message would make up to where that message starts (`TurnBuilder.warm_turn`: an
empty question, `max_tokens` 0, so the server reads the prompt and generates one token).
By the time the person presses Enter only the new message is left to read.

Triggers, each debounced into one warm-up: `trigger` (its conversation: another chat
shown, its messages reset by an edit or a version switch, its skills or tools changed,
another model chosen, a reply finished), `draft_changed` (the window's composer: the
first keystroke at once, then each pause in typing) and `statuses_changed` (the window's
model list: a model finished loading). A warm-up whose body equals the last one warmed
is not sent, so fast typing makes no request at all after the first.

While the Compare chooser has models picked (`also`), each of them the router has
loaded is warmed too, after the chat's model and one at a time: each model reads the
chat into its own cache, so every column of the comparison starts with only the
question to read.

Rules: a warm-up never loads a model (`?autoload=false` on each, and a model whose
status is known must show "loaded"); never a provider's model unless
`warm_cache_providers`; one at a time and none while a reply streams; `cancel` (Stop)
and `close` (quit) close its connection.

Send (`send_after`): llama.cpp goes on reading a prompt whose client left, and a request
sent meanwhile goes to another slot and reads everything again, competing for the CPU.
So a request that shares the in-flight warm-up's prefix waits for it to end, the
earliest the server could answer anyway, and then reads only the new message. This is
done on the client rather than by pinning `id_slot`: it works with any server and needs
no slot bookkeeping. A request that shares no prefix (another model, an edited history)
cancels the warm-up and goes at once.

On llamachat's own server (`slot_files`: `slot_cache_mb` > 0) what a warm-up of the
chat's own model read is also kept on disk (`router.slot_cache`; one file per chat, so
not the chooser's picks), named for the chat and a digest of the warm-up's body; a
warm-up whose chat and body have a file restores it into a free slot first, so after a
restart the server reads only what changed instead of the whole chat. A chat that changed
since has no file of its digest and is read as before. The file only matters after a
restart (the running server keeps recent chats in its RAM cache) and is large (128 MiB per
1,000 tokens for an 8B model), so it is not written after each reply: the last warm-up of
a chat of some length is remembered, and its slot saved when the chat is left (`leave`:
another chat shown, the window closed, which quitting waits for) unless that file exists.
The save goes before the next warm-up, which waits for it: the next chat's warm-up would
otherwise take the slot over (the server picks the slot sharing the longest prefix, and
chats share their system prompt).

Figures: `in_cache()`, the tokens of the request the server holds, from the last
warm-up's own timings (cache_n + prompt_n), for the meter; `warmups`, how many were sent.

Threads: a warm-up streams on a daemon task of `tasks`; its end comes back on the GUI
thread, where everything else runs. Errors: none raised; a warm-up that fails (the
model unloaded meanwhile) is logged and forgotten.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance, Slot

from llamachat import turn
from llamachat.router import client as backend
from llamachat.router.slot_cache import MIN_TOKENS, SlotCache, SlotFiles, digest
from llamachat.ui import tasks
from llamachat.ui.chat.builder import TurnBuilder

log = logging.getLogger(__name__)

# A burst of changes (a chat opening: its session, messages and skills) makes one warm-up.
SOON_MS = 50
# A pause in typing this long warms what changed meanwhile.
PAUSE_MS = 1000
# The longest a warm-up waits for the save of the chat left (a large model's long chat).
SAVE_WAIT_S = 30.0


def prefix(request: turn.Turn) -> tuple:
    """What a request shares with the warm-up before it: all but its question."""
    return (request.model, request.system_message(), request.history, request.offer)


class Warmer(QObject):
    """Keeps the server's prompt cache holding a conversation's next request."""

    changed = Signal()  # in_cache() changed

    def __init__(
        self,
        builder: TurnBuilder,
        is_streaming: Callable[[], bool],
        context_size: Callable[[], int | None],
        model_status: Callable[[str], str] | None = None,
        parent: QObject | None = None,
        *,
        slot_files: Callable[[], SlotFiles | None] = lambda: None,
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._state = builder.state
        self._is_streaming = is_streaming
        self._context_size = context_size
        # None: no status known (a window without a model list); autoload=false guards.
        self._model_status = model_status
        self._seen = ("", "")  # the model and the status last seen
        # The slot files folder of llamachat's own server (None: none, or turned off).
        self._slot_files = slot_files
        # The chat's last warm-up, saved when the chat is left; the save under way.
        self._unsaved: _Read | None = None
        self._saving: Future | None = None
        self._typing = False
        self._closed = False
        # The warm-up in flight: its cancel event and prefix; sends waiting for it to end.
        self._cancel: threading.Event | None = None
        self._flight: tuple | None = None
        self._waiting: list[Callable[[], None]] = []
        self._again = False  # something changed while one was in flight
        # The body each model was warmed with last (not sent again while it holds).
        self._last_body: dict[str, dict] = {}
        self._held: int | None = None
        # The Compare chooser's models, warmed after the chat's (`also`).
        self._also: tuple[str, ...] = ()
        self.warmups = 0
        """How many warm-ups were sent."""
        self._due = QTimer(self)
        self._due.setSingleShot(True)
        self._due.timeout.connect(self._warm)
        self._pause = QTimer(self)
        self._pause.setSingleShot(True)
        self._pause.setInterval(PAUSE_MS)
        self._pause.timeout.connect(self.trigger)

    # ------------------------------------------------------------------ triggers

    @Slot()
    def trigger(self, delay_ms: int = SOON_MS) -> None:
        """What the next request starts with may have changed: warm it soon."""
        if self._closed or not self._builder.config().warm_cache:
            return
        if not self._due.isActive() or delay_ms < self._due.remainingTime():
            self._due.start(delay_ms)

    def follow(self, *signals: SignalInstance) -> None:
        """Warm again after each of these signals (a reply's end: unless it was stopped)."""
        for signal in signals:
            signal.connect(self._on_signal)

    def _on_signal(self, *args: object) -> None:
        if args[:1] != ("stopped",):
            self.trigger()

    def draft_changed(self, text: str) -> None:
        """The composer's text: the first keystroke warms at once, then each pause."""
        typing = bool(text)
        first, self._typing = typing and not self._typing, typing
        if first:
            self.trigger()
        elif typing:
            self._pause.start()

    @Slot(object)
    def statuses_changed(self, _what: object = None) -> None:
        """The models' statuses may have changed: a model that finished loading is warmed."""
        model = self._state.model
        status = self._status(model)
        if status == "loaded" and self._seen != (model, "loaded"):
            self.trigger()
        self._seen = (model, status)
        if self._also:
            self.trigger()  # a picked model may have loaded: one already warm sends nothing

    def also(self, models: tuple[str, ...] | list[str]) -> None:
        """Warm these models too, after the chat's (the Compare chooser's picks; () when
        it closes)."""
        self._also = tuple(m for m in dict.fromkeys(models) if m != self._state.model)
        if self._also:
            self.trigger()

    # ------------------------------------------------------------------ sending

    def send_after(self, request: turn.Turn, go: Callable[[], None]) -> None:
        """Call `go()` to send `request`: once the warm-up in flight ended when it shares
        that warm-up's prefix (what it read is kept), else now (the warm-up is cancelled)."""
        # The request takes the warmed slot over: what was warmed before is not held any more.
        self._held = None
        self._last_body.pop(request.model, None)
        self.changed.emit()
        if self._cancel is not None and prefix(request) == self._flight:
            self._due.stop()
            self._pause.stop()
            self._waiting.append(go)
            return
        self.cancel()
        go()

    def cancel(self) -> None:
        """Stop: close the warm-up's connection (the server may finish its read) and wait
        for no trigger due."""
        self._due.stop()
        self._pause.stop()
        self._again = False
        if self._cancel is not None and self._flight is not None:
            self._cancel.set()
            self._last_body.pop(self._flight[0], None)  # its model: not known to be warm
            self._cancel = self._flight = None
        self._release()

    def close(self) -> None:
        """Quit: save the chat left, cancel the warm-up and send none again."""
        self._closed = True
        self.cancel()
        self.leave()

    @Slot(object)
    def chat_shown(self, session_id: int | None) -> None:
        """The conversation shows chat `session_id` now: the one it left is saved."""
        if self._unsaved is not None and self._unsaved.session != session_id:
            self.leave()

    def leave(self) -> None:
        """Save what the server read of the chat last warmed (it is left), unless its file
        exists; the next warm-up waits for the save."""
        unsaved, self._unsaved = self._unsaved, None
        if unsaved is not None:
            # Not a daemon: quitting waits for it (App.close, bounded), and the next start
            # restores it.
            self._saving = tasks.run_in_background(unsaved.save)

    def in_cache(self) -> int | None:
        """The tokens the server holds of the next request, from the last warm-up's figures
        (None: not known, or something changed since)."""
        return self._held

    def busy(self) -> bool:
        """Whether a warm-up is in flight or due."""
        return self._cancel is not None or self._due.isActive() or self._pause.isActive()

    # ------------------------------------------------------------------ internals

    def _status(self, model: str) -> str:
        return self._model_status(model) if self._model_status is not None else "loaded"

    @Slot()
    def _warm(self) -> None:
        cfg = self._builder.config()
        if self._closed or not cfg.warm_cache or self._is_streaming():
            return
        if self._cancel is not None:
            self._again = True  # one at a time: this one follows
            return
        chat_model = self._state.model
        # The chat's model first, then the chooser's picks: the first not warm yet.
        for model in (chat_model, *self._also) if chat_model else self._also:
            if self._warm_one(model, cfg.warm_cache_providers, chat=model == chat_model):
                return

    def _warm_one(self, model: str, providers: bool, *, chat: bool) -> bool:
        """Send `model`'s warm-up; False when it needs none (warm, loading, a provider's)."""
        client, name = self._builder.client_for(model)
        provider = name != model
        if provider and not providers:
            return False
        if not provider and self._status(model) != "loaded":
            return False  # never a load: warmed once it finished loading
        try:
            # As the comparison sizes it (a pick's skills catalog is bounded by its context).
            n_ctx = self._builder.context_sizes((model,), self._context_size())[model]
            request = self._builder.warm_turn(model, n_ctx)
        except Exception:
            log.exception("cannot build the warm-up request")
            return False
        body = request.body(name)
        if body == self._last_body.get(model):
            return False
        self._last_body[model] = body
        if chat and self._held is not None:
            self._held = None
            self.changed.emit()
        cancel = self._cancel = threading.Event()
        self._flight = prefix(request)
        query = None if provider else {"autoload": "false"}
        # The chat's own model only: a chat has one file (the chooser's picks would
        # replace each other's).
        files = self._slot_files() if chat and not provider else None
        session = self._state.session_id
        slots = kept = None
        if files is not None and session is not None:
            slots, kept = SlotCache(client, files), (name, session, digest(body))
        self.warmups += 1
        saving = self._saving
        tasks.run_in_background(
            lambda: _read(client, name, request, cancel, query, slots, kept, saving),
            lambda future: self._on_done(cancel, model, chat, future, slots, kept),
            receiver=self,
            daemon=True,
        )
        return True

    def _on_done(
        self,
        cancel: threading.Event,
        model: str,
        chat: bool,
        future: Future,
        slots: SlotCache | None = None,
        kept: tuple[str, int, str] | None = None,
    ) -> None:
        if cancel.is_set():
            return  # cancelled: `cancel` has let go of it
        self._cancel = self._flight = None
        try:
            timings = future.result().get("timings") or {}
        except Exception as exc:  # noqa: BLE001 - a warm-up is only ever a head start
            log.info("cache warm-up failed: %s", exc)
            timings = {}
        held = sum(
            value for key in ("cache_n", "prompt_n") if isinstance(value := timings.get(key), int)
        )
        if not held:
            self._last_body.pop(model, None)  # not warmed: the next trigger tries again
        elif chat:
            self._held = held
            self.changed.emit()
            if slots is not None and kept is not None and held >= MIN_TOKENS:
                self._unsaved = _Read(slots, *kept, held)
                if kept[1] != self._state.session_id:
                    self.leave()  # left while it was read
        self._release()
        if self._again or (held and self._also):
            # Something changed meanwhile, or the chooser's next model may be cold.
            self._again = False
            self.trigger()

    def _release(self) -> None:
        waiting, self._waiting = self._waiting, []
        for go in waiting:
            go()


@dataclass(frozen=True)
class _Read:
    """What a warm-up had the server read of a stored chat: its slot, to save."""

    slots: SlotCache
    model: str
    session: int
    digest: str
    tokens: int

    def save(self) -> bool:
        """Save the slot holding it (a worker thread); whether a file was written."""
        return self.slots.save(self.model, self.session, self.digest, self.tokens)


def _read(
    client: backend.Client,
    model: str,
    request: turn.Turn,
    cancel: threading.Event,
    query: Mapping[str, str] | None,
    slots: SlotCache | None = None,
    kept: tuple[str, int, str] | None = None,
    saving: Future | None = None,
) -> dict:
    """Send a warm-up and read it to its end (a worker thread), once the save of the chat
    left ended (`saving`) and after restoring what a file of `slots` kept of it; its stats
    ({}: cancelled)."""
    if saving is not None:
        wait_futures([saving], timeout=SAVE_WAIT_S)
    if slots is not None and kept is not None and not cancel.is_set():
        slots.restore(*kept)
    stats: dict = {}
    stream = client.stream_chat(request, model=model, cancel=cancel, query=query)
    try:
        for kind, value in stream:
            if kind == "stats" and isinstance(value, dict):
                stats = value
    finally:
        stream.close()
    return stats
