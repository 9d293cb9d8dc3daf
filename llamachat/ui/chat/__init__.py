"""One conversation's logic on the GUI side, with no widgets of its own.

`conversation.Conversation` owns a chat's state and actions for every window, the state
written by its `state.ChatWriter` only; `sender` checks and sends what the user asks for;
`outbox` builds and sends each request; `reply` streams one reply into its History row;
`worker` reads the stream on a thread; `context_watch` keeps the next request's size
counted (with `model_limits`, the model's context size, and `draft_count`, the draft's);
`memory` keeps a chat's memories (the person's and the model's) on the GUI thread;
`mcp_host` owns the MCP servers and asks consent.
"""
