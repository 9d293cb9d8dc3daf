"""The tests of `llamachat.ui.chat.memory`."""

from __future__ import annotations

import pytest

from llamachat.config.load import ProviderConfig
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.history.store import History
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.tests.support import (
    SMOL_ID,
    make_llama_chat,
    model_status,
    send_and_wait,
    warmups,
)
from llamachat.turn import MEMORY_HEADING
from llamachat.ui.chat import conversation as controller

ON = {"memory_enabled": True}


def system_of(request) -> str:
    """The system message of a recorded chat request ('' when it has none)."""
    messages = request.json["messages"]
    return messages[0]["content"] if messages[0]["role"] == "system" else ""


def offered(request) -> list[str]:
    return [tool["function"]["name"] for tool in request.json.get("tools") or []]


def send(qtbot, router, chat, text: str, *replies: Reply) -> None:
    """Send `text` and wait for its reply (scripted as `replies`, else "OK.")."""
    router.script(*(replies or (Reply(content="OK."),)))
    with qtbot.waitSignal(chat.reply_ended, timeout=10_000) as ended:
        assert chat.submit(text) == controller.SENT
    assert ended.args[0] == "complete"


@pytest.fixture
def memory_chat(conversation):
    """A window-less Conversation with memory on (`cfg` options over that)."""

    def make(**cfg):
        return conversation(cfg={**ON, **cfg})

    return make


class TestChatMemory:
    """Memories kept on the GUI thread, carried by every chat's system message in scope."""

    def test_the_model_remembers_and_the_next_chat_is_sent_it(
        self, memory_chat, router, qtbot
    ) -> None:
        """The model's remember call is saved (by the GUI thread, with its source) and
        shown; a new chat's request then carries it in its system message."""

        chat, history = memory_chat()
        saved: list = []
        chat.memory.saved.connect(saved.append)
        call = ToolCall("remember", '{"fact": "Prefers answers in metric units"}')
        remembered = (Reply(tool_calls=[call]), Reply(content="Noted."))
        send(qtbot, router, chat, "I use metric, remember that", *remembered)
        first = router.chat_requests()[0]
        assert "remember" in offered(first) and MEMORY_HEADING not in system_of(first)
        [memory] = history.memories.listed()
        reply = history.messages(chat.session_id)[-1]
        assert (memory["text"], memory["author"], memory["session_id"], memory["message_id"]) == (
            "Prefers answers in metric units",
            "model",
            chat.session_id,
            reply["id"],
        )
        assert [row["id"] for row in saved] == [memory["id"]]

        chat.new_session()
        send(qtbot, router, chat, "How tall is Everest?")
        assert system_of(router.chat_requests()[-1]).endswith(
            f"{MEMORY_HEADING}\n- Prefers answers in metric units"
        )
        assert chat.memory.used_in(chat.session_id) == [memory["id"]]

    def test_a_projects_memory_stays_in_the_project(self, memory_chat, router, qtbot) -> None:
        chat, history = memory_chat()
        work = history.projects.create("Work")
        chat.new_session(history.projects.get(work))
        assert chat.submit("/remember The project's API is FastAPI") == controller.HELD
        [memory] = history.memories.listed(every=True)
        assert memory["project_id"] == work and memory["author"] == "user"
        send(qtbot, router, chat, "Which framework?")
        assert "- The project's API is FastAPI" in system_of(router.chat_requests()[-1])

        chat.new_session()
        send(qtbot, router, chat, "Which framework?")
        assert MEMORY_HEADING not in system_of(router.chat_requests()[-1])

    def test_a_temporary_chat_reads_and_writes_no_memory(self, memory_chat, router, qtbot) -> None:
        chat, history = memory_chat()
        history.memories.add("Prefers answers in metric units")
        notices: list = []
        chat.notice.connect(lambda text, _ms: notices.append(text))
        chat.start_temporary()
        send(qtbot, router, chat, "How far is the moon?")
        sent = router.chat_requests()[-1]
        assert MEMORY_HEADING not in system_of(sent) and "remember" not in offered(sent)
        assert chat.submit("/remember I live in Lyon") == controller.NOT_SENT
        assert "Not remembered: a temporary chat." in notices
        assert [m["text"] for m in history.memories.listed(every=True)] == [
            "Prefers answers in metric units"
        ]
        assert history.memories.listed()[0]["used_at"] == 0

    def test_the_request_prefix_is_byte_identical_while_memories_do_not_change(
        self, memory_chat, router, qtbot
    ) -> None:
        """Each request marks its memories used, which never moves them in the block: the
        system message is the same bytes turn after turn, and changes when a memory does."""

        chat, history = memory_chat()
        for fact in ("Uses Fedora", "Writes Python", "Prefers metric units"):
            history.memories.add(fact)
        history.memories.update(history.memories.listed()[-1]["id"], pinned=True)
        for question in ("One?", "Two?", "Three?"):
            send(qtbot, router, chat, question)
        systems = [system_of(request) for request in router.chat_requests()]
        assert systems[0] == systems[1] == systems[2]
        assert systems[0].endswith("\n- Prefers metric units\n- Uses Fedora\n- Writes Python")
        assert all(m["used_at"] > 0 for m in history.memories.listed())
        chat.memory.remember("Lives in Lyon")
        send(qtbot, router, chat, "Four?")
        assert system_of(router.chat_requests()[-1]).endswith("- Writes Python\n- Lives in Lyon")

    def test_over_budget_pinned_then_recently_used_and_the_rest_said_left_out(
        self, memory_chat, router, qtbot
    ) -> None:
        chat, history = memory_chat(memory_tokens=26)
        old = history.memories.add("An old fact about the garden shed")
        used = history.memories.add("A used fact about the bicycle lock")
        pinned = history.memories.add("A pinned fact about the red kettle")
        history.memories.update(pinned, pinned=True)
        history.memories.mark_used([used])
        history.memories.add("A new fact about the blue door")
        send(qtbot, router, chat, "Hi")
        system = system_of(router.chat_requests()[-1])
        assert "red kettle" in system and "bicycle lock" in system
        assert "garden shed" not in system and "blue door" not in system
        left = chat.builder.memory.left_out
        assert {m["text"] for m in left} >= {"An old fact about the garden shed"}
        assert old not in chat.memory.used_in(chat.session_id)

    def test_the_meter_counts_the_memories_as_a_part_of_their_own(self, chat_window, qtbot) -> None:
        window, _history = chat_window(**ON)
        chat = window.chat
        watch = chat.context
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=10_000)
        assert watch.breakdown().get("memory") == 0
        chat.memory.remember("Prefers answers in metric units")
        qtbot.waitUntil(lambda: watch.breakdown().get("memory") > 0, timeout=10_000)
        assert watch.breakdown().exact

    def test_remember_with_memory_off_keeps_the_fact_and_says_it_is_not_sent(
        self, conversation, router, qtbot
    ) -> None:
        chat, history = conversation()
        notices: list = []
        chat.notice.connect(lambda text, _ms: notices.append(text))
        assert chat.submit("/remember I live in Lyon") == controller.HELD
        assert [m["text"] for m in history.memories.listed()] == ["I live in Lyon"]
        assert notices[-1].startswith("Remembered, but memory is off")
        send(qtbot, router, chat, "Where do I live?")
        sent = router.chat_requests()[-1]
        assert MEMORY_HEADING not in system_of(sent) and "remember" not in offered(sent)

    def test_a_memory_kept_warms_the_prompt_cache_with_the_new_block(
        self, chat_window, router, qtbot
    ) -> None:
        """The system message changes with a memory: the warm-up has the server read the
        new prefix ahead, and the next message then reads only itself."""

        window, history = chat_window(warm_cache=True, **ON)
        window.open_session(make_llama_chat(history))
        qtbot.waitUntil(lambda: bool(warmups(router)) and not window.chat.warmer.busy())
        before = len(warmups(router))
        window.chat.memory.remember("Prefers answers in metric units")
        qtbot.waitUntil(lambda: len(warmups(router)) > before and not window.chat.warmer.busy())
        assert system_of(warmups(router)[-1]).endswith("- Prefers answers in metric units")
        send_and_wait(qtbot, window, "And alpacas?")
        timings = history.messages(window.session_id)[-1]["timings"]
        assert timings["prompt_n"] < 15

    def test_a_chat_with_memory_off_is_sent_none_and_offered_no_remember(
        self, memory_chat, router, qtbot
    ) -> None:
        chat, history = memory_chat()
        history.memories.add("Prefers answers in metric units")
        chat.memory.set_on(False)
        send(qtbot, router, chat, "Hi")
        sent = router.chat_requests()[-1]
        assert MEMORY_HEADING not in system_of(sent) and "remember" not in offered(sent)

    def test_the_chats_memory_switch_is_saved_with_it(
        self, memory_chat, router, qtbot, tmp_path
    ) -> None:
        """Switched off, a chat stays off when opened again, in this History and in a new
        one over the same file (a restart); on again, its requests carry memories again.
        The switch is never a request parameter, nor one the parameters panel counts."""

        chat, history = memory_chat()
        history.memories.add("Prefers answers in metric units")
        chat.memory.set_on(False)  # a new chat: saved with its first message
        send(qtbot, router, chat, "Hi")
        session = chat.session_id
        sent = router.chat_requests()[-1]
        assert MEMORY_HEADING not in system_of(sent) and "memory" not in sent.json
        chat.set_params({"temperature": 0.5})  # the parameters panel keeps the switch
        assert chat.params() == {"temperature": 0.5}

        chat.new_session()
        assert chat.state.memory_on  # a new chat starts with memory on
        chat.open_session(session)
        assert not chat.state.memory_on
        restarted = History(tmp_path / "history.db")
        try:
            assert restarted.session_params(session) == {"temperature": 0.5, "memory": False}
        finally:
            restarted.close()
        again, _history = memory_chat()
        again.open_session(session)
        assert not again.state.memory_on and again.params() == {"temperature": 0.5}
        send(qtbot, router, again, "And now?")
        sent = router.chat_requests()[-1]
        assert MEMORY_HEADING not in system_of(sent) and "remember" not in offered(sent)
        assert sent.json["temperature"] == 0.5 and "memory" not in sent.json

        again.memory.set_on(True)
        send(qtbot, router, again, "And with memory?")
        assert "- Prefers answers in metric units" in system_of(router.chat_requests()[-1])
        assert history.session_params(session) == {"temperature": 0.5}
        chat.open_session(session)
        assert chat.state.memory_on

    def test_memory_goes_to_a_provider_only_where_allowed(self, memory_chat, router) -> None:
        """The router's models get memories; a provider's only when memory_providers names it."""

        cloud = ProviderConfig("cloud", router.url)
        other = ProviderConfig("other", router.url)
        chat, _history = memory_chat(providers=(cloud, other), memory_providers=("other",))
        assert chat.builder.memory_allowed("test-model")
        assert not chat.builder.memory_allowed("cloud/gpt")
        assert chat.builder.memory_allowed("other/gpt")

    @pytest.mark.real_router
    def test_real_smollm2_a_tool_less_model_gets_the_persons_memories(
        self, chat_window, real_router, qtbot
    ) -> None:
        """SmolLM2's template takes no tools: it is offered no remember, and the request it
        answers carries the person's memories all the same."""

        models = Models(Client(real_router.url))
        if model_status(real_router.url, SMOL_ID) != "loaded":
            models.load(SMOL_ID)
        assert models.wait_until_loaded(SMOL_ID, timeout=60).status == "loaded"
        window, history = chat_window(url=real_router.url, default_model=SMOL_ID, **ON)
        history.memories.add("The user's name is Ada")
        chat = window.chat
        chat.set_params({"temperature": 0.0})  # the same answer each run
        qtbot.waitUntil(lambda: not chat.context.takes_tools(), timeout=30_000)
        started: list = []
        chat.reply_started.connect(started.append)
        with qtbot.waitSignal(chat.reply_ended, timeout=60_000) as ended:
            assert chat.submit("What is my name?") == controller.SENT
        assert ended.args[0] == "complete"
        sent = started[0].request()
        assert sent.offer == () and "- The user's name is Ada" in sent.system_message()
        assert "Ada" in history.messages(chat.session_id)[-1]["content"]
