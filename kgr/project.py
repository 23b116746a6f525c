"""The project directory: config, DuckDB tables, LanceDB vectors, stage manifest, lock and generations."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from kgr import __version__
from kgr.config import CONFIG_FILE, Config, load_config, render_toml
from kgr.errors import KgrError, MissingStageError, ProjectBusyError, StaleStageError

DB_FILE = "kgr.duckdb"
LOCK_FILE = ".kgr.lock"
VECTORS_DIR = "vectors"
REACH_DIR = "reach"

# Which earlier stages each stage reads; a stage is stale when one of these ran again after it.
STAGE_INPUTS: dict[str, tuple[str, ...]] = {
    "ingest": (),
    "reach": ("ingest",),
    "overview": ("ingest",),
    "plan": ("ingest", "reach", "overview"),
    "retrieve": ("ingest", "reach"),
}

# Which config sections each stage's results depend on.
STAGE_CONFIG: dict[str, tuple[str, ...]] = {
    "ingest": ("embedding",),
    "reach": ("reach",),
    "overview": ("overview", "backbone"),
}
# Settings that change how fast a stage runs, never what it produces.
RUNTIME_ONLY: dict[str, tuple[str, ...]] = {"embedding": ("threads",)}
# Stages a later stage may use but does not require (their absence is an ablation, not an error).
OPTIONAL_INPUTS = {"overview"}

_MANIFEST_DDL = """
CREATE TABLE IF NOT EXISTS manifest (
    run_id VARCHAR PRIMARY KEY,
    stage VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    duration_s DOUBLE NOT NULL,
    kgr_version VARCHAR NOT NULL,
    config_fingerprint VARCHAR NOT NULL,
    input_fingerprint VARCHAR NOT NULL,
    upstream JSON NOT NULL,
    counts JSON NOT NULL,
    artifacts JSON NOT NULL
)
"""


def fingerprint(value: Any) -> str:
    """A short stable hash of any JSON-able value."""
    blob = json.dumps(value, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def file_fingerprint(paths: list[Path]) -> str:
    """Hash of the names, sizes and contents of input files."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.name).encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


@dataclass
class StageRun:
    """One row of the stage manifest."""

    run_id: str
    stage: str
    started_at: datetime
    duration_s: float
    kgr_version: str
    config_fingerprint: str
    input_fingerprint: str
    upstream: dict[str, str]
    counts: dict[str, Any]
    artifacts: dict[str, str]


class Project:
    """A kgr project directory; open it with `Project.open(...)` as a context manager."""

    def __init__(self, root: Path, config: Config, writable: bool):
        self.root = root
        self.config = config
        self.writable = writable
        self._lock_handle = None
        self._db = None

    # -- opening -----------------------------------------------------------------------------------------------
    @classmethod
    def init(cls, root: str | Path, overrides: Mapping[str, Any] | None = None) -> Path:
        """Create the directory and its kgr.toml (keeping an existing one); return the config path."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise KgrError(f"{root}: exists and is not a directory")
        path = root / CONFIG_FILE
        if not path.exists():
            # Checked before anything is created: a bad setting (ConfigError, a usage error) leaves no directory.
            config = load_config(None, overrides, environ={})
            root.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".toml.tmp")
            tmp.write_text(render_toml(config), encoding="utf-8")
            os.replace(tmp, path)
        return path

    @classmethod
    @contextmanager
    def open(
        cls,
        root: str | Path,
        *,
        write: bool = False,
        create: bool = False,
        overrides: Mapping[str, Any] | None = None,
    ) -> Iterator["Project"]:
        """Open a project, holding its lock (exclusive to write, shared to read) until exit."""
        root = Path(root)
        if create:
            cls.init(root, overrides)
        elif not (root / CONFIG_FILE).exists():
            raise KgrError(f"{root}: not a kgr project (no {CONFIG_FILE}); run `kgr init {root}` or `kgr ingest` first")
        config = load_config(root, overrides)  # ConfigError: exit 2 for a flag or variable, 3 for kgr.toml
        project = cls(root, config, write)
        project._acquire_lock()
        try:
            yield project
        finally:
            project.close()

    def _acquire_lock(self) -> None:
        path = self.root / LOCK_FILE
        handle = open(path, "a+")
        mode = fcntl.LOCK_EX if self.writable else fcntl.LOCK_SH
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ProjectBusyError(f"{self.root}: project is busy ({holder} is writing it); try again when it finishes")
        if self.writable:
            handle.seek(0)
            handle.truncate()
            handle.write(f"kgr pid {os.getpid()}")
            handle.flush()
        self._lock_handle = handle

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock_handle is not None:
            fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # -- storage handles ---------------------------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        return self.root / DB_FILE

    @property
    def db(self):
        """The DuckDB connection (read-only unless the project was opened to write)."""
        if self._db is None:
            import duckdb

            if not self.writable and not self.db_path.exists():
                raise MissingStageError(f"{self.root}: nothing ingested yet; run `kgr ingest {self.root} ...`")
            try:
                self._db = duckdb.connect(str(self.db_path), read_only=not self.writable)
            except duckdb.IOException as exc:
                if "lock" in str(exc).lower():
                    raise ProjectBusyError(f"{self.root}: project is busy (its database is open in another process)") from None
                raise
            if self.writable:
                self._db.execute(_MANIFEST_DDL)
        return self._db

    def has_table(self, name: str) -> bool:
        row = self.db.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
        ).fetchone()
        return bool(row and row[0])

    # -- generations of file artifacts ---------------------------------------------------------------------------
    def new_generation(self, kind: str) -> Path:
        """A fresh, empty folder for a stage's file artifacts; it becomes current only when the stage commits."""
        path = self.root / kind / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    def artifact(self, stage: str, name: str) -> Path:
        """The current folder of a stage's file artifact (as recorded in the manifest)."""
        run = self.require(stage)
        if name not in run.artifacts:
            raise StaleStageError(f"{self.root}: stage {stage} recorded no {name!r}; rerun `kgr {stage} {self.root} --force`")
        return self.root / run.artifacts[name]

    def generations(self, kind: str) -> list[Path]:
        folder = self.root / kind
        return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []

    def prune_generations(self, kind: str, keep: Path) -> None:
        """Remove a kind's folders other than the current one (left by earlier runs or killed ones)."""
        for path in self.generations(kind):
            if path.resolve() != keep.resolve():
                shutil.rmtree(path, ignore_errors=True)

    # -- manifest ----------------------------------------------------------------------------------------------
    def config_fingerprint(self, stage: str) -> str:
        sections = {}
        for name in STAGE_CONFIG.get(stage, ()):
            ignored = RUNTIME_ONLY.get(name, ())
            sections[name] = {k: v for k, v in self.config.section(name).items() if k not in ignored}
        return fingerprint(sections)

    def last_run(self, stage: str) -> StageRun | None:
        if not self.db_path.exists() or not self.has_table("manifest"):
            return None
        row = self.db.execute(
            "SELECT * FROM manifest WHERE stage = ? ORDER BY started_at DESC LIMIT 1", [stage]
        ).fetchone()
        if row is None:
            return None
        values = list(row)
        for index in (7, 8, 9):
            values[index] = json.loads(values[index]) if isinstance(values[index], str) else values[index]
        return StageRun(*values)

    def runs(self) -> list[StageRun]:
        """The latest run of every stage, in pipeline order."""
        return [run for stage in STAGE_INPUTS if (run := self.last_run(stage)) is not None]

    def upstream_ids(self, stage: str) -> dict[str, str]:
        """The run ids of the stages `stage` reads, as they are now (missing ones omitted)."""
        ids = {}
        for name in STAGE_INPUTS.get(stage, ()):
            run = self.last_run(name)
            if run is not None:
                ids[name] = run.run_id
        return ids

    def require(self, stage: str) -> StageRun:
        """The stage's latest run, refusing if it never ran or its inputs changed since."""
        run = self.last_run(stage)
        if run is None:
            raise MissingStageError(f"{self.root}: stage {stage} has not run; run `kgr {stage} {self.root}` first")
        stale = self.stale_reason(stage, run)
        if stale:
            raise StaleStageError(f"{self.root}: stage {stage} is stale ({stale}); rerun `kgr {stage} {self.root}`")
        return run

    def stale_reason(self, stage: str, run: StageRun) -> str | None:
        """Why a recorded run no longer matches the project, or None when it is current."""
        for name, run_id in run.upstream.items():
            current = self.last_run(name)
            if current is None or current.run_id != run_id:
                return f"{name} ran again since"
        return None

    def check_inputs(self, stage: str) -> dict[str, str]:
        """Refuse to run `stage` on missing or stale inputs; return the upstream run ids to record."""
        for name in STAGE_INPUTS.get(stage, ()):
            if name in OPTIONAL_INPUTS and self.last_run(name) is None:
                continue  # plans without an overview are the paper's "no overview" ablation
            self.require(name)
        return self.upstream_ids(stage)

    def is_current(self, stage: str, input_fingerprint: str) -> bool:
        """True when the stage last ran with these inputs, this config and up-to-date upstream stages."""
        run = self.last_run(stage)
        return (
            run is not None
            and run.input_fingerprint == input_fingerprint
            and run.config_fingerprint == self.config_fingerprint(stage)
            and run.upstream == self.upstream_ids(stage)
        )

    def record_stage(
        self,
        stage: str,
        *,
        started: float,
        input_fingerprint: str,
        upstream: dict[str, str],
        counts: dict[str, Any],
        artifacts: dict[str, Path] | None = None,
    ) -> StageRun:
        """Insert the manifest row; call inside the stage's transaction so both commit together."""
        relative = {name: str(path.relative_to(self.root)) for name, path in (artifacts or {}).items()}
        run = StageRun(
            run_id=uuid.uuid4().hex,
            stage=stage,
            started_at=datetime.fromtimestamp(started, tz=timezone.utc),
            duration_s=round(time.time() - started, 3),
            kgr_version=__version__,
            config_fingerprint=self.config_fingerprint(stage),
            input_fingerprint=input_fingerprint,
            upstream=upstream,
            counts=counts,
            artifacts=relative,
        )
        self.db.execute(
            "INSERT INTO manifest VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                run.run_id, run.stage, run.started_at, run.duration_s, run.kgr_version, run.config_fingerprint,
                run.input_fingerprint, json.dumps(run.upstream), json.dumps(counts, default=str), json.dumps(relative),
            ],
        )
        return run

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One DuckDB transaction: everything inside commits together or not at all."""
        db = self.db
        db.execute("BEGIN TRANSACTION")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- sizes -------------------------------------------------------------------------------------------------
    def disk_usage(self) -> dict[str, int]:
        """Bytes on disk of the database, the vectors and the reachability map."""
        def size(path: Path) -> int:
            if path.is_file():
                return path.stat().st_size
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0

        return {
            "database": size(self.db_path) + size(self.db_path.with_suffix(".duckdb.wal")),
            "vectors": size(self.root / VECTORS_DIR),
            "reach": size(self.root / REACH_DIR),
        }
