"""The tests of `llamachat.history.streams`."""

from __future__ import annotations

from llamachat.history.store import History


class TestReplyStreams:
    """Where a streaming reply stands in the server's copy of its stream."""

    def test_a_replys_place_is_saved_updated_and_goes_with_the_reply(self, tmp_path) -> None:

        with History(tmp_path / "history.db") as history:
            session = history.create_session("chat", "test-model")
            history.add_message(session, "user", "hi")
            reply = history.add_message(session, "assistant", "Hel", status="streaming")
            assert history.reply_streams.get(reply) is None
            place = {"conversation": "llamachat-1", "offset": 120, "content": 3, "reasoning": 0}
            history.reply_streams.save(reply, place)
            history.reply_streams.save(reply, {**place, "offset": 240, "content": 5})
        with History(tmp_path / "history.db") as history:
            assert history.reply_streams.get(reply) == {**place, "offset": 240, "content": 5}
            history.delete_branch(reply)
            assert history.reply_streams.get(reply) is None
