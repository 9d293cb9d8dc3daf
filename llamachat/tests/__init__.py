"""llamachat's tests, one module beside the mirror of each module it tests.

`llamachat/tests/ui/chat/test_warmup.py` tests `llamachat/ui/chat/warmup.py`. The fixtures
every test shares are in `plugin` (pyproject's addopts load it, for `test_llamachat.py`
at the top too), those of one area in its `conftest.py`, the helpers in `support`.
"""
