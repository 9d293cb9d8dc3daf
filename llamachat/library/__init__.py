"""Chat with your files: folders attached to a chat, their text indexed for the model to search.

`extract` reads a file's text into passages (file, page, heading); `index.LibraryStore`
keeps the index in its own SQLite file (library.db), brought up to date by `indexing` and
searched with FTS5 and vectors by `searching`. The model
reaches it through the `search_documents` tool (`tools.documents`). Qt-free.
"""
