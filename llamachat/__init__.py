"""llamachat: a native desktop chat for local models served by llama.cpp's router.

The package is layered: the core modules (config, db, prompts, skills, search,
backend, models, providers, server) are Qt-free and importable from a script;
`llamachat.ui` is the PySide6 layer on top of them.
"""

__version__ = "0.1.0"
