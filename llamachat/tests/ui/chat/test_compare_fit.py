"""The tests of `llamachat.ui.chat.compare_fit`."""

from __future__ import annotations

import pytest

from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.tests.support import make_llama_chat
from llamachat.ui.chat.compare_fit import CompareFit


@pytest.fixture
def router():
    """A scripted router: a roomy model, a small one, and one it has not loaded."""

    models = [
        Model("test-model", "loaded"),
        Model("alpha", "loaded"),
        Model("tiny", "loaded", n_ctx=1024),
        Model("smol", "unloaded", args=("--ctx-size", "8192")),
    ]
    with ScriptedRouter(models) as scripted:
        yield scripted


class TestCompareFit:
    """A comparison's request measured against each picked model's context."""

    def test_each_model_counts_the_request_and_says_whether_it_fits(
        self, conversation, router, qtbot
    ) -> None:
        """Each model's server counts the request (its own tokenizer) against its own
        context: the small one does not fit; one not loaded is estimated, never loaded."""

        chat, history = conversation()
        chat.open_session(make_llama_chat(history))
        fit = CompareFit(chat.builder, chat.context.context_size)
        with qtbot.waitSignal(fit.measured, timeout=15000) as measured:
            fit.measure("And alpacas?", ["alpha", "tiny", "smol"])
        alpha, tiny, smol = measured.args[0]
        assert (alpha.model, alpha.n_ctx, alpha.exact, alpha.fits()) == ("alpha", 4096, True, True)
        assert alpha.tokens > 1000 and "of 4,096 tokens" in alpha.text()
        assert (tiny.n_ctx, tiny.fits()) == (1024, False)
        assert "tiny: does not fit" in tiny.text()
        assert (smol.n_ctx, smol.exact, smol.fits()) == (8192, False, True)
        assert smol.text().startswith("smol: ~")
        assert router.status("smol") == "unloaded"
        counted = {r.json.get("model") for r in router.requests if r.path == "/tokenize"}
        assert {"alpha", "tiny"} <= counted
