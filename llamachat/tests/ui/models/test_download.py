"""The tests of `llamachat.ui.models.download`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.tests.support import combo_ids, provider_registry
from llamachat.ui.models.picker import ModelPicker


class TestDownload:
    """Getting a model from Hugging Face through the router, and deleting a downloaded one."""

    def _get_model(self, qtbot, r):
        from llamachat.ui.models.download import GetModelDialog

        registry = provider_registry(r.url)
        picker = ModelPicker(registry, poll_ms=60000)
        qtbot.addWidget(picker)
        qtbot.waitUntil(lambda: picker.watching() and len(r._subscribers) == 1)
        dialog = GetModelDialog(registry, picker)
        qtbot.addWidget(dialog)
        return registry, picker, dialog

    def test_router_get_model_downloads_with_progress_into_the_picker(self, qtbot) -> None:
        from llamachat.dev.scripted_router import Download

        ref = "ggml-org/tiny-GGUF:Q4_K_M"
        plan = Download(size=4_000_000, steps=4, step_delay=0.15)
        with ScriptedRouter([Model("qwen", "loaded")], downloads={ref: plan}) as r:
            registry, picker, dialog = self._get_model(qtbot, r)
            dialog.reference.setText(f"  {ref} ")
            seen: list[int] = []
            dialog.progress.valueChanged.connect(seen.append)
            with qtbot.waitSignal(dialog.downloaded, timeout=10000) as done:
                dialog.download_button.click()
                assert dialog.downloading() and dialog.cancel_button.isVisibleTo(dialog)
            assert done.args == [ref]
            assert [v for v in seen if v > 0] == [25, 50, 75, 100]
            assert "is ready" in dialog.status.text() and not dialog.downloading()
            qtbot.waitUntil(lambda: ref in combo_ids(picker.combo))
            assert [q.json for q in r.requests if q.path == "/models"] == [{"model": ref}]
            picker.shutdown()
            registry.close()

    def test_router_get_model_cancel_stops_the_download(self, qtbot) -> None:
        from llamachat.dev.scripted_router import Download

        ref = "ggml-org/big-GGUF"
        with ScriptedRouter(downloads={ref: Download(steps=50, step_delay=0.05)}) as r:
            registry, picker, dialog = self._get_model(qtbot, r)
            dialog.reference.setText(ref)
            dialog.start()
            qtbot.waitUntil(lambda: dialog.progress.value() > 0, timeout=5000)
            dialog.cancel_button.click()
            qtbot.waitUntil(lambda: not dialog.downloading(), timeout=5000)
            assert dialog.status.text() == f"The download of {ref} was cancelled."
            assert ref not in r.models and ref not in combo_ids(picker.combo)
            assert [q.json for q in r.requests if q.path == "/models/unload"] == [{"model": ref}]
            picker.shutdown()
            registry.close()

    def test_router_get_model_faults_are_said_and_leave_no_model(self, qtbot) -> None:
        from llamachat.dev.scripted_router import Download

        broken = "someone/flaky-GGUF:Q8_0"
        plan = Download(steps=4, step_delay=0.02, fail_at=0.5, error="No space left on device")
        with ScriptedRouter(downloads={broken: plan}) as r:
            registry, picker, dialog = self._get_model(qtbot, r)
            dialog.reference.setText("not a reference")
            dialog.start()
            assert "is not a Hugging Face model reference" in dialog.status.text()
            assert not any(q.path == "/models" and q.method == "POST" for q in r.requests)
            dialog.reference.setText(broken)
            dialog.start()
            qtbot.waitUntil(lambda: not dialog.downloading(), timeout=5000)
            assert dialog.status.text() == (
                f"The download of {broken} failed: No space left on device"
            )
            # llama-server says "finished" for a repository that does not exist.
            dialog.reference.setText("nobody/nothing-GGUF")
            dialog.start()
            qtbot.waitUntil(lambda: not dialog.downloading(), timeout=5000)
            assert "finished without a model nobody/nothing-GGUF" in dialog.status.text()
            assert set(r.models) == {"test-model"}
            picker.shutdown()
            registry.close()

    def test_router_get_model_without_router_support_says_so(self, qtbot) -> None:
        from llamachat.ui.models.download import NO_EVENTS, GetModelDialog

        with ScriptedRouter(events=False) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: not picker.feed.watch.supported)
            dialog = GetModelDialog(registry, picker)
            qtbot.addWidget(dialog)
            dialog.reference.setText("ggml-org/tiny-GGUF")
            dialog.start()
            assert dialog.status.text() == NO_EVENTS and not dialog.downloading()
            picker.shutdown()
            registry.close()
