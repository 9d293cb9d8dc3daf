"""The tests of `llamachat.history.projects`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat.history.store import History, HistoryError


class TestHistoryProjects:
    """Projects: chats grouped with their defaults, carried by name in exports."""

    def test_projects_group_chats_keep_defaults_and_travel_by_name_in_exports(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        work = history.projects.create("  Work   notes ")
        assert [p["name"] for p in history.projects.listed()] == ["Work notes"]
        with pytest.raises(HistoryError, match="already a project"):
            history.projects.create("work NOTES")
        history.projects.update(
            work,
            prompt_name="Terse",
            model="qwen",
            skills=["pdf"],
            params={"temperature": 0.2},
            collapsed=True,
        )
        with pytest.raises(HistoryError, match="temperature"):
            history.projects.update(work, params={"temperature": "hot"})
        project = history.projects.get(work)
        assert project is not None
        assert (project["prompt_name"], project["model"], project["skills"]) == (
            "Terse",
            "qwen",
            ["pdf"],
        )
        assert project["params"] == {"temperature": 0.2} and project["collapsed"] is True
        loose = history.create_session("chat")
        inside = history.create_session("chat", "qwen", project_id=work)
        history.add_message(inside, "user", "quarterly figures")
        assert [s["id"] for s in history.list_sessions(project=work)] == [inside]
        assert [s["id"] for s in history.list_sessions(project=None)] == [loose]
        assert history.count_sessions(project=work) == 1 and history.count_sessions() == 2
        forked = history.fork(inside, history.messages(inside)[0]["id"])
        assert history.get_session(forked)["project_id"] == work

        exported = history.export_json(inside)
        assert exported["session"]["project"] == "Work notes"
        assert "project_id" not in exported["session"]
        other = History(tmp_path / "other.db")
        copy = other.import_json(exported)
        (made,) = other.projects.listed()
        assert made["name"] == "Work notes" and other.get_session(copy)["project_id"] == made["id"]
        assert other.export_json(copy) == exported
        # A second import joins the project of that name instead of making another.
        assert other.get_session(other.import_json(exported))["project_id"] == made["id"]
        bad = {**exported, "session": {**exported["session"], "project": 5}}
        with pytest.raises(HistoryError, match="session.project"):
            other.import_json(bad)
        assert len(other.projects.listed()) == 1 and other.count_sessions() == 2

        history.projects.delete(work)
        assert history.projects.listed() == [] and history.get_session(inside)["project_id"] is None
        assert history.count_sessions(project=None) == 3
        history.close()
        other.close()
