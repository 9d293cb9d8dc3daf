"""The tests of `llamachat.history.rows`."""

from __future__ import annotations


class TestRows:
    """The row types, their coding, the errors."""

    def test_the_environments_fault_crosses_the_import_process_whole(self) -> None:
        """HistoryUnavailable, sent by the import's child process, arrives with its message
        and code (it raised TypeError in the event loop: __init__ missing 'code')."""
        import pickle

        from llamachat.history.store import HistoryUnavailable

        sent = HistoryUnavailable("cannot save: the disk is full", code="SQLITE_FULL")
        got = pickle.loads(pickle.dumps(sent))
        assert isinstance(got, HistoryUnavailable)
        assert (str(got), got.code) == ("cannot save: the disk is full", "SQLITE_FULL")
