"""`kgr.config`: precedence flag > environment > kgr.toml > default, errors naming their origin, `kgr init`.

The CLI tests read the effective config back from what a real command did (`kgr reach --json` reports max_hops,
the overview stage records its backbone) on a private copy of the shared MetaQA project.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib

import pytest
import tomli_w

from kgr.config import (CONFIG_FILE, Config, ConfigError, ConfigFileError, RetiredSettingWarning, ValueRange,
                        load_config)
from kgr.errors import ExitStatus
from kgr.project import Project


def write_toml(root, table: dict, drop: tuple[str, ...] = ()) -> None:
    """Merge `table` ({section: {key: value}}) into the project's kgr.toml, first dropping the `drop` sections."""
    path = root / CONFIG_FILE
    current = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for section in drop:
        current.pop(section, None)
    for section, values in table.items():
        current.setdefault(section, {}).update(values)
    path.write_text(tomli_w.dumps(current), encoding="utf-8")


@pytest.fixture(scope="module")
def project(metaqa_project, copy_project):
    return copy_project(metaqa_project, "config")


@pytest.fixture(autouse=True)
def no_kgr_environment(monkeypatch):
    """Tests set KGR_* variables explicitly; none may leak in from the caller's shell."""
    import os

    for name in [n for n in os.environ if n.startswith("KGR_")]:
        monkeypatch.delenv(name)


# -- the library ----------------------------------------------------------------------------------------------------
def test_precedence_default_file_environment_override(tmp_path):
    assert load_config(tmp_path, environ={}).reach.max_hops == 3  # default, no kgr.toml
    write_toml(tmp_path, {"reach": {"max_hops": 2}, "dotrag": {"seeds": 11}})
    assert load_config(tmp_path, environ={}).reach.max_hops == 2
    env = {"KGR_REACH__MAX_HOPS": "1", "KGR_BACKBONE__CACHE": "off"}
    config = load_config(tmp_path, environ=env)
    assert (config.reach.max_hops, config.dotrag.seeds, config.backbone.cache) == (1, 11, False)
    config = load_config(tmp_path, {"reach.max_hops": "4", "dotrag.seeds": None}, environ=env)
    assert (config.reach.max_hops, config.dotrag.seeds) == (4, 11)  # a None override means "flag not given"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("file", "kgr.toml:2: reach.max_hops: 'many' is not a valid int"),
        ("env", "environment KGR_REACH__MAX_HOPS: 'many' is not a valid int"),
        ("flag", "option reach.max_hops: 'many' is not a valid int"),
    ],
)
def test_bad_value_names_its_origin(tmp_path, where, expected):
    environ, overrides = {}, {}
    if where == "file":
        write_toml(tmp_path, {"reach": {"max_hops": "many"}})
    elif where == "env":
        environ["KGR_REACH__MAX_HOPS"] = "many"
    else:
        overrides["reach.max_hops"] = "many"
    with pytest.raises(ConfigError, match=expected):
        load_config(tmp_path, overrides, environ=environ)


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("dotrag.search_top", "-5", "-5 is out of range (must be >= 1)"),
        ("dotrag.min_similarity", "7", "7.0 is out of range (must be between -1 and 1)"),
        ("dotrag.max_hops", "0", "0 is out of range (must be >= 1)"),
        ("backbone.timeout", "0", "0.0 is out of range (must be > 0)"),
        ("csrag.temperature", "nan", "nan is out of range (must be > 0)"),
        ("reach.max_hops", "2.5", "'2.5' is not a valid int"),
        ("embedding.precision", "fp16", "'fp16' is not one of auto, float32, bfloat16"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_setting(tmp_path, setting, value, expected):
    with pytest.raises(ConfigError, match=re.escape(f"option {setting}: {expected}")) as refused:
        load_config(tmp_path, {setting: value}, environ={})
    assert refused.value.status == ExitStatus.USAGE
    variable = f"KGR_{setting.replace('.', '__').upper()}"
    with pytest.raises(ConfigError, match=re.escape(f"environment {variable}: {expected}")):
        load_config(tmp_path, environ={variable: value})


def test_every_numeric_setting_has_a_range_that_holds_its_default():
    for section in dataclasses.fields(Config):
        for spec in dataclasses.fields(section.default_factory()):
            if spec.type in ("int", "float"):
                valid = spec.metadata.get("range")
                assert isinstance(valid, ValueRange), f"{section.name}.{spec.name} has no range"
                assert spec.default in valid, f"{section.name}.{spec.name}: default outside {valid.describe()}"


# The CS-RAG planner's and passage walk's tunables, once module constants of kgr.methods.csrag.plan, at the values
# those constants had (records stay identical).
CSRAG_TUNABLES = {"max_hops": 3, "hop_margin": 0.30, "hop_floor": 0.20, "global_margin": 0.15,
                  "synonym_similarity": 0.8, "follow_min_edges": 2, "follow_min_share": 0.01, "min_coverage": 0.5,
                  "likely_labels": 2, "prompt_relations": 60, "walk_iterations": 30, "walk_floor": 1e-4}


def test_csrag_tunables_are_settings_with_their_former_values(tmp_path):
    config = load_config(tmp_path, environ={})
    assert {name: getattr(config.csrag, name) for name in CSRAG_TUNABLES} == CSRAG_TUNABLES
    for name, value in CSRAG_TUNABLES.items():
        assert type(getattr(config.csrag, name)) is type(value), name
    environ = {"KGR_CSRAG__HOP_MARGIN": "0.4", "KGR_CSRAG__MAX_HOPS": "2"}
    config = load_config(tmp_path, {"csrag.walk_floor": "0.01"}, environ=environ)
    assert (config.csrag.hop_margin, config.csrag.max_hops, config.csrag.walk_floor) == (0.4, 2, 0.01)
    with pytest.raises(ConfigError, match=re.escape("option csrag.follow_min_share: 2.0 is out of range")):
        load_config(tmp_path, {"csrag.follow_min_share": "2"}, environ={})


def test_a_kgr_toml_written_before_a_setting_existed_loads_with_its_default(tmp_path):
    # Existing projects' kgr.toml files list every setting of their day: the ones added since take their defaults.
    table = Config().to_dict()
    for name in CSRAG_TUNABLES:
        del table["csrag"][name]
    table["csrag"]["variants"] = 4
    (tmp_path / CONFIG_FILE).write_text(tomli_w.dumps(table), encoding="utf-8")
    config = load_config(tmp_path, environ={})
    assert config.csrag.variants == 4
    assert {name: getattr(config.csrag, name) for name in CSRAG_TUNABLES} == CSRAG_TUNABLES
    with Project.open(tmp_path) as project:  # and the project opens
        assert project.config.csrag.hop_margin == 0.30


def test_a_bad_kgr_toml_value_is_bad_input_naming_file_and_line(tmp_path):
    (tmp_path / CONFIG_FILE).write_text('[reach]\nmax_hops = 3\n\n[dotrag]\nsearch_top = -5\n', encoding="utf-8")
    with pytest.raises(ConfigFileError) as refused:
        load_config(tmp_path, environ={})
    assert refused.value.status == ExitStatus.BAD_INPUT
    assert refused.value.message == f"{tmp_path / CONFIG_FILE}:5: dotrag.search_top: -5 is out of range (must be >= 1)"
    (tmp_path / CONFIG_FILE).write_text("[reach]\nmax_hops = 2.5\n", encoding="utf-8")  # not truncated to 2
    with pytest.raises(ConfigFileError, match=re.escape(":2: reach.max_hops: 2.5 is not a valid int")):
        load_config(tmp_path, environ={})
    (tmp_path / CONFIG_FILE).write_text('[backbone]\nmodel = 5\n', encoding="utf-8")
    with pytest.raises(ConfigFileError, match=re.escape(":2: backbone.model: 5 is not a valid str")):
        load_config(tmp_path, environ={})
    (tmp_path / CONFIG_FILE).write_text('[backbone.prices]\n"m" = {input = -1}\n', encoding="utf-8")
    with pytest.raises(ConfigFileError, match="'m' input price -1 is not a non-negative number"):
        load_config(tmp_path, environ={})


def test_unknown_settings_and_bad_types_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="option reach.nope: unknown setting 'reach.nope'"):
        load_config(tmp_path, {"reach.nope": "1"}, environ={})
    with pytest.raises(ConfigError, match="unknown setting 'to_dict.x'"):  # a method of Config, not a section
        load_config(tmp_path, {"to_dict.x": "1"}, environ={})
    with pytest.raises(ConfigError, match="environment KGR_NOSECTION__X: unknown setting"):
        load_config(tmp_path, environ={"KGR_NOSECTION__X": "1"})
    with pytest.raises(ConfigError, match="'maybe' is not a valid bool"):
        load_config(tmp_path, {"dotrag.use_overview": "maybe"}, environ={})
    with pytest.raises(ConfigError, match="expected a table"):
        load_config(tmp_path, {"backbone.prices": "cheap"}, environ={})
    (tmp_path / CONFIG_FILE).write_text("[reach\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=str(tmp_path / CONFIG_FILE)):
        load_config(tmp_path, environ={})


# -- through the CLI ----------------------------------------------------------------------------------------------
def test_init_writes_every_setting_and_keeps_an_existing_file(tmp_path, run_kgr):
    root = tmp_path / "fresh"
    result = run_kgr("init", root, "--set", "dotrag.search_top=20", env={"KGR_DOTRAG__SEEDS": "7"})
    assert result.exit_code == 0, result.stderr
    written = tomllib.loads((root / CONFIG_FILE).read_text(encoding="utf-8"))
    for section in dataclasses.fields(Config):
        keys = {f.name for f in dataclasses.fields(section.default_factory())}
        assert set(written[section.name]) == keys, section.name
    assert written["dotrag"]["search_top"] == 20  # the flag is written
    assert written["dotrag"]["seeds"] == 40  # the environment is not: it stays a per-shell setting
    assert written["reach"]["max_hops"] == 3
    assert {name: written["csrag"][name] for name in CSRAG_TUNABLES} == CSRAG_TUNABLES  # pinned at creation
    before = (root / CONFIG_FILE).read_text(encoding="utf-8")
    assert run_kgr("init", root).exit_code == 0
    assert (root / CONFIG_FILE).read_text(encoding="utf-8") == before
    # Settings for an existing file are refused rather than silently dropped, and the file stays as it was.
    refused = run_kgr("init", root, "--set", "dotrag.search_top=5")
    assert refused.exit_code == 2 and "exists and was kept" in refused.stderr
    assert (root / CONFIG_FILE).read_text(encoding="utf-8") == before


def reach_hops(run_kgr, project, *args, env=None) -> int:
    result = run_kgr("reach", project, "--json", "--force", *args, env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["max_hops"]


def test_cli_precedence_flag_over_environment_over_file_over_default(project, run_kgr):
    write_toml(project, {}, drop=("reach",))
    assert reach_hops(run_kgr, project) == 3  # default (kgr.toml has no [reach] table)
    write_toml(project, {"reach": {"max_hops": 2}})
    assert reach_hops(run_kgr, project) == 2  # kgr.toml
    assert reach_hops(run_kgr, project, env={"KGR_REACH__MAX_HOPS": "1"}) == 1  # environment
    assert reach_hops(run_kgr, project, "--set", "reach.max_hops=3", env={"KGR_REACH__MAX_HOPS": "1"}) == 3  # flag

    # A config change alone makes the stage out of date: no --force needed to rebuild with max_hops 1.
    result = run_kgr("reach", project, "--json", env={"KGR_REACH__MAX_HOPS": "1"})
    assert result.exit_code == 0 and json.loads(result.stdout)["max_hops"] == 1
    result = run_kgr("reach", project, env={"KGR_REACH__MAX_HOPS": "1"})
    assert result.exit_code == 0 and "up to date" in result.stderr


def test_a_retired_setting_is_ignored_with_a_warning_naming_its_line(tmp_path):
    # a kgr.toml written before the offline policy's cue terms went (`kgr init` writes every setting) still loads
    path = tmp_path / CONFIG_FILE
    path.write_text("[offline]\nstep_cost = 0.2\nagent_cost = 0.2\n", encoding="utf-8")
    with pytest.warns(RetiredSettingWarning, match=re.escape(f"{path}:3: offline.agent_cost: no longer a setting")):
        config = load_config(tmp_path, environ={})
    assert config.offline.step_cost == 0.2 and not hasattr(config.offline, "agent_cost")
    with pytest.warns(RetiredSettingWarning, match="environment KGR_OFFLINE__RIGHT_OFFSET: no longer a setting"):
        load_config(environ={"KGR_OFFLINE__RIGHT_OFFSET": "0.5"})
    with pytest.raises(ConfigError, match="unknown setting 'offline.agent_costs'"):  # a typo is still refused
        load_config(overrides={"offline.agent_costs": "0.2"}, environ={})


def test_cli_warns_of_a_retired_setting_in_one_line(metaqa_project, copy_project, run_kgr):
    project = copy_project(metaqa_project, "retired")
    path = project / CONFIG_FILE
    text = path.read_text(encoding="utf-8")
    assert "[offline]\n" in text
    path.write_text(text.replace("[offline]\n", "[offline]\nrole_bonus = 0.05\n", 1), encoding="utf-8")
    result = run_kgr("status", project)
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "role_bonus" in line]
    assert len(warned) == 1 and warned[0].startswith(f"kgr: warning: {path}:"), result.stderr
    assert "offline.role_bonus: no longer a setting, ignored" in warned[0]


def test_cli_named_flag_beats_set_and_environment(project, run_kgr):
    result = run_kgr("overview", project, "--force", "--backbone", "offline", "--set", "backbone.model=random",
                     env={"KGR_BACKBONE__MODEL": "random"})
    assert result.exit_code == 0, result.stderr
    assert "0 backbone calls" in result.stderr
    with Project.open(project) as opened:
        assert opened.last_run("overview").counts["backbone"] == "offline"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--set", "reach.max_hops=abc"], None, "option reach.max_hops: 'abc' is not a valid int"),
        ([], {"KGR_REACH__MAX_HOPS": "abc"}, "environment KGR_REACH__MAX_HOPS: 'abc' is not a valid int"),
        (["--set", "reach.nope=1"], None, "unknown setting 'reach.nope'"),
        (["--set", "max_hops=1"], None, "expected SECTION.KEY=VALUE"),
        (["--set", "reach.max_hops"], None, "expected KEY=VALUE"),
    ],
)
def test_cli_bad_settings_fail_in_one_line(project, run_kgr, args, env, message):
    result = run_kgr("reach", project, *args, env=env)
    assert result.exit_code == ExitStatus.USAGE
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_cli_bad_value_in_kgr_toml_names_the_file(tmp_path, run_kgr):
    root = tmp_path / "badfile"
    root.mkdir()
    (root / CONFIG_FILE).write_text('[reach]\nmax_hops = "many"\n', encoding="utf-8")
    result = run_kgr("status", root)
    assert result.exit_code == ExitStatus.BAD_INPUT
    assert f"{root / CONFIG_FILE}:2: reach.max_hops: 'many' is not a valid int" in result.stderr


def test_pinned_settings_are_the_files_values_away_from_this_versions_defaults(tmp_path, run_kgr):
    from kgr.config import pinned_settings

    root = tmp_path / "p"
    Project.init(root)
    assert pinned_settings(root) == {}  # a new kgr.toml lists every default: nothing pinned away from them
    write_toml(root, {"dotrag": {"fill": 0}, "offline": {"confident_similarity": 0.6}})
    assert pinned_settings(root) == {"dotrag.fill": (0, Config().dotrag.fill),
                                     "offline.confident_similarity": (0.6, Config().offline.confident_similarity)}
    assert pinned_settings(tmp_path / "nowhere") == {}
    # `kgr status` says so, in its table and its JSON (an older version's defaults are kept this way)
    shown = " ".join(run_kgr("status", root, env={"COLUMNS": "200"}).stdout.split())
    assert f"kgr.toml sets, unlike this version's defaults: dotrag.fill = 0 (default {Config().dotrag.fill})" in shown
    report = json.loads(run_kgr("status", root, "--json").stdout)
    assert report["pinned_settings"]["dotrag.fill"] == {"value": 0, "default": Config().dotrag.fill}
