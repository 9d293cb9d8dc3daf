"""Memory on screen: the chat window's memories (Undo, "Remember this") and the Memory panel."""
