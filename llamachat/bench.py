"""``python -m llamachat.bench [--smoke] [--json] [--model GGUF]``: the benchmark suite.

The suite drives the real window, so it lives in the GUI layer (`llamachat.ui.bench`);
this module only gives it the short command name.
"""

import sys

from .ui.bench import main

if __name__ == "__main__":
    sys.exit(main())
