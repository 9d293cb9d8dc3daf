"""The tests of `llamachat.router.transport`."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.router import client as backend
from llamachat.router.client import Client
from llamachat.tests.support import raw_router, turn_of, user_turn, wait_for


def request_line(conn: socket.socket) -> str:
    """Read one whole request (its body too); its first line, or '' at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return ""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length and len(rest) < int(length[1]):
        rest += conn.recv(65536)
    return head.split(b"\r\n")[0].decode()


class ClosingServer:
    """An HTTP server on 127.0.0.1 whose connections each answer `answers` requests, then read
    one more whole and close without a byte of answer (as llama-server's router now and then
    does with a kept-alive connection)."""

    def __init__(self, answer: bytes, *, answers: int = 1) -> None:
        self.answer = answer
        self.answers = answers
        self.answered: list[str] = []
        self.unanswered: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                for _ in range(self.answers):
                    self.answered.append(request_line(conn))
                    conn.sendall(self.answer)
                self.unanswered.append(request_line(conn))

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()


def json_answer(body: bytes) -> bytes:
    """A whole HTTP/1.1 200 answer carrying the JSON `body`."""
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


class TestTransport:
    """The client's HTTP plumbing: a connection pool whose sockets can be shut from another thread."""

    def test_backend_request_meeting_a_closed_kept_alive_connection_is_sent_again(self) -> None:
        """A server that closes a kept-alive connection without answering the request that met
        it (as llama-server does): the request, a POST too, goes out again on a fresh
        connection; one closed unanswered on a fresh connection is an error, not resent."""
        server = ClosingServer(json_answer(b'{"ok": true}'))
        client = Client(server.url, api_key="")
        try:
            for method in ("GET", "POST"):
                for path in ("/a", "/b"):
                    assert client.request_json(method, path, root=True, json={}) == {"ok": True}
        finally:
            client.close()
        # Each request after the first met the connection the one before left, and went out
        # again on a fresh one.
        assert server.answered == [
            "GET /a HTTP/1.1",
            "GET /b HTTP/1.1",
            "POST /a HTTP/1.1",
            "POST /b HTTP/1.1",
        ]
        assert server.unanswered[:3] == ["GET /b HTTP/1.1", "POST /a HTTP/1.1", "POST /b HTTP/1.1"]
        server.close()

        never = ClosingServer(b"", answers=0)
        client = Client(never.url, api_key="")
        try:
            with pytest.raises(backend.StreamError, match="RemoteProtocolError"):
                client.request_json("POST", "/c", root=True, json={})
        finally:
            client.close()
            never.close()
        assert never.unanswered == ["POST /c HTTP/1.1"], "a fresh connection's failure is final"

    def test_backend_chat_meeting_a_closed_kept_alive_connection_is_sent_again(self) -> None:
        """A chat request that goes out on a kept-alive connection the server closes without a
        byte of answer is sent once more, and its reply streams."""
        chunk = b'data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n'
        body = chunk + b"data: [DONE]\n\n"
        server = ClosingServer(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        client = Client(server.url, api_key="")
        try:
            for _ in range(2):
                events = list(client.stream_chat(turn_of(user_turn("hello"), model="m")))
                assert ("content", "Hi") in events
        finally:
            client.close()
            server.close()
        assert server.answered == ["POST /v1/chat/completions HTTP/1.1"] * 2
        assert server.unanswered[0] == "POST /v1/chat/completions HTTP/1.1"

    def test_backend_cancel_on_a_reused_connection_is_not_sent_again(self) -> None:
        """A cancel while the router loads the model, on a kept-alive connection: the shut
        socket is not taken for one the server closed, and nothing goes out again."""
        with ScriptedRouter([Model("huge")], load_delay=60) as r:
            client = Client(r.url)
            assert client.request_json("GET", "/models")
            cancel = threading.Event()
            outcome: list[object] = []

            def chat() -> None:
                outcome.append(list(client.stream_chat(turn_of([], model="huge"), cancel=cancel)))

            thread = threading.Thread(target=chat, daemon=True)
            thread.start()
            wait_for(lambda: r.status("huge") == "loading", 10, "the load to begin")
            cancel.set()
            thread.join(5)
            assert outcome == [[]], "the chat was sent again after the cancel"
            assert len(r.chat_requests()) <= 1
            client.close()

    def test_backend_reuses_one_connection_across_turns(self, router) -> None:

        client = backend.Client(router.url)
        for _ in range(3):
            list(client.stream_chat(turn_of(user_turn())))
        client.close()
        peers = {r.peer for r in router.chat_requests()}
        assert len(router.chat_requests()) == 3 and len(peers) == 1

    def test_backend_closing_the_generator_closes_the_response(self, router) -> None:

        router.script(Reply(content=["x"] * 2000, delay=0.01))
        client = backend.Client(router.url)
        stream = client.stream_chat(turn_of(user_turn()))
        assert next(stream) == ("content", "x")
        stream.close()
        deadline = time.monotonic() + 10
        while router.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.disconnects == 1
        client.close()

    def test_fault_a_redirect_elsewhere_is_not_followed_and_says_where_it_points(self) -> None:
        """A 307 to another host: the request is not sent there, and the error says it was
        redirected and where to (credentials and the key masked), not that the server crashed."""
        key = "sk-0123456789-qwertzuiop"
        location = f"https://bob:hunter2-pass@elsewhere.example:8443/v1/chat/completions?key={key}"

        def redirect(handler) -> None:
            handler.send_response(307)
            handler.send_header("Location", location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        with raw_router(redirect) as url:
            client = backend.Client(url, api_key=key)
            try:
                with pytest.raises(backend.ServerError) as caught:
                    list(client.stream_chat(turn_of(user_turn())))
            finally:
                client.close()
        error = caught.value
        assert error.status == 307 and error.error_type == "redirect"
        assert "redirected" in error.message and "crashed" not in error.message
        where = "https://bob:***@elsewhere.example:8443/v1/chat/completions?key=***"
        assert where in error.message, error.message
        assert key not in error.message and "hunter2" not in error.message

    def test_backend_sent_is_set_once_the_request_is_written_before_any_answer(
        self, router
    ) -> None:
        """`stream_chat(sent=...)` says the request is on the wire while the server has not
        answered yet (a router loading a model), so the window need not wait for more."""

        router.script(Reply(content=["late"], delay=1.0))
        client = Client(router.url)
        sent = threading.Event()
        events: list = []
        reader = threading.Thread(
            target=lambda: events.extend(client.stream_chat(turn_of(user_turn("hi")), sent=sent))
        )
        reader.start()
        try:
            assert sent.wait(10)
            assert events == []
        finally:
            reader.join(30)
            client.close()
        assert ("content", "late") in events
