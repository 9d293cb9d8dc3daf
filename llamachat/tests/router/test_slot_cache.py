"""The tests of `llamachat.router.slot_cache`."""

from __future__ import annotations

import os
import re
from pathlib import Path

from llamachat.config import Config
from llamachat.router.client import Client
from llamachat.router.server import ManagedServer
from llamachat.router.slot_cache import PART, SlotCache, SlotFiles, digest, file_name
from llamachat.tests.support import SMOL_ID, real_assets, smol_models_folder, wait_for

MB = 1024 * 1024


def _write(folder: Path, session: int, body_digest: str, size: int, used: float) -> Path:
    """A slot file as the server writes one, last used at `used` (seconds since the epoch)."""
    path = folder / file_name(session, body_digest)
    path.write_bytes(b"\0" * size)
    os.utime(path, (used, used))
    return path


def _chat(exchanges: int) -> list[dict]:
    """A chat of about 60 tokens per exchange."""
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for n in range(exchanges):
        text = " ".join(f"word{n}x{i}" for i in range(20))
        messages.append({"role": "user", "content": f"Question {n}: {text}?"})
        messages.append({"role": "assistant", "content": f"Answer {n}: {text}."})
    return messages


def _read(client: Client, messages: list[dict]) -> dict:
    """Have the server read `messages` (one token generated): the reply's timings."""
    body = {"model": SMOL_ID, "messages": messages, "max_tokens": 1, "temperature": 0}
    answer = client.request_json("POST", "/chat/completions", json=body, timeout=300)
    return answer["timings"]


def _loaded(client: Client) -> None:
    client.request_json("POST", "/models/load", root=True, json={"model": SMOL_ID})

    def status() -> str:
        listed = client.request_json("GET", "/models", root=True)["data"]
        return next(m["status"]["value"] for m in listed if m["id"] == SMOL_ID)

    wait_for(lambda: status() == "loaded", 60, "SmolLM2 loaded")


class TestSlotFiles:
    """The slot files folder: one file per chat, the least recently used removed past a bound."""

    def test_slot_files_keep_one_file_per_chat_and_drop_the_least_recently_used(
        self, tmp_path: Path
    ) -> None:
        tmp_path = tmp_path / "slots"
        tmp_path.mkdir()
        files = SlotFiles(tmp_path, 3 * MB)
        old = _write(tmp_path, 1, "a" * 16, MB, 1_000)
        other = _write(tmp_path, 2, "b" * 16, MB, 2_000)
        used = _write(tmp_path, 3, "c" * 16, MB, 500)
        assert files.find(3, "c" * 16) == used.name  # used now: the newest
        _write(tmp_path, 1, "d" * 16, MB, 3_000)  # chat 1 read again, its chat changed
        files.saved(1, "d" * 16)
        assert not old.exists()  # one file per chat: the older one went
        assert files.total_bytes() == 3 * MB

        _write(tmp_path, 4, "e" * 16, MB, 4_000)
        files.saved(4, "e" * 16)
        # Over 3 MiB: the least recently used (chat 2's; chat 3's was found since) goes.
        names = sorted(p.name for p in tmp_path.iterdir())
        assert not other.exists() and used.exists()
        assert names == sorted(
            [file_name(1, "d" * 16), file_name(3, "c" * 16), file_name(4, "e" * 16)]
        )
        files.forget(3)
        assert not used.exists() and files.total_bytes() == 2 * MB

    def test_slot_files_never_find_a_stale_digest_and_drop_a_file_past_the_bound(
        self, tmp_path: Path
    ) -> None:
        tmp_path = tmp_path / "slots"
        tmp_path.mkdir()
        files = SlotFiles(tmp_path, MB)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        changed = {"model": "m", "messages": [{"role": "user", "content": "hi!"}]}
        _write(tmp_path, 7, digest(body), 1000, 1_000)
        assert re.fullmatch(r"[0-9a-f]{16}", digest(body)) and digest(body) != digest(changed)
        assert files.find(7, digest(changed)) is None  # the chat changed: nothing restored
        assert files.find(8, digest(body)) is None  # another chat's body: not its file
        assert files.find(7, digest(body)) == file_name(7, digest(body))
        # A save cut short (llamachat quit, the server stopped): its part never counts and
        # goes when the next server starts.
        part = tmp_path / (file_name(7, "a" * 16) + PART)
        part.write_bytes(b"\0" * 100)
        assert files.find(7, "a" * 16) is None
        files.server_started()
        assert not part.exists()
        (tmp_path / "notes.txt").write_text("kept")  # not a slot file: never touched
        _write(tmp_path, 9, "f" * 16, 2 * MB, 2_000)
        files.saved(9, "f" * 16)  # larger than the bound alone
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            file_name(7, digest(body)),
            "notes.txt",
        ]


class TestSlotCache:
    """Saved by one server, restored by the next: only the new message is read."""

    def test_slot_cache_restores_after_a_restart_so_only_the_new_message_is_read(
        self, tmp_path: Path
    ) -> None:
        _binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        cfg = Config(
            models_dir=models, server_args=("--ctx-size", "4096", "-t", "2"), slot_cache_mb=64
        )
        chat = _chat(5)
        body_digest = digest({"messages": chat})

        def started() -> tuple[ManagedServer, Client, SlotCache]:
            server = ManagedServer(
                cfg, log_path=tmp_path / "server.log", lock_path=tmp_path / "server.lock"
            )
            server.start()
            assert server.wait_ready(60), server.log_file.tail()
            files = server.slot_files
            assert files is not None
            client = Client(server.url, api_key=server.api_key)
            return server, client, SlotCache(client, files)

        server, client, slots = started()
        try:
            assert "--slot-save-path" in server.command()
            off = ManagedServer(
                Config(models_dir=models, slot_cache_mb=0), lock_path=tmp_path / "off.lock"
            )
            assert off.slot_files is None and "--slot-save-path" not in off.command()
            off.log_file.close()
            first = _read(client, chat)
            held = first["cache_n"] + first["prompt_n"]
            assert first["prompt_n"] > 300
            assert slots.save(SMOL_ID, 7, body_digest, held)
            assert slots.files.find(7, body_digest) is not None
            assert not slots.save(SMOL_ID, 7, body_digest, held)  # already on disk
            assert slots.restore(SMOL_ID, 7, body_digest) == 0  # this server holds it
        finally:
            client.close()
            server.stop()

        server, client, slots = started()
        try:
            _loaded(client)
            assert slots.restore(SMOL_ID, 7, "0" * 16) == 0  # a changed chat: not restored
            assert slots.restore(SMOL_ID, 7, body_digest) >= held - 2
            question = {"role": "user", "content": "And the llamas?"}
            after = _read(client, [*chat, question])
            # The fresh server read only the new question, not the chat it restored.
            assert after["prompt_n"] < 30 and after["cache_n"] >= held - 5
        finally:
            client.close()
            server.stop()

    def test_slot_cache_saves_a_chat_only_from_the_slot_holding_it_and_whole(
        self, tmp_path: Path
    ) -> None:
        """A chat left is saved from the slot holding its count, whole (no part left). On
        this build (one KV cache for all slots) another request moves the idle slots to the
        RAM cache and empties them: then nothing is saved, rather than another chat's slot."""
        _binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        cfg = Config(
            models_dir=models, server_args=("--ctx-size", "4096", "-t", "2"), slot_cache_mb=64
        )
        server = ManagedServer(
            cfg, log_path=tmp_path / "server.log", lock_path=tmp_path / "server.lock"
        )
        server.start()
        client = Client(server.url, api_key=server.api_key)
        try:
            assert server.wait_ready(60), server.log_file.tail()
            files = server.slot_files
            assert files is not None
            slots = SlotCache(client, files)
            chat = _chat(5)
            first = _read(client, chat)
            held = first["cache_n"] + first["prompt_n"]
            # Another chat, sharing no prefix: the server gives it another slot, used last.
            text = " ".join(f"other{i}" for i in range(150))
            other = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
            assert _read(client, other)["cache_n"] < 30
            assert not slots.save(SMOL_ID, 7, "0" * 16, held)  # its slot was emptied
            assert list(files.folder.iterdir()) == []
            again = _read(client, chat)  # back from the RAM cache
            assert again["cache_n"] + again["prompt_n"] == held and again["prompt_n"] < 30
            assert not slots.save(SMOL_ID, 8, "1" * 16, held + 40)  # no slot holds that
            assert slots.save(SMOL_ID, 7, "0" * 16, held)
            assert [p.name for p in files.folder.iterdir()] == [file_name(7, "0" * 16)]
            assert (files.folder / file_name(7, "0" * 16)).stat().st_size > held * 10_000
        finally:
            client.close()
            server.stop()
