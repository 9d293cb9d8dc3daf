"""The tests of `llamachat.params`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llamachat import config, turn
from llamachat.config import Config
from llamachat.history.store import MIGRATIONS, History
from llamachat.tests.support import (
    SMOL_ID,
    model_status,
    send_and_wait,
    stream_reply,
    write_config_file,
)


class TestParams:
    """Sampling parameters per model, preset and chat, checked and sent with each request."""

    def test_router_params_layer_model_preset_and_chat_and_check_ranges(self) -> None:
        from llamachat import params

        cfg = Config(
            model_params={"m": {"temperature": 0.6, "top_k": 20}},
            preset_params={"Coder": {"temperature": 0.2}},
        )
        body = turn.request_params(cfg, model="m", preset="Coder", chat={"seed": 7})
        assert body == {"temperature": 0.2, "top_k": 20, "seed": 7}
        assert turn.request_params(cfg, model="other") == {}
        effort = params.request_fields({"reasoning_effort": "high"})
        assert effort["chat_template_kwargs"] == {"reasoning_effort": "high"}
        assert params.request_fields({"reasoning_budget": 0}) == {"thinking_budget_tokens": 0}
        assert "from 0 to 1" in params.problem({"top_p": 1.5}, "model_params.m")
        assert "unknown parameter 'x.temp'" in params.problem({"temp": 1}, "x")
        assert "one of low, medium, high" in params.problem({"reasoning_effort": "max"}, "x")
        assert params.problem({"top_k": True}, "x") == "x.top_k must be an integer, got True"

    def test_router_params_bad_config_names_the_key(self, tmp_path: Path) -> None:
        path = write_config_file(tmp_path, "[model_params.m]\ntop_p = 2\n")
        with pytest.raises(config.ConfigError, match=r"model_params\.m\.top_p must be from 0"):
            config.load(path)

    def test_router_chat_params_reach_the_next_request_and_stay_with_the_chat(
        self, chat_window, qtbot, router
    ) -> None:
        from llamachat.ui.views.params_panel import ChatParams

        window, history = chat_window(model_params={"test-model": {"temperature": 0.6}})
        panel = window.chat_params.panel
        assert isinstance(window.chat_params, ChatParams)
        assert "Default: 0.6 (config)" in panel.editors["temperature"].toolTip()
        send_and_wait(qtbot, window, "first")
        body = router.chat_requests()[-1].json
        assert body["temperature"] == 0.6 and "top_k" not in body
        panel.editors["temperature"].setValue(1.3)
        panel.editors["top_k"].setValue(12)
        panel.editors["reasoning_effort"].setCurrentIndex(2)
        assert window.chat_params.button.text() == "⚙ 3"
        send_and_wait(qtbot, window, "second")
        body = router.chat_requests()[-1].json
        assert (body["temperature"], body["top_k"], body["reasoning_effort"]) == (1.3, 12, "medium")
        assert body["chat_template_kwargs"] == {"reasoning_effort": "medium"}
        session = window.chat.session_id
        assert history.session_params(session) == {
            "temperature": 1.3,
            "top_k": 12,
            "reasoning_effort": "medium",
        }
        # Another chat starts from the defaults; reopening this one brings its values back.
        window.new_session()
        assert panel.values() == {} and window.chat_params.button.text() == "⚙"
        window.open_session(session)
        assert panel.values()["top_k"] == 12
        panel.reset_button.click()
        assert history.session_params(session) == {}
        assert not any(q.path == "/models/load" for q in router.requests)

    def test_router_session_params_survive_reopening_the_history(self, tmp_path: Path) -> None:
        path = tmp_path / "h.db"
        with History(path) as history:
            sid = history.create_session("chat", "m")
            assert history.session_params(sid) == {}
            history.set_session_params(sid, {"seed": 3})
            history.set_session_params(sid, {"seed": 4, "top_p": 0.5})
        with History(path) as history:
            assert history.session_params(sid) == {"seed": 4, "top_p": 0.5}
            history.delete_session(sid)
            history.purge_deleted([sid])
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT COUNT(*) FROM session_params").fetchone()[0] == 0
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        conn.close()

    @pytest.mark.real_router
    def test_real_router_param_change_reaches_request_without_reloading(self, real_router) -> None:
        question = [{"role": "user", "content": "Count to five."}]
        stream_reply(real_router.url, SMOL_ID, question, max_tokens=4)
        log_file = real_router.server.log_file
        spawns = log_file.tail(1 << 22).count(f"spawning server instance with name={SMOL_ID} ")
        cfg = Config(model_params={SMOL_ID: {"temperature": 0.0}})
        first = turn.request_params(cfg, model=SMOL_ID, chat={"max_tokens": 3})
        second = turn.request_params(cfg, model=SMOL_ID, chat={"max_tokens": 6, "seed": 5})
        _pieces, stats1 = stream_reply(real_router.url, SMOL_ID, question, **first)
        _pieces, stats2 = stream_reply(real_router.url, SMOL_ID, question, **second)
        assert stats1["usage"]["completion_tokens"] == 3
        assert stats2["usage"]["completion_tokens"] == 6
        assert model_status(real_router.url, SMOL_ID) == "loaded"
        after = log_file.tail(1 << 22).count(f"spawning server instance with name={SMOL_ID} ")
        assert after == spawns
