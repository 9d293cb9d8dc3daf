"""The conversation history: sessions and their messages in one SQLite file.

`store.History` is the one way in: it owns the connection, and its helpers each take that
connection (`file` opens, checks and migrates it; `tree` walks versions and branches;
`search` finds sessions; `export` writes and reads files; `projects` groups chats;
`memories` keeps the short facts every chat in their scope is sent). `rows` holds the row
types and the errors they all share.
"""
