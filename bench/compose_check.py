"""How well a relationship's composed vector stands in for its encoded one (issue #37 item 4): cheap checks.

    python bench/compose_check.py bench/out/projects/wc2014 bench/out/suite/data/wc2014/wc2014-1hop.jsonl

For the project's description-less relationships (text = "subject relation object"), compares the vector the
encoder gives that text (the project's stored vectors) with vectors composed from the three parts' vectors, for
several recipes: mean cosine (and 5th percentile), and recall@10 of a search over composed vectors against the
search over encoded ones for each question's vector (the share of the encoded top 10 the composed top 10 holds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgr.embed import load_vectors, project_encoder  # noqa: E402
from kgr.graph import default_description, relation_words  # noqa: E402
from kgr.project import Project  # noqa: E402


def raw_vectors(encoder, texts: list[str]) -> np.ndarray:
    """Mean-pooled vectors before normalization (the model's modules but its Normalize)."""
    model = encoder.model
    vectors = model.encode(texts, batch_size=256, normalize_embeddings=False, convert_to_numpy=True,
                           show_progress_bar=False, output_value="token_embeddings")
    return np.stack([v.float().numpy().mean(axis=0) for v in vectors])


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("questions", type=Path, nargs="+")
    parser.add_argument("--sample", type=int, default=20000, help="relationships compared at most (seeded)")
    args = parser.parse_args()
    with Project.open(args.project) as project:
        run(project, args)


def run(project, args) -> None:
    db = project.db
    names = [row[0] for row in db.execute("SELECT name FROM entities ORDER BY eid").fetchall()]
    rows = db.execute("SELECT rid, src, dst, relation, description FROM relationships ORDER BY rid").fetchall()
    plain = [(rid, s, d, rel) for rid, s, d, rel, text in rows if text == default_description(names[s], rel, names[d])]
    rng = np.random.default_rng(0)
    if len(plain) > args.sample:
        plain = [plain[i] for i in sorted(rng.choice(len(plain), args.sample, replace=False))]
    gen = project.artifact("ingest", "vectors")
    stored = load_vectors(gen, "relationships")
    encoded = stored[[rid for rid, *_ in plain]]
    encoder = project_encoder(project.config)
    tokenizer = encoder.model.tokenizer
    parts = sorted({names[s] for _, s, _, _ in plain} | {names[d] for _, _, d, _ in plain}
                   | {relation_words(rel) for *_, rel in plain})
    index = {text: i for i, text in enumerate(parts)}
    counts = np.array([len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in parts], dtype=np.float32)
    normalized = encoder.encode(parts)
    raw = raw_vectors(encoder, parts)
    src = np.array([index[names[s]] for _, s, _, _ in plain])
    rel = np.array([index[relation_words(r)] for *_, r in plain])
    dst = np.array([index[names[d]] for _, _, d, _ in plain])

    def compose(vectors: np.ndarray, weighted: bool, extra: float = 0.0) -> np.ndarray:
        w = counts + extra if weighted else np.ones_like(counts)
        total = sum(vectors[p] * w[p][:, None] for p in (src, rel, dst))
        return unit(total)

    recipes = {"normalized, token-weighted": compose(normalized, True), "normalized, equal": compose(normalized, False),
               "raw, token-weighted": compose(raw, True), "raw, equal": compose(raw, False),
               "raw, weighted by tokens + 2": compose(raw, True, 2.0)}
    questions = [json.loads(line)["question"] for path in args.questions for line in path.open() if line.strip()]
    queries = encoder.encode(questions)
    truth = np.argsort(-(queries @ encoded.T), axis=1)[:, :10]
    print(f"{args.project.name}: {len(plain):,} description-less relationships compared, {len(parts):,} parts, "
          f"{len(questions)} questions")
    for name, composed in recipes.items():
        cosine = np.sum(composed * encoded, axis=1) / np.linalg.norm(encoded, axis=1)
        found = np.argsort(-(queries @ composed.T), axis=1)[:, :10]
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, found)])
        print(f"  {name:28s} cosine mean {cosine.mean():.3f} p5 {np.percentile(cosine, 5):.3f}  "
              f"recall@10 {recall:.3f}")


if __name__ == "__main__":
    main()
