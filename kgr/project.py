"""The project directory: config, DuckDB tables, LanceDB vectors, stage manifest, lock, generations and snapshots.

DuckDB lets one process hold a database file open for writing, and then no other process can open it, not even
read-only. So a writer, once it holds the project's lock and before it changes anything, publishes a read-only copy
of the committed database (`snapshots/<name>.duckdb`, made after a checkpoint and renamed into place), and again
after each stage commits; readers that find the lock taken open the current snapshot instead. A snapshot lists the
file artifacts (vectors/<gen>, reach/<gen>) its manifest refers to, and those are not pruned while a snapshot that a
reader holds open refers to them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
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
from kgr.objectstore import ObjectFolder, location, remove_tree

DB_FILE = "kgr.duckdb"
LOCK_FILE = ".kgr.lock"
PUBLISH_LOCK_FILE = ".kgr.snapshot.lock"  # held exclusively while a writer publishes, shared while a reader picks one
SNAPSHOT_DIR = "snapshots"
CURRENT_SNAPSHOT = "CURRENT"  # the name of the snapshot readers open, replaced atomically
VECTORS_DIR = "vectors"
# With `storage.vectors_uri`, the name of this project's own prefix under it (made at its first ingest): projects that
# share a URI never prune each other's vectors.
STORAGE_ID_FILE = "storage-id"
REACH_DIR = "reach"
# Written when an ingest starts and removed when it commits or is refused: the inputs and flags of an ingest killed
# before it committed, so the hint of a later command can name the command that resumes it.
INGEST_STARTED = "ingest-started.json"
# Long phrase lists' vectors (`kgr.embed.PhraseCache`), derived from the graph and the encoder alone: ingest empties
# it, and any file in it may be deleted.
PHRASES_DIR = "phrase-vectors"

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
    "ingest": ("embedding", "types"),
    "reach": ("reach",),
    "overview": ("overview", "backbone"),
}
# Settings that change how fast a stage runs, and what it produces only within rounding (the encoder's precision moves
# a vector's cosine by at most ~0.004: stored vectors stay valid; the engine only where its texts are encoded;
# chunk_rows only which texts share an encoder call).
RUNTIME_ONLY: dict[str, tuple[str, ...]] = {"embedding": ("threads", "precision", "engine", "chunk_rows")}
# Settings added after projects were fingerprinted, with the value that keeps their stage's output as before: at that
# value they are left out of the fingerprint, so a graph ingested before the setting existed stays current.
ADDED_SETTINGS: dict[str, dict[str, Any]] = {"embedding": {"compose_relationships": False, "index_min_rows": 200_000,
                                                           "backend": "torch", "quantize": "none"}}
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
        self._snapshot_handle = None
        self._db = None
        self.snapshot: str | None = None  # the snapshot a reader opened because a writer holds the project
        self.writer: str | None = None  # who holds the project when a reader reads a snapshot

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
        """Open a project, holding its lock (exclusive to write, shared to read) until exit.

        With `create`, a directory that did not exist or was empty is left as it was found when the command is refused
        (a KgrError): what it created is removed, so a refused first ingest leaves no half project. An interrupt keeps
        it: a killed first ingest's checkpoint lets the same command resume it (no stage trusts a checkpoint)."""
        root = Path(root)
        undo = FreshDirectory(root) if create else None
        try:
            if create:
                cls.init(root, overrides)
            elif not (root / CONFIG_FILE).exists():
                raise KgrError(f"{root}: not a kgr project (no {CONFIG_FILE}); run `kgr init {root}` or "
                               f"`kgr ingest` first")
            config = load_config(root, overrides)  # ConfigError: exit 2 for a flag or variable, 3 for kgr.toml
            project = cls(root, config, write)
            try:
                project._acquire_lock()  # inside: a writer that took the lock and then failed to publish releases it
                yield project
            finally:
                project.close()
        except ProjectBusyError:
            raise  # another process holds the directory: what is in it is its own, not this command's
        except KgrError:
            if undo is not None:
                undo.remove_created()
            raise

    def _acquire_lock(self) -> None:
        if self.writable:
            self._acquire_write_lock()
        else:
            self._acquire_read_lock()

    def _acquire_write_lock(self) -> None:
        # Publishing happens under the publish lock, so a reader that finds the project lock taken waits for the
        # snapshot of the state this writer started from instead of reading an older one.
        with self._publish_lock(fcntl.LOCK_EX):
            handle, holder = self._try_lock(fcntl.LOCK_EX)
            if handle is None:
                raise ProjectBusyError(f"{self.root}: project is busy ({holder}); try again when it finishes")
            handle.seek(0)
            handle.truncate()
            handle.write(f"kgr pid {os.getpid()}")
            handle.flush()
            self._lock_handle = handle
            self._publish_snapshot_locked()

    def _acquire_read_lock(self) -> None:
        handle, holder = self._try_lock(fcntl.LOCK_SH)
        if handle is None:
            self._open_snapshot(holder)
            return
        self._lock_handle = handle

    def _try_lock(self, mode: int):
        """(the project lock's open handle, None) when `mode` could be taken at once, else (None, who holds it)."""
        handle = open(self.root / LOCK_FILE, "a+")
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(handle)
            handle.close()
            return None, holder
        return handle, None

    def _open_snapshot(self, holder: str) -> None:
        """Read the current snapshot (the last committed state) of a project a writer holds."""
        with self._publish_lock(fcntl.LOCK_SH):
            name = self._current_snapshot_name()
            if name is None:
                raise ProjectBusyError(f"{self.root}: project is busy ({holder}) and nothing was committed before "
                                       f"it started; try again when it finishes")
            handle = open(self._snapshot_dir / f"{name}.json", "r")
            # A shared lock on the snapshot's record tells writers not to delete it or the folders it lists.
            fcntl.flock(handle, fcntl.LOCK_SH)
        self._snapshot_handle = handle
        self.snapshot = name
        self.writer = holder

    @contextmanager
    def _publish_lock(self, mode: int) -> Iterator[None]:
        with open(self.root / PUBLISH_LOCK_FILE, "a+") as handle:
            fcntl.flock(handle, mode)  # blocks at most while a writer copies the database
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        for name in ("_lock_handle", "_snapshot_handle"):
            handle = getattr(self, name)
            if handle is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
                setattr(self, name, None)

    # -- snapshots for readers beside a writer --------------------------------------------------------------------
    @property
    def _snapshot_dir(self) -> Path:
        return self.root / SNAPSHOT_DIR

    def _current_snapshot_name(self) -> str | None:
        path = self._snapshot_dir / CURRENT_SNAPSHOT
        return (path.read_text(encoding="utf-8").strip() or None) if path.exists() else None

    def _snapshot_records(self) -> dict[str, dict]:
        """Every published snapshot's record (source stamp, artifacts) by name."""
        if not self._snapshot_dir.exists():
            return {}
        return {path.stem: json.loads(path.read_text(encoding="utf-8"))
                for path in sorted(self._snapshot_dir.glob("*.json"))}

    def publish_snapshot(self) -> str | None:
        """Make the committed database the snapshot readers open while this writer works; return its name."""
        if not self.writable:
            raise KgrError(f"{self.root}: only a writer publishes snapshots")
        with self._publish_lock(fcntl.LOCK_EX):
            return self._publish_snapshot_locked()

    def _publish_snapshot_locked(self) -> str | None:
        folder = self._snapshot_dir
        for stray in folder.glob("*.tmp") if folder.exists() else ():
            stray.unlink()  # left by a writer killed while copying; no reader ever opened it
        name = None
        if self.db_path.exists():
            self.db.execute("CHECKPOINT")  # everything committed is now in the main file, none of it in the WAL
            source = _file_stamp(self.db_path)
            records = self._snapshot_records()
            current = self._current_snapshot_name()
            if current in records and records[current]["source"] == source:
                name = current  # nothing was committed since it was made
            else:
                name = self._copy_database(source)
        pointer = folder / CURRENT_SNAPSHOT
        if name is None:
            pointer.unlink(missing_ok=True)
        else:
            _write_atomically(pointer, name)
        self._retire_snapshots(keep=name)
        return name

    def _copy_database(self, source: dict) -> str:
        folder = self._snapshot_dir
        folder.mkdir(exist_ok=True)
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        began = time.perf_counter()
        tmp = folder / f"{name}.duckdb.tmp"
        shutil.copyfile(self.db_path, tmp)
        os.replace(tmp, folder / f"{name}.duckdb")
        record = {"source": source, "bytes": source["size"], "copy_seconds": round(time.perf_counter() - began, 4),
                  "writer_pid": os.getpid(), "artifacts": sorted(self._live_artifacts())}
        _write_atomically(folder / f"{name}.json", json.dumps(record, indent=1))
        return name

    def _live_artifacts(self) -> set[str]:
        """The artifact folders (relative to the root) the latest run of each stage refers to (a writer's query)."""
        rows = self.db.execute(
            "SELECT artifacts FROM manifest QUALIFY row_number() OVER (PARTITION BY stage ORDER BY started_at DESC) = 1"
        ).fetchall()
        return {path for (artifacts,) in rows for path in json.loads(artifacts).values()}

    def _retire_snapshots(self, keep: str | None) -> None:
        """Delete snapshots no reader holds (except `keep`) and the superseded folders only they referred to."""
        freed: set[str] = set()
        for name, record in self._snapshot_records().items():
            if name == keep:
                continue
            record_path = self._snapshot_dir / f"{name}.json"
            with open(record_path, "r") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a reader still reads it; a later writer retires it
                (self._snapshot_dir / f"{name}.duckdb").unlink(missing_ok=True)
                record_path.unlink()
            freed.update(record["artifacts"])
        if not freed:
            return
        still_used = self._held_artifacts() | (self._live_artifacts() if self.db_path.exists() else set())
        for relative in sorted(freed - still_used):
            remove_tree(location(self.root, relative))

    def _held_artifacts(self) -> set[str]:
        """The artifact folders some remaining snapshot refers to."""
        return {path for record in self._snapshot_records().values() for path in record["artifacts"]}

    # -- storage handles ---------------------------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        return self.root / DB_FILE

    @property
    def db(self):
        """The DuckDB connection (read-only unless the project was opened to write; a snapshot beside a writer)."""
        if self._db is None:
            import duckdb

            if not self.writable and not self.db_path.exists():
                raise MissingStageError(f"{self.root}: nothing ingested yet{self._ingest_hint()}")
            path = self._snapshot_dir / f"{self.snapshot}.duckdb" if self.snapshot else self.db_path
            try:
                self._db = duckdb.connect(str(path), read_only=not self.writable)
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
    def new_generation(self, kind: str) -> Path | ObjectFolder:
        """A fresh, empty folder for a stage's file artifacts; it becomes current only when the stage commits."""
        folder = self.kind_root(kind)
        if isinstance(folder, ObjectFolder):
            folder.check()  # an unreachable store or a missing bucket fails here, before any work
        path = folder / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    def kind_root(self, kind: str) -> Path | ObjectFolder:
        """Where a kind's generations live: the project folder, or for vectors `storage.vectors_uri` when set."""
        uri = self.config.storage.vectors_uri
        if kind != VECTORS_DIR or not uri:
            return self.root / kind
        return ObjectFolder(uri) / self._storage_id() / VECTORS_DIR

    def _storage_id(self) -> str:
        """This project's prefix under `storage.vectors_uri`, made by its first writer."""
        path = self.root / STORAGE_ID_FILE
        if not path.exists():
            if not self.writable:
                raise MissingStageError(f"{self.root}: nothing ingested yet{self._ingest_hint()}")
            _write_atomically(path, uuid.uuid4().hex[:16])
        return path.read_text(encoding="utf-8").strip()

    def artifact(self, stage: str, name: str) -> Path | ObjectFolder:
        """The current folder of a stage's file artifact (as recorded in the manifest)."""
        run = self.require(stage)
        if name not in run.artifacts:
            raise StaleStageError(f"{self.root}: stage {stage} recorded no {name!r}; rerun `kgr {stage} {self.root} --force`")
        return location(self.root, run.artifacts[name])

    def generations(self, kind: str) -> list[Path | ObjectFolder]:
        folder = self.kind_root(kind)
        if isinstance(folder, ObjectFolder):
            return folder.subfolders()
        return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []

    def prune_generations(self, kind: str, keep: Path | ObjectFolder) -> None:
        """After a stage commits: publish the new state, then remove the kind's other folders no snapshot holds."""
        self.publish_snapshot()
        held = {location(self.root, relative).resolve() for relative in self._held_artifacts()}
        for path in self.generations(kind):
            if path.resolve() != keep.resolve() and path.resolve() not in held:
                remove_tree(path)

    # -- manifest ----------------------------------------------------------------------------------------------
    def config_fingerprint(self, stage: str) -> str:
        sections = {}
        for name in STAGE_CONFIG.get(stage, ()):
            ignored = RUNTIME_ONLY.get(name, ())
            added = ADDED_SETTINGS.get(name, {})
            sections[name] = {k: v for k, v in self.config.section(name).items()
                              if k not in ignored and not (k in added and v == added[k])}
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
        if run is None and stage == "ingest":
            raise MissingStageError(f"{self.root}: stage ingest has not run{self._ingest_hint()}")
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
        artifacts: dict[str, Path | ObjectFolder] | None = None,
    ) -> StageRun:
        """Insert the manifest row; call inside the stage's transaction so both commit together (an artifact on
        object storage is recorded by its URI, one in the project folder by its path relative to it)."""
        relative = {name: str(path) if isinstance(path, ObjectFolder) else str(path.relative_to(self.root))
                    for name, path in (artifacts or {}).items()}
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

    # -- an ingest started and not committed ------------------------------------------------------------------------
    def mark_ingest_started(self, args: list[tuple[str, bool]]) -> None:
        """Record the ingest starting now: its arguments after the directory, each (text, whether it is a path)."""
        shown = [[os.path.abspath(text) if is_path else text, is_path] for text, is_path in args]
        _write_atomically(self.root / INGEST_STARTED, json.dumps(
            {"started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "pid": os.getpid(),
             "args": shown}, indent=1))

    def clear_ingest_started(self) -> None:
        (self.root / INGEST_STARTED).unlink(missing_ok=True)

    def started_ingest_command(self) -> str | None:
        """The command that resumes an ingest that started and never committed (killed), or None."""
        try:
            record = json.loads((self.root / INGEST_STARTED).read_text(encoding="utf-8"))
            args = [_shown_path(text) if is_path else text for text, is_path in record["args"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # no marker, or one that cannot be read: the hint falls back to the general one
        return shlex.join(["kgr", "ingest", str(self.root), *args])

    def _ingest_hint(self) -> str:
        """The end of a message telling how to ingest: the resuming command when an ingest was cut short."""
        started = self.started_ingest_command()
        if started:
            return f"; an ingest started and did not finish: resume it with `{started}`"
        return f"; run `kgr ingest {shlex.quote(str(self.root))} GRAPH_FILE...` first"

    # -- sizes -------------------------------------------------------------------------------------------------
    def disk_usage(self) -> dict[str, int]:
        """Bytes on disk of the database, the vectors (on object storage too), the reachability map and the phrase
        cache."""
        def size(path: Path | ObjectFolder) -> int:
            if isinstance(path, ObjectFolder):
                return path.size()
            if path.is_file():
                return path.stat().st_size
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0

        return {
            "database": size(self.db_path) + size(self.db_path.with_suffix(".duckdb.wal")),
            "vectors": size(self.kind_root(VECTORS_DIR)) if self._has_vectors_root() else 0,
            "reach": size(self.root / REACH_DIR),
            "phrases": size(self.root / PHRASES_DIR),
        }


    def _has_vectors_root(self) -> bool:
        return not self.config.storage.vectors_uri or (self.root / STORAGE_ID_FILE).exists()


class FreshDirectory:
    """A project directory as it was before a command: missing or empty ("fresh"), or holding something."""

    def __init__(self, root: Path):
        # The topmost folder the command will create (root or a missing parent), or root itself when it is empty.
        missing = [folder for folder in (root, *root.parents) if not folder.exists()]
        self.topmost_new: Path | None = missing[-1] if missing else None
        self.was_empty = not missing and root.is_dir() and not any(root.iterdir())
        self.root = root

    def remove_created(self) -> None:
        """Remove what the command created in a fresh directory; a directory that held anything is left alone."""
        if self.topmost_new is not None:
            shutil.rmtree(self.topmost_new, ignore_errors=True)
        elif self.was_empty:
            for child in self.root.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def _lock_holder(handle) -> str:
    """Who holds a project's lock, as its holder wrote it."""
    handle.seek(0)
    holder = handle.read().strip() or "another process"
    return f"{holder} is writing it"


def _shown_path(path: str) -> str:
    """A recorded absolute path as short as it can be shown from here: relative when under the working directory."""
    relative = os.path.relpath(path)
    return path if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def _file_stamp(path: Path) -> dict:
    """What changes whenever DuckDB writes the file: inode, size and modification time."""
    stat = path.stat()
    return {"inode": stat.st_ino, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _write_atomically(path: Path, text: str) -> None:
    """Replace a small file so that readers see the old or the new content, never a part."""
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
