"""The conversation history: sessions and their messages in one SQLite file.

`store.History` is the one way in: it owns the connection, and its helpers each take that
connection (`database` opens, checks and migrates it; `sessions` keeps a chat's own row;
`active_paths` keeps the active paths read; `tree` walks versions and branches; `drafts`
keeps what was typed and not sent; `projects` groups chats; `memories` keeps the short facts
every chat in their scope is sent; `search` finds sessions; `export` writes and reads
files). `rows` holds the row types and the errors they all share. `file_import` imports a
file over a connection of its own (`import_child`: in a child process; `importers` reads
other apps' exports).
"""
