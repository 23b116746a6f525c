"""Errors kgr reports to users, and the exit status each maps to."""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path


class ExitStatus(IntEnum):
    """Process exit codes; scripts may rely on them."""

    OK = 0
    ERROR = 1
    USAGE = 2
    BAD_INPUT = 3
    STALE = 4
    BUSY = 5
    BACKBONE = 6
    INTERRUPTED = 130


class KgrError(Exception):
    """An error with a one-line message for the user and an exit status."""

    status = ExitStatus.ERROR

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UsageError(KgrError):
    """A command line or setting that cannot be used as given (bad option, unknown or out-of-range setting)."""

    status = ExitStatus.USAGE


class InputError(KgrError):
    """Malformed user input, located by file and (when known) line."""

    status = ExitStatus.BAD_INPUT

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


class StaleStageError(KgrError):
    """A stage's inputs changed since it ran; the named stage must be rerun."""

    status = ExitStatus.STALE


class MissingStageError(StaleStageError):
    """A stage that this one needs has never run."""


class ProjectBusyError(KgrError):
    """Another kgr process holds the project's lock."""

    status = ExitStatus.BUSY


class BackboneError(KgrError):
    """The LLM backbone failed in a way that stops the run (e.g. a call or spend cap)."""

    status = ExitStatus.BACKBONE


class RetiredSettingWarning(UserWarning):
    """A setting kgr no longer has, met in a kgr.toml, the environment or an option: it is ignored
    (`kgr.config.RETIRED_SETTINGS`)."""
