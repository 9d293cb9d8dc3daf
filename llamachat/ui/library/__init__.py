"""The libraries of chats on screen: the App's host (indexing, following folders) and the
chat window's part (Attach > Add folder as library, dropped folders, the Libraries panel)."""
