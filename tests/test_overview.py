"""`kgr.overview.run_overview` on the tiny movie graph: extractive offline, and |T|+1 calls with an LLM backbone
(the scripted OpenAI-compatible server of tests/fake_llm_server.py, through LiteLLM)."""

from __future__ import annotations

import shutil

import pytest

from fake_llm_server import FakeLLMServer, ok
from kgr.overview import read_overview, run_overview
from kgr.project import Project
from test_dotrag import build_tiny_movies

TYPES = ["actor", "director", "genre", "language", "movie", "writer"]


@pytest.fixture
def project_dir(tmp_path_factory, tmp_path):
    """A private writable copy of the tiny movie project (ingested, with its map)."""
    target = tmp_path / "project"
    shutil.copytree(build_tiny_movies(tmp_path_factory), target, ignore=shutil.ignore_patterns(".kgr.lock"))
    return target


def overview_rows(project) -> list[tuple[str, str, str, str]]:
    return project.db.execute("SELECT kind, name, text, source FROM overview ORDER BY kind DESC, name").fetchall()


def test_offline_overview_is_extractive_and_recorded(project_dir):
    with Project.open(project_dir, write=True) as project:
        result = run_overview(project)
        assert result["types"] == len(TYPES) and result["llm_calls"] == 0
        rows = overview_rows(project)
        assert [(kind, name) for kind, name, _, _ in rows] == [("type", t) for t in TYPES] + [("graph", "")]
        assert {source for *_, source in rows} == {"fallback"}
        texts = {name: text for _, name, text, _ in rows}
        assert texts["movie"].startswith("8 entities. Linked by: ")  # listed under its name: not repeated
        assert "- movie: 8 entities. Linked by: " in texts[""]
        for step in ("starred_actors -> actor", "directed_by -> director", "written_by -> writer",
                     "in_language -> language", "has_genre -> genre"):
            assert step in texts["movie"]
        assert "directed_by -> movie" in texts["director"] and "starred_actors -> movie" in texts["actor"]
        graph = texts[""]
        assert "28 entities of 6 types, 45 relationships with 5 relation labels" in graph
        assert all(texts[t] in graph for t in TYPES) and result["text"] == graph == read_overview(project)
        run = project.last_run("overview")
        assert run.counts == {"types": len(TYPES), "llm_calls": 0, "backbone": "offline"}
        assert run.upstream == project.upstream_ids("overview")

        assert run_overview(project) is None  # up to date
        assert project.last_run("overview").run_id == run.run_id
        again = run_overview(project, force=True)
        assert again is not None and again["text"] == graph  # seeded samples: the same overview
        assert project.last_run("overview").run_id != run.run_id
        assert len(overview_rows(project)) == len(TYPES) + 1  # replaced, not appended


def test_overview_with_an_llm_makes_one_call_per_type_plus_one(project_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-overview")

    def reply(body):
        prompt = body["messages"][-1]["content"]
        return ok(f"Summary number {len(server.requests)}.", prompt_tokens=len(prompt) // 4, completion_tokens=4)

    with FakeLLMServer(default=reply) as server:
        overrides = {"backbone.model": "openai/fake", "backbone.api_base": server.url}
        with Project.open(project_dir, write=True, overrides=overrides) as project:
            result = run_overview(project)
            assert len(server.requests) == len(TYPES) + 1 and result["llm_calls"] == len(TYPES) + 1
            rows = overview_rows(project)
            # One request per type in type order, then the synthesis.
            for i, (kind, name, text, source) in enumerate(rows[:-1]):
                assert (kind, name, source) == ("type", TYPES[i], "llm")
                assert text == f"Summary number {i + 1}."
                assert f"{TYPES[i]} (" in server.requests[i]["messages"][-1]["content"]
            kind, name, text, source = rows[-1]
            assert (kind, text, source) == ("graph", f"Summary number {len(TYPES) + 1}.", "llm")
            synthesis_prompt = server.requests[-1]["messages"][-1]["content"]
            assert all(f"Summary number {i + 1}." in synthesis_prompt for i in range(len(TYPES)))
            assert read_overview(project) == text
            assert project.last_run("overview").counts["backbone"] == "openai/fake"
            calls = project.db.execute("SELECT stage, purpose, cache_hit FROM llm_calls ORDER BY created_at").fetchall()
            assert [p for _, p, _ in calls] == ["overview_type"] * len(TYPES) + ["overview_graph"]
            assert {s for s, _, _ in calls} == {"overview"}

            forced = run_overview(project, force=True)  # redone from the response cache: no new request
            assert len(server.requests) == len(TYPES) + 1 and forced["text"] == text
            assert {source for *_, source in overview_rows(project)} == {"cache"}
