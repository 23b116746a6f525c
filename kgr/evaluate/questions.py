"""Question sets: MetaQA vanilla files and generic JSONL, loaded into `Question` records."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from kgr.errors import InputError, UsageError
from kgr.lexicon import MENTION

FORMATS = ("metaqa", "jsonl")

_HOP_NAME = re.compile(r"(?:^|[^0-9a-z])(\d+)-?hops?(?:$|[^a-z])", re.IGNORECASE)


@dataclass
class Question:
    """One question: anchor (topic) entities, answer entity names, hop count and gold passage titles."""

    id: str
    question: str
    anchors: list[str]
    answers: list[str]
    hops: int | None = None
    passages: list[str] = field(default_factory=list)
    qtype: str | None = None


def load_questions(
    path: str | Path,
    fmt: str | None = None,
    hops: int | None = None,
    qtype_path: str | Path | None = None,
) -> list[Question]:
    """Load a question file, detecting the format (`metaqa` or `jsonl`) when `fmt` is None."""
    path = Path(path)
    lines = _read_lines(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "has no questions (the file is empty or blank)")
    fmt = fmt or _detect_format(path, lines)
    if fmt == "metaqa":
        return load_metaqa(path, hops=hops, qtype_path=qtype_path, lines=lines)
    if fmt == "jsonl":
        if qtype_path is not None:
            raise InputError(qtype_path, "a qtype file only applies to MetaQA questions; JSONL carries `qtype`")
        return load_jsonl(path, hops=hops, lines=lines)
    raise InputError(path, f"unknown question format {fmt!r} (expected one of {', '.join(FORMATS)})")


def load_metaqa(
    path: str | Path,
    hops: int | None = None,
    qtype_path: str | Path | None = None,
    lines: list[str] | None = None,
) -> list[Question]:
    """Load MetaQA vanilla lines `question with [topic]<TAB>ans1|ans2`; ids come from the question text.

    Every line is a question. MetaQA repeats a text when two entities share a name ("who acted in the movie
    [Eden]" with two different casts), so the n-th line with an already seen text gets the id suffix `-n`.
    """
    path = Path(path)
    lines = _read_lines(path) if lines is None else lines
    hops = hops if hops is not None else hops_from_path(path)
    # Trailing blank lines are not questions, so they need no qtype line.
    n_lines = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
    qtypes = _read_qtypes(Path(qtype_path), n_lines) if qtype_path is not None else None
    questions = []
    occurrences: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        text, tab, answer_text = line.partition("\t")
        if not tab:
            raise InputError(path, "expected `question<TAB>answer1|answer2`", lineno)
        anchors = [a.strip() for a in MENTION.findall(text)]
        if not anchors or not all(anchors):
            raise InputError(path, "question has no [bracketed] topic entity", lineno)
        answers = _dedupe(a.strip() for a in answer_text.split("|"))
        if not answers:
            raise InputError(path, "question has no answers", lineno)
        # Methods see the question as MetaQA distributes it: the brackets mark an entity mention.
        plain = " ".join(text.split())
        qid = question_id(plain)
        occurrences[qid] = occurrences.get(qid, 0) + 1
        if occurrences[qid] > 1:
            qid = f"{qid}-{occurrences[qid]}"
        questions.append(
            Question(
                id=qid,
                question=plain,
                anchors=_dedupe(anchors),
                answers=answers,
                hops=hops,
                qtype=qtypes[lineno - 1] if qtypes is not None else None,
            )
        )
    return questions


def load_jsonl(path: str | Path, hops: int | None = None, lines: list[str] | None = None) -> list[Question]:
    """Load JSONL objects with `id`, `question`, `anchors`, `answers`, `hops`, optional `passages` and `qtype`.

    The hop count is `hops` when given, else the line's `hops`, else the one named by the path.
    """
    path = Path(path)
    lines = _read_lines(path) if lines is None else lines
    path_hops = hops_from_path(path)
    questions: list[Question] = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"invalid JSON: {exc.msg}", lineno) from None
        if not isinstance(obj, dict):
            raise InputError(path, "expected a JSON object", lineno)
        q = _question_from_json(obj, hops, path_hops, lambda message: InputError(path, message, lineno))
        if q.id in seen:
            raise InputError(path, f"duplicate question id {q.id!r}", lineno)
        seen.add(q.id)
        questions.append(q)
    return questions


def load_question_sets(paths: list[Path], hops: list[int] | None = None) -> list[tuple[str, list[Question]]]:
    """Load one labelled split per file; `hops` gives one hop count for all files or one per file.

    A split is named `N-hop` after its hop count (given, else read from the path), else after the file's stem. A
    file whose questions carry several hop counts (JSONL `hops`), with no hop count given, is split by hop count, as
    separate files are: `NAME (N-hop)` per count, and `NAME (hops not given)` for its questions without one.
    """
    hops = list(hops or [])
    if len(hops) not in (0, 1, len(paths)):
        raise UsageError(f"--hops: give one hop count for all {len(paths)} question files or one per file, "
                         f"not {len(hops)}")
    per_file = hops * len(paths) if len(hops) == 1 else hops or [None] * len(paths)
    sets = []
    for path, given in zip(paths, per_file):
        questions = load_questions(path, hops=given)
        by_hops = split_by_hops(questions)
        if given is None and len([count for count in by_hops if count is not None]) > 1:
            sets += [(f"{Path(path).name} ({f'{count}-hop' if count is not None else 'hops not given'})", split)
                     for count, split in by_hops.items()]
            continue
        split_hops = given if given is not None else hops_from_path(path)
        label = f"{split_hops}-hop" if split_hops else Path(path).stem
        sets.append((label, questions))
    return sets


def split_by_hops(questions: list[Question]) -> dict[int | None, list[Question]]:
    """Questions grouped by hop count, counts in increasing order and questions without one last."""
    groups: dict[int | None, list[Question]] = {}
    for question in questions:
        groups.setdefault(question.hops, []).append(question)
    return dict(sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0)))


def question_id(text: str) -> str:
    """A MetaQA question's id: a short hash of its whitespace-collapsed text, so it names the question itself."""
    digest = hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()
    return f"metaqa-{digest[:12]}"


def hops_from_path(path: str | Path) -> int | None:
    """Return the hop count named by a path component such as `2-hop` (MetaQA's layout) or `qa_2hop.txt`."""
    for part in reversed(Path(path).parts):
        match = _HOP_NAME.search(part)
        if match:
            return int(match.group(1))
    return None


def sample(questions: list[Question], limit: int | None, seed: int = 0) -> list[Question]:
    """Pick `limit` questions reproducibly (independent of input order), returned sorted by id."""
    ordered = sorted(questions, key=lambda q: q.id)
    if limit is None or limit >= len(ordered):
        return ordered
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    return sorted(random.Random(seed).sample(ordered, limit), key=lambda q: q.id)


def _question_from_json(obj: dict, hops: int | None, path_hops: int | None, error) -> Question:
    """Validate one JSONL object into a Question; `error(message)` builds the located InputError."""
    qid = obj.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
        raise error("`id` must be a non-empty string or integer")
    text = obj.get("question")
    if not isinstance(text, str) or not text.strip():
        raise error("`question` must be a non-empty string")
    anchors = _string_list(obj.get("anchors", []), "anchors", error)
    answers = _string_list(obj.get("answers"), "answers", error)
    if not answers:
        raise error("`answers` must list at least one answer")
    passages = _string_list(obj.get("passages", []), "passages", error)
    line_hops = obj.get("hops")
    if line_hops is not None and (isinstance(line_hops, bool) or not isinstance(line_hops, int) or line_hops < 0):
        raise error("`hops` must be a non-negative integer or null")
    qtype = obj.get("qtype")
    if qtype is not None and not isinstance(qtype, str):
        raise error("`qtype` must be a string or null")
    return Question(
        id=str(qid),
        question=text.strip(),
        anchors=anchors,
        answers=answers,
        hops=next((h for h in (hops, line_hops, path_hops) if h is not None), None),
        passages=passages,
        qtype=qtype,
    )


def _string_list(value, name: str, error) -> list[str]:
    """Return a de-duplicated list of stripped strings; a lone string counts as a one-item list."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise error(f"`{name}` must be a list of strings")
    return _dedupe(v.strip() for v in value)


def _dedupe(items) -> list[str]:
    """Drop empty strings and repeats, keeping first-seen order."""
    return list(dict.fromkeys(i for i in items if i))


def _read_lines(path: Path) -> list[str]:
    """Read a UTF-8 text file as lines, reporting a missing or undecodable file as InputError."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, expected a question file") from None
    except UnicodeDecodeError:
        raise InputError(path, "is not UTF-8 text") from None


def _read_qtypes(path: Path, n_lines: int) -> list[str]:
    """Read a MetaQA qtype file, which must have one line per line of the question file."""
    qtypes = _read_lines(path)
    while qtypes and not qtypes[-1].strip():
        qtypes.pop()
    if len(qtypes) < n_lines:
        raise InputError(path, f"has {len(qtypes)} lines but the question file has {n_lines}")
    if len(qtypes) > n_lines:
        raise InputError(path, f"has more lines than the question file ({n_lines})", n_lines + 1)
    return [q.strip() for q in qtypes]


def _detect_format(path: Path, lines: list[str]) -> str:
    """Guess the format from the suffix, else from whether the first non-blank line is a JSON object."""
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    first = next((line.strip() for line in lines if line.strip()), "")
    return "jsonl" if first.startswith("{") else "metaqa"
