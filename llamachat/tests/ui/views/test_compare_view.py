"""The tests of `llamachat.ui.views.compare_view`."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox, QPlainTextEdit

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.tests.support import type_message, visible_widget_named, warmups
from llamachat.ui.chat.conversation import ONESHOT, Conversation
from llamachat.ui.views.compare_view import CompareChooser


@pytest.fixture
def router():
    """A scripted router with three loaded models."""

    models = [Model(name, "loaded") for name in ("test-model", "alpha", "<b>beta</b>")]
    with ScriptedRouter(models) as scripted:
        yield scripted


def _choose(qtbot, window, models: list[str], *, blind: bool = False) -> CompareChooser:
    """The chooser `/compare` opened, with `models` checked (and the others not), accepted."""

    qtbot.waitUntil(lambda: bool(window.findChildren(CompareChooser)), timeout=5000)
    chooser = window.findChildren(CompareChooser)[-1]
    for n in range(chooser.model_list.count()):
        item = chooser.model_list.item(n)
        checked = item.text() in models
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
    chooser.blind_box.setChecked(blind)
    chooser.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    return chooser


class TestCompareView:
    """Chat > Compare with… and /compare: columns streaming side by side, and a pick."""

    def test_compare_command_streams_columns_and_continue_keeps_the_pick(
        self, chat_window, router, qtbot
    ) -> None:
        """`/compare question` opens the chooser (the chat's model checked); its columns show
        each answer with its figures, names as plain text, and "Continue with this one"
        makes that answer the chat's current reply."""

        router.script_for("test-model", Reply(content=["First ", "answer."]))
        router.script_for("<b>beta</b>", Reply(content=["Second ", "answer."]))
        window, history = chat_window()
        type_message(qtbot, window, "/compare Which one?")
        qtbot.keyClick(visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: bool(window.findChildren(CompareChooser)), timeout=5000)
        chooser = window.findChildren(CompareChooser)[-1]
        assert chooser.question() == "Which one?"
        assert chooser.models() == ["test-model"]
        ok = chooser.buttons.button(QDialogButtonBox.StandardButton.Ok)
        assert not ok.isEnabled()  # one model is no comparison
        _choose(qtbot, window, ["test-model", "<b>beta</b>"])

        qtbot.waitUntil(lambda: window.compare.view is not None, timeout=5000)
        view = window.compare.view
        qtbot.waitUntil(lambda: not view.comparison.running(), timeout=15000)
        first, second = view.columns
        assert second.name.text() == "<b>beta</b>"
        assert second.name.textFormat() == Qt.TextFormat.PlainText
        assert first.view.content() == "First answer."
        assert second.view.content() == "Second answer."
        qtbot.waitUntil(lambda: "first token" in second.figures.text(), timeout=5000)
        assert "tok" in second.figures.text()
        assert window.composer.is_empty()
        assert not window.is_streaming()

        qtbot.mouseClick(second.continue_button, Qt.MouseButton.LeftButton)
        rows = history.messages(window.chat.session_id)
        assert [(m["role"], m["content"]) for m in rows] == [
            ("user", "Which one?"),
            ("assistant", "Second answer."),
        ]
        assert sorted(rows[-1]["versions"]) == sorted(view.comparison.message_ids)
        shown = window.messages.last_assistant()
        assert shown is not None and shown.content() == "Second answer."

    def test_each_column_shows_what_its_prompt_cost_that_model(
        self, chat_window, router, qtbot
    ) -> None:
        """Under each answer: the prompt's tokens that model read, in how long, and those
        its cache held (llama.cpp's timings); a server giving only `usage`, its tokens."""

        router.script_for(
            "test-model",
            Reply(
                content="Read.",
                timings={"prompt_n": 124, "cache_n": 900, "prompt_ms": 350.0, "predicted_n": 2},
            ),
        )
        router.script_for(
            "alpha",
            Reply(
                content="Priced.",
                timings={},
                usage={"prompt_tokens": 1030, "completion_tokens": 2, "total_tokens": 1032},
            ),
        )
        window, _history = chat_window()
        type_message(qtbot, window, "/compare How much?")
        qtbot.keyClick(visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
        _choose(qtbot, window, ["test-model", "alpha"])
        qtbot.waitUntil(lambda: window.compare.view is not None, timeout=5000)
        view = window.compare.view
        qtbot.waitUntil(lambda: not view.comparison.running(), timeout=15000)
        local, provider = view.columns
        qtbot.waitUntil(lambda: "Prompt" in provider.figures.text(), timeout=5000)
        assert "Prompt 1,024 tokens: 124 read in 0.35 s, 900 cached" in local.figures.text()
        assert "Prompt 1,030 tokens" in provider.figures.text()
        assert "Read: 124 tokens in 0.35 s" in local.figures.toolTip()

    def test_the_chooser_says_whether_each_pick_fits_and_warms_it(
        self, chat_window, router, qtbot
    ) -> None:
        """Picking a model in the chooser measures the request against its context (said
        under the list, plain text) and has it read the chat ahead."""

        window, _history = chat_window(warm_cache=True)
        qtbot.waitUntil(lambda: not window.chat.warmer.busy(), timeout=5000)
        chooser = window.compare.open("Which one?")
        chooser.model_list.item(2).setCheckState(Qt.CheckState.Checked)  # <b>beta</b>
        qtbot.waitUntil(lambda: "<b>beta</b>: " in chooser.fit_label.text(), timeout=10000)
        assert "test-model: " in chooser.fit_label.text()
        assert chooser.fit_label.textFormat() == Qt.TextFormat.PlainText
        qtbot.waitUntil(
            lambda: any(w.json["model"] == "<b>beta</b>" for w in warmups(router)), timeout=10000
        )
        chooser.reject()

    def test_compare_button_beside_send_takes_the_draft(self, chat_window, router, qtbot) -> None:
        """Compare… beside Send opens the chooser with the draft as the question; it hides
        while the comparison streams, as Send does."""

        router.script_for("alpha", Reply(content=["slow"], stall_after=1))
        window, _history = chat_window()
        type_message(qtbot, window, "Draft question")
        button = window.composer.compare_button
        assert button.isVisible()
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        chooser = _choose(qtbot, window, ["test-model", "alpha"])
        assert chooser.question() == "Draft question"
        qtbot.waitUntil(lambda: window.is_streaming(), timeout=5000)
        assert not button.isVisible() and not window.composer.send_button.isVisible()
        assert window.composer.is_empty()
        window.stop()
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert button.isVisible()

    def test_regenerate_of_a_compared_reply_offers_the_same_models(
        self, chat_window, router, qtbot
    ) -> None:
        """Regenerate on a compared reply opens the chooser again with its models checked
        and its question fixed; accepting adds versions of that same reply."""

        window, history = chat_window()
        assert window.chat.comparer.ask("Hi", ["alpha", "<b>beta</b>"]) == "sent"
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=15000)
        reply = window.messages.last_assistant()
        assert reply is not None and reply.message_id is not None
        window.retry(reply.message_id)
        chooser = window.findChildren(CompareChooser)[-1]
        assert chooser.models() == ["alpha", "<b>beta</b>"]
        assert chooser.question() == "Hi" and chooser.question_edit.isReadOnly()
        chooser.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=15000)
        rows = history.messages(window.chat.session_id)
        assert [m["role"] for m in rows] == ["user", "assistant"]
        assert len(rows[-1]["versions"]) == 4
        assert len(router.chat_requests()) == 4

    def test_blind_columns_are_lettered_until_a_pick_and_tabs_when_narrow(
        self, chat_window, router, qtbot
    ) -> None:
        """Blind: the columns say "Model A"/"Model B" (not the names) till one is picked;
        a narrow window shows them as tabs."""

        window, _history = chat_window()
        opened = window.compare.open("Hi")
        _choose(qtbot, window, ["test-model", "alpha"], blind=True)
        assert opened is not None
        qtbot.waitUntil(lambda: window.compare.view is not None, timeout=5000)
        view = window.compare.view
        qtbot.waitUntil(lambda: not view.comparison.running(), timeout=15000)
        assert [c.name.text() for c in view.columns] == ["Model A", "Model B"]
        assert not view.tabbed()
        view.resize(400, 500)
        qtbot.waitUntil(view.tabbed, timeout=5000)
        assert [view.tabs.tabText(i) for i in range(2)] == ["Model A", "Model B"]
        qtbot.mouseClick(view.columns[0].continue_button, Qt.MouseButton.LeftButton)
        assert [view.tabs.tabText(i) for i in range(2)] == ["test-model", "alpha"]
        view.resize(1100, 600)
        qtbot.waitUntil(lambda: not view.tabbed(), timeout=5000)
        assert [c.name.text() for c in view.columns] == ["test-model", "alpha"]

    def test_wins_table_counts_blind_picks_as_plain_text(self, chat_window, router, qtbot) -> None:
        """Chat > Comparison wins… shows, for each pair, how often the row's model was
        picked over the column's; names are item texts (drawn as plain text)."""

        window, history = chat_window()
        history.picks.add("<b>beta</b>", ["alpha"])
        history.picks.add("alpha", ["<b>beta</b>"])
        history.picks.add("alpha", ["<b>beta</b>"])
        dialog = window.compare.show_wins()
        table = dialog.table
        names = [table.verticalHeaderItem(n).text() for n in range(table.rowCount())]
        assert names == ["<b>beta</b>", "alpha"]
        assert table.item(1, 0).text() == "2 of 3"  # alpha over beta
        assert table.item(0, 1).text() == "1 of 3"
        assert table.item(0, 0) is None
        assert not dialog.project_box.isEnabled()  # the new chat is in no project
        dialog.close()


class TestCompareUnload:
    """A pick the router must load, at its `--models-max`, may unload a model in use."""

    @pytest.fixture
    def router(self):
        """A router holding two models at most, both taken; a third it must load."""

        models = [Model("test-model", "loaded"), Model("alpha", "loaded"), Model("smol")]
        with ScriptedRouter(models, models_max=2) as scripted:
            yield scripted

    def test_the_chooser_says_which_model_in_use_a_load_may_unload(
        self, chat_window, router, qtbot
    ) -> None:
        """Comparing the chat's model with one to load, at the limit: the chooser names the
        model the load unloads and the window using it, and offers "Compare anyway";
        picking that model too leaves nothing to unload, and nothing is said."""

        window, _history = chat_window()
        quick = Conversation(window.app, mode=ONESHOT, model="alpha")
        qtbot.waitUntil(lambda: window.model_picker.status("smol") == "unloaded", timeout=5000)
        chooser = window.compare.open("Which one?")
        chooser.model_list.item(2).setCheckState(Qt.CheckState.Checked)  # smol
        qtbot.waitUntil(lambda: chooser.unload_label.isVisibleTo(chooser), timeout=10000)
        assert chooser.unload_label.text() == (
            "Loading smol will unload alpha, used by the quick window."
        )
        ok = chooser.buttons.button(QDialogButtonBox.StandardButton.Ok)
        assert ok.text() == "Compare anyway" and ok.isEnabled()
        chooser.model_list.item(1).setCheckState(Qt.CheckState.Checked)  # alpha
        qtbot.waitUntil(lambda: not chooser.unload_label.isVisibleTo(chooser), timeout=10000)
        assert ok.text() == "Compare"
        chooser.reject()
        quick.close()
