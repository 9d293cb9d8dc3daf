"""MCP in the window: the servers panel, and the host that asks consent for a tool call and
shows the wait for a server that has not started yet."""
