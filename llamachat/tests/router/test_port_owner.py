"""The tests of `llamachat.router.port_owner`."""

from __future__ import annotations

import os
import socket

from llamachat.router.port_owner import listener, router_owner
from llamachat.router.server import free_port


class TestPortOwner:
    """`llamachat.router.port_owner`: whose a local router is."""

    def test_port_owner_names_the_program_listening_and_nothing_for_a_free_port(self) -> None:
        """A port this process listens on is named with its program, pid and command line;
        a port nothing listens on, and a remote URL, give ''."""
        with socket.create_server(("127.0.0.1", 0)) as held:
            port = held.getsockname()[1]
            found = listener(port)
            assert found is not None and (found.uid, found.pid) == (os.getuid(), os.getpid())
            said = router_owner(f"http://127.0.0.1:{port}")
            assert (
                said.startswith("it is not llamachat's: python") and f"(pid {os.getpid()})" in said
            )
            assert "pytest" in said, "the command line is quoted"
        assert router_owner(f"http://127.0.0.1:{free_port()}") == ""
        assert router_owner("https://example.com:8080") == ""
