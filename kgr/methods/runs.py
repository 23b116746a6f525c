"""Run storage: the project's `records` (one retrieval record per run and question) and `plans` tables, their DDL and
every query on them, for the runner that writes them and the evaluation, API and benchmarks that read them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgr.project import Project

_RECORDS_DDL = """
CREATE TABLE IF NOT EXISTS records (
    run VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    record JSON NOT NULL,
    PRIMARY KEY (run, id)
)
"""

_PLANS_DDL = """
CREATE TABLE IF NOT EXISTS plans (
    method VARCHAR NOT NULL,
    key VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    plan JSON NOT NULL,
    PRIMARY KEY (method, key, id)
)
"""


# -- records ----------------------------------------------------------------------------------------------------------
def create_records_table(project: "Project") -> None:
    """Create the records table if the project has none yet."""
    project.db.execute(_RECORDS_DDL)


def has_records(project: "Project") -> bool:
    """Tell whether any run was ever stored in the project (the records table exists)."""
    return project.has_table("records")


def clear_run(project: "Project", run: str) -> None:
    """Delete every record of a run (the table is created if missing)."""
    create_records_table(project)
    project.db.execute("DELETE FROM records WHERE run = ?", [run])


def drop_runs(project: "Project", prefix: str, keep: str) -> int:
    """Delete the records of every run whose name starts with `prefix`, except run `keep`; return how many."""
    query = "FROM records WHERE starts_with(run, ?) AND run <> ?"
    count = project.db.execute(f"SELECT count(*) {query}", [prefix, keep]).fetchone()[0]
    project.db.execute(f"DELETE {query}", [prefix, keep])
    return int(count)


def record_questions(project: "Project", run: str) -> dict[str, str]:
    """The question text of each record a run holds, by question id (the table is created if missing)."""
    create_records_table(project)
    return dict(project.db.execute("SELECT id, json_extract_string(record, '$.question') FROM records WHERE run = ?",
                                   [run]).fetchall())


def save_record(project: "Project", run: str, question_id: str, method: str, line: str) -> None:
    """Store one record's JSON line under (run, question id), replacing an earlier one."""
    project.db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)", [run, question_id, method, line])


def record_line(project: "Project", run: str, question_id: str) -> str:
    """A stored record's JSON line, as written when it was retrieved."""
    return project.db.execute("SELECT record FROM records WHERE run = ? AND id = ?", [run, question_id]).fetchone()[0]


def record_lines(project: "Project", run: str, question_ids: list[str]) -> dict[str, str]:
    """The stored JSON lines of these question ids in a run, by id (ids without a record are left out)."""
    if not question_ids:
        return {}
    return dict(project.db.execute("SELECT id, record FROM records WHERE run = ? AND list_contains(?, id)",
                                   [run, question_ids]).fetchall())


def load_records(project: "Project", run: str) -> list[dict[str, Any]]:
    """The stored records of a run as dicts, in question-id order (none when no run was ever stored)."""
    if not has_records(project):
        return []
    rows = project.db.execute("SELECT record FROM records WHERE run = ? ORDER BY id", [run]).fetchall()
    return [json.loads(row[0]) for row in rows]


def run_names(project: "Project") -> list[str]:
    """The names of the runs the project holds records of, sorted."""
    if not has_records(project):
        return []
    return [row[0] for row in project.db.execute("SELECT DISTINCT run FROM records ORDER BY run").fetchall()]


# -- plans ------------------------------------------------------------------------------------------------------------
def create_plans_table(project: "Project") -> None:
    """Create the plans table if the project has none yet."""
    project.db.execute(_PLANS_DDL)


def plan_questions(project: "Project", method: str, key: str) -> dict[str, str]:
    """The question text of each plan stored for a method under a plan key, by question id (the table is created if
    missing)."""
    create_plans_table(project)
    return dict(project.db.execute("SELECT id, question FROM plans WHERE method = ? AND key = ?",
                                   [method, key]).fetchall())


def clear_plans(project: "Project", method: str, key: str) -> None:
    """Delete a method's plans stored under a plan key (the table is created if missing)."""
    create_plans_table(project)
    project.db.execute("DELETE FROM plans WHERE method = ? AND key = ?", [method, key])


def save_plan(project: "Project", method: str, key: str, question_id: str, question: str,
              plan: dict[str, Any]) -> None:
    """Store one question's plan (JSON-able data) under (method, key, question id), replacing an earlier one."""
    project.db.execute("INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?, ?)",
                       [method, key, question_id, question, json.dumps(plan, default=str)])


def load_plans(project: "Project", method: str, key: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """(question text, plan) of every plan stored for a method under a plan key, by question id."""
    if not project.has_table("plans"):
        return {}
    rows = project.db.execute("SELECT id, question, plan FROM plans WHERE method = ? AND key = ?",
                              [method, key]).fetchall()
    return {qid: (question, json.loads(plan)) for qid, question, plan in rows}
