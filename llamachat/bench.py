"""``python -m llamachat.bench [--smoke] [--json] [--model GGUF]``: the benchmark suite.

The suite is a development tool (`llamachat.dev.bench_suite`); this module only keeps the
short command name the README documents.
"""

import sys

from llamachat.dev.bench_suite import main

if __name__ == "__main__":
    sys.exit(main())
