"""The tests of `llamachat.dev.bench_skills`."""

from __future__ import annotations

from llamachat.dev import bench_skills


class TestBenchSkills:
    """The skills benchmark: send, refresh and scan figures."""

    def test_skills_benchmark_reports_send_refresh_and_scan_figures(self) -> None:

        result = bench_skills.run(n_skills=30, repeats=5)

        assert result["n_skills"] == 30 and result["repeats"] == 5
        for key in ("send_ms", "refresh_ms", "tool_message_ms", "cold_scan_ms"):
            assert set(result[key]) == {"median", "p95"}, key
        assert set(result["ops_ms"]) == {
            "names",
            "parse_commands",
            "match_mentions",
            "load",
            "tool_schema",
        }
        assert result["catalog_chars"] > 0
