"""Chats the server has read, kept on disk: a restarted server restores them instead of reading.

After a restart llama-server's prompt cache is empty, and reading a long chat again is the
wait before its first token (~25 s for 3,500 tokens on a 2-core CPU). llama-server saves a
slot's KV cache, with the tokens it holds, to a file (``--slot-save-path DIR``,
``POST /slots/{id}?action=save``) and restores it into a slot in milliseconds
(``action=restore``). In router mode the router passes ``--slot-save-path`` on to each
model's server and forwards ``/slots/...`` to the server of the body's ``"model"``, loading
it if need be (so a restore is only asked for a loaded model). A request then picks the
slot whose tokens share the longest prefix with its prompt and reads only the rest: the
server compares tokens, so a file that no longer matches costs a wasted restore, never a
wrong answer.

`SlotFiles` keeps the folder: one file per chat, named for the chat and a digest of what
was read (``chat-<session>-<digest>.slot``), so a chat that changed since (an edit, another
system prompt) finds no file rather than a stale one; the least recently used files go
first past a size bound. `SlotCache` speaks to the server: `save` the slot holding what a
warm-up read of a chat (the idle slot whose prompt is that warm-up's token count: other
requests may have used other slots since; none holds it, nothing is saved), `restore` a
chat's file into a free slot, unless the running server saved or restored that file already
(`SlotFiles.held`): it still has it, in a slot or its RAM cache (``--cache-ram``), and
reading a large model's file again would cost more than it saves. A save is written under a
``.part`` name and renamed once the server says it wrote it all: a save cut short (llamachat
quitting stops the server) leaves no file a later restore would trust. Only the server
llamachat runs has a folder (`slot_cache_mb` > 0); the warm-up (``ui.chat.warmup``) calls
both, and saves a chat when it is left, not after each reply.

Threads: `SlotCache` blocks on HTTP; call it from a worker thread. Errors: none raised; a
save or restore the server refuses (a server started without the folder, a file for
another context size) is logged and comes back as nothing saved or restored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs

from llamachat.errors import BackendError
from llamachat.router.client import Client
from llamachat.router.lock import config_suffix

log = logging.getLogger(__name__)

SUFFIX = ".slot"
# A save under way (or cut short): renamed to the file's name once written whole.
PART = ".part"
_NAME_RE = re.compile(r"^chat-(?P<session>\d+)-(?P<digest>[0-9a-f]{16})\.slot$")
# A chat this short is read again in about a second: not worth a file.
MIN_TOKENS = 256
# A save or restore of a large model's long chat writes or reads gigabytes.
TIMEOUT = 120.0


def default_slot_dir(config_path: Path | None = None) -> Path:
    """The folder the server llamachat runs for a config saves its slots in."""
    data = Path(platformdirs.user_data_dir("llamachat", appauthor=False))
    return data / f"slots{config_suffix(config_path)}"


def digest(body: Mapping[str, Any]) -> str:
    """What a warm-up request reads, in 16 hex digits: a file is restored only for it."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def file_name(session_id: int, body_digest: str) -> str:
    """The file of chat `session_id` having read the request of `body_digest`."""
    return f"chat-{session_id}-{body_digest}{SUFFIX}"


class SlotFiles:
    """The slot files folder: one file per chat, at most `limit_bytes` in all (LRU)."""

    def __init__(self, folder: Path, limit_bytes: int) -> None:
        self.folder = folder
        self.limit_bytes = limit_bytes
        self.held: set[str] = set()
        """The files the running server saved or restored: it holds them, not restored again."""

    def server_started(self) -> None:
        """A new server process runs: it holds nothing yet, and no save of the last one is
        under way (a part it left is removed)."""
        self.held.clear()
        for path in self.folder.glob(f"chat-*{SUFFIX}{PART}"):
            _remove(path)

    def find(self, session_id: int, body_digest: str) -> str | None:
        """The file name holding what chat `session_id` read for `body_digest`, if kept;
        it counts as used now."""
        name = file_name(session_id, body_digest)
        try:
            os.utime(self.folder / name)
        except OSError:
            return None
        return name

    def saved(self, session_id: int, body_digest: str) -> None:
        """The server wrote chat `session_id`'s file for `body_digest`: the chat's older
        files go, then the least recently used others until the folder fits its bound."""
        keep = file_name(session_id, body_digest)
        files = self._files()
        for path, session, _size, _used in files:
            if session == session_id and path.name != keep:
                _remove(path)
        files = [entry for entry in files if entry[1] != session_id]
        try:
            kept_size = (self.folder / keep).stat().st_size
        except OSError:
            kept_size = 0
        if kept_size > self.limit_bytes:
            _remove(self.folder / keep)  # alone over the bound: it goes, not the others
            kept_size = 0
        total = kept_size + sum(size for _path, _session, size, _used in files)
        files.sort(key=lambda entry: entry[3])  # the least recently used first
        for path, _session, size, _used in files:
            if total <= self.limit_bytes:
                break
            _remove(path)
            total -= size

    def forget(self, session_id: int) -> None:
        """Remove chat `session_id`'s files (the chat is gone)."""
        for path, session, _size, _used in self._files():
            if session == session_id:
                _remove(path)

    def total_bytes(self) -> int:
        """The bytes the folder's slot files take."""
        return sum(size for _path, _session, size, _used in self._files())

    def _files(self) -> list[tuple[Path, int, int, float]]:
        """Each slot file: its path, chat, size and last use."""
        found = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return []
        for entry in entries:
            match = _NAME_RE.match(entry.name)
            if match is None or not entry.is_file(follow_symlinks=False):
                continue
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append((Path(entry.path), int(match["session"]), stat.st_size, stat.st_mtime))
        return found


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove the slot file %s: %s", path, exc)


class SlotCache:
    """Saves and restores chats' slots on the server of `client` (llamachat's own router)."""

    def __init__(self, client: Client, files: SlotFiles) -> None:
        self.client = client
        self.files = files

    def restore(self, model: str, session_id: int, body_digest: str) -> int:
        """Restore chat `session_id`'s file for `body_digest` into a free slot of `model`'s
        server; the tokens restored (0: no file, no free slot, or the server refused)."""
        name = self.files.find(session_id, body_digest)
        if name is None or name in self.files.held:
            return 0
        slot = _slot_to_fill(self._slots(model))
        if slot is None:
            return 0
        answer = self._action(model, slot, "restore", name)
        restored = answer.get("n_restored") if answer else None
        if not isinstance(restored, int):
            return 0
        self.files.held.add(name)
        log.info(
            "restored %d tokens of chat %d into slot %d of %s", restored, session_id, slot, model
        )
        return restored

    def save(self, model: str, session_id: int, body_digest: str, tokens: int) -> bool:
        """Save the slot of `model`'s server holding chat `session_id` as the warm-up of
        `body_digest` left it (`tokens` of it); whether a file was written (not when that
        file exists already: nothing changed since)."""
        if tokens < MIN_TOKENS or self.files.find(session_id, body_digest) is not None:
            return False
        slot = _slot_holding(self._slots(model), tokens)
        if slot is None:
            log.info("chat %d is in no slot of %s any more: not saved", session_id, model)
            return False
        name = file_name(session_id, body_digest)
        part = self.files.folder / (name + PART)
        answer = self._action(model, slot, "save", part.name)
        saved = answer.get("n_saved") if answer else None
        if not isinstance(saved, int) or saved < tokens - 2:
            # Another request took the slot over (or cleared it) before the save, or the
            # server stopped during it.
            _remove(part)
            return False
        try:
            os.replace(part, self.files.folder / name)
        except OSError as exc:
            log.warning("cannot keep the slot file %s: %s", name, exc)
            _remove(part)
            return False
        self.files.saved(session_id, body_digest)
        self.files.held.add(name)
        log.info("saved %d tokens of chat %d from slot %d of %s", saved, session_id, slot, model)
        return True

    def _slots(self, model: str) -> list[dict]:
        try:
            slots = self.client.request_json(
                "GET", "/slots", root=True, params={"model": model, "autoload": "false"}
            )
        except BackendError as exc:
            log.info("cannot list the slots of %s: %s", model, exc)
            return []
        return [slot for slot in slots if isinstance(slot, dict)] if isinstance(slots, list) else []

    def _action(self, model: str, slot: int, action: str, name: str) -> dict | None:
        try:
            answer = self.client.request_json(
                "POST",
                f"/slots/{slot}",
                root=True,
                timeout=TIMEOUT,
                params={"action": action, "autoload": "false"},
                json={"filename": name, "model": model},
            )
        except BackendError as exc:
            log.info("slot %s of %s (%s) failed: %s", action, model, name, exc)
            return None
        return answer if isinstance(answer, dict) else None


def _slot_to_fill(slots: list[dict]) -> int | None:
    """An idle slot to restore into: one never used, else the least recently used."""
    idle = [slot for slot in slots if not slot.get("is_processing")]
    if not idle:
        return None
    # A slot's task ids grow with each request: the smallest is the one used longest ago.
    chosen = min(idle, key=lambda slot: (slot.get("id_task") is not None, slot.get("id_task") or 0))
    return int(chosen["id"])


def _slot_holding(slots: list[dict], tokens: int) -> int | None:
    """The idle slot whose last request read about `tokens` tokens (the latest such one)."""
    holding = [
        slot
        for slot in slots
        if not slot.get("is_processing")
        and slot.get("id_task") is not None
        and isinstance(held := slot.get("n_prompt_tokens"), int)
        and abs(held - tokens) <= 2
    ]
    if not holding:
        return None
    return int(max(holding, key=lambda slot: int(slot["id_task"]))["id"])
