"""The tests of `llamachat.api_keys`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel, QTextBrowser

from llamachat.config import ProviderConfig
from llamachat.dev.scripted_router import Reply, ScriptedRouter
from llamachat.router import client as backend
from llamachat.tests.support import last_saved_message, send_and_wait, turn_of


class TestApiKeys:
    """API keys and other secrets: masked wherever text is shown, logged or saved."""

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
            send_and_wait(qtbot, window, "one")
            send_and_wait(qtbot, window, "two")
            send_and_wait(qtbot, window, "three")
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
            send_and_wait(qtbot, window, "four")
            send_and_wait(qtbot, window, "five")
            send_and_wait(qtbot, window, "six")
            assert keyed.chat_requests()[0].headers["authorization"] == f"Bearer {router_key}"
            assert remote.chat_requests()[0].headers["authorization"] == f"Bearer {provider_key}"
            window.set_model("test-model")
            window.app.use_router("http://127.0.0.1:9")
            send_and_wait(qtbot, window, "seven")

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
            send_and_wait(qtbot, window, "hello")
            row = last_saved_message(history, window)
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
                    list(client.stream_chat(turn_of([{"role": "user", "content": "hi"}])))
            finally:
                client.close()
        message = caught.value.message
        assert "bad key ***" in message
        for start in range(len(key) - 7):
            assert key[start : start + 8] not in message, message
