"""Folders on S3-compatible object storage (`storage.vectors_uri`), used where the project uses a local folder.

Credentials and the endpoint come from the environment only (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_REGION or AWS_DEFAULT_REGION, AWS_ENDPOINT_URL), read each time a store is opened and never
written anywhere: settings, manifest and logs hold only the `s3://bucket/prefix` URI, which may not carry them.
"""

from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Mapping

from kgr.errors import KgrError, UsageError

SCHEME = "s3://"
# A bucket name as S3 allows it (3-63 lowercase letters, digits, dots, hyphens), then an optional key prefix.
_URI = re.compile(r"s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(/[^?#@\s]*)?")
# The environment a store is opened with; the secret ones never appear in a message (`scrubbed`).
_ENV_NAMES = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
              "AWS_SESSION_TOKEN")
_SECRET_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# Seconds to wait for an endpoint to answer: an unreachable one fails the command in seconds, not minutes.
CONNECT_TIMEOUT = 5
REQUEST_TIMEOUT = 60


def is_uri(text: str | os.PathLike) -> bool:
    """Whether `text` names an object-store location (s3://...) rather than a local path."""
    return isinstance(text, (str, ObjectFolder)) and str(text).startswith(SCHEME)


def check_uri(uri: str) -> str:
    """`uri` without a trailing slash when it is `s3://bucket[/prefix]` with no credentials, query or fragment;
    else a one-line UsageError (which does not repeat the text after the bucket: it may hold a secret)."""
    uri = uri.strip()
    if not _URI.fullmatch(uri):
        bucket = uri[len(SCHEME):].split("/", 1)[0] if uri.startswith(SCHEME) else ""
        shown = f"s3://{bucket}/..." if bucket and "@" not in bucket and ":" not in bucket else "the URI given"
        raise UsageError(f"{shown}: expected s3://BUCKET/PREFIX (a lowercase bucket name; credentials come from "
                         f"the AWS_* environment, never the URI)")
    return uri.rstrip("/")


def storage_options(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Lance's `storage_options` for S3 from the AWS_* environment (http endpoints allowed: a local server)."""
    env = _aws_environment(os.environ if environ is None else environ)
    options = {}
    for name, key in (("AWS_ACCESS_KEY_ID", "aws_access_key_id"), ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
                      ("AWS_SESSION_TOKEN", "aws_session_token"), ("AWS_ENDPOINT_URL", "aws_endpoint")):
        if env.get(name):
            options[key] = env[name]
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["aws_region"] = region
    if env.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        options["allow_http"] = "true"
    return options


def _aws_environment(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: environ[name] for name in _ENV_NAMES if environ.get(name)}


def scrubbed(text: str) -> str:
    """`text` with the values of the AWS credential variables masked."""
    for name in _SECRET_ENV:
        value = os.environ.get(name, "")
        if len(value) >= 4:
            text = text.replace(value, "[REDACTED]")
    return text


@lru_cache(maxsize=4)
def _filesystem(environment: tuple[tuple[str, str], ...]):
    from pyarrow import fs

    env = dict(environment)
    endpoint = env.get("AWS_ENDPOINT_URL", "")
    scheme, _, host = endpoint.partition("://") if "://" in endpoint else ("https", "", endpoint)
    return fs.S3FileSystem(
        access_key=env.get("AWS_ACCESS_KEY_ID"), secret_key=env.get("AWS_SECRET_ACCESS_KEY"),
        session_token=env.get("AWS_SESSION_TOKEN"), region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
        endpoint_override=host.rstrip("/") or None, scheme=scheme, connect_timeout=CONNECT_TIMEOUT,
        request_timeout=REQUEST_TIMEOUT)


def filesystem():
    """A pyarrow S3 filesystem for the current AWS_* environment."""
    return _filesystem(tuple(sorted(_aws_environment(os.environ).items())))


class ObjectFolder:
    """A "folder" (key prefix) on object storage, offering the few `pathlib.Path` methods kgr's vector folders use."""

    def __init__(self, uri: str):
        self.uri = check_uri(str(uri))

    # -- naming ----------------------------------------------------------------------------------------------
    def __truediv__(self, name: str) -> ObjectFolder:
        return ObjectFolder(f"{self.uri}/{name}")

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"ObjectFolder({self.uri!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ObjectFolder) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def __lt__(self, other: ObjectFolder) -> bool:
        return self.uri < other.uri

    @property
    def _key(self) -> str:
        return self.uri[len(SCHEME):]

    def resolve(self) -> ObjectFolder:
        return self

    # -- reading and writing ---------------------------------------------------------------------------------
    def _info(self):
        return self._call("look it up", lambda fs: fs.get_file_info(self._key))

    def exists(self) -> bool:
        from pyarrow import fs

        return self._info().type != fs.FileType.NotFound

    def is_dir(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.Directory

    def read_text(self, encoding: str = "utf-8") -> str:
        def read(fs):
            with fs.open_input_stream(self._key) as stream:
                return stream.read().decode(encoding)

        return self._call("read it", read)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        """Write the object whole (an object store replaces an object atomically: readers see old or new)."""
        def write(fs):
            with fs.open_output_stream(self._key) as stream:
                stream.write(text.encode(encoding))

        self._call("write it", write)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: a prefix exists once an object is written under it."""

    def subfolders(self) -> list[ObjectFolder]:
        """The folders (common prefixes) directly under this one, by name."""
        from pyarrow import fs

        selector = fs.FileSelector(self._key, recursive=False, allow_not_found=True)
        infos = self._call("list it", lambda filesystem: filesystem.get_file_info(selector))
        return sorted(ObjectFolder(f"{SCHEME}{info.path}") for info in infos if info.type == fs.FileType.Directory)

    def remove(self) -> None:
        """Delete every object under this prefix (none: nothing to do)."""
        if self.exists():
            self._call("delete it", lambda fs: fs.delete_dir(self._key))

    def size(self) -> int:
        """Bytes of the objects under this prefix."""
        from pyarrow import fs

        selector = fs.FileSelector(self._key, recursive=True, allow_not_found=True)
        infos = self._call("list it", lambda filesystem: filesystem.get_file_info(selector))
        return sum(info.size or 0 for info in infos if info.type == fs.FileType.File)

    def check(self) -> None:
        """Fail now, in one line, when the bucket cannot be reached with the environment's credentials."""
        bucket = ObjectFolder(SCHEME + self._key.split("/", 1)[0])
        if not bucket.is_dir():
            raise KgrError(f"{bucket}: no such bucket at the object store "
                           f"({os.environ.get('AWS_ENDPOINT_URL') or 'AWS S3'})")

    def _call(self, action: str, operation):
        try:
            return operation(filesystem())
        except (OSError, ValueError) as exc:
            raise ObjectStoreError(self.uri, action, exc) from None


class ObjectStoreError(KgrError):
    """An object store that cannot be reached or refuses an operation: one line, credentials masked."""

    def __init__(self, uri: str, action: str, exc: BaseException):
        # Lance's errors end in a long debug rendering of the request ("... IO { source: ..."): the head says it
        cause = scrubbed(" ".join(str(exc).split())).split(" { ", 1)[0]
        if len(cause) > 240:
            cause = cause[:237] + "..."
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
        super().__init__(f"{uri}: the object store at {endpoint} failed to {action}: {cause}")


@contextmanager
def store_errors(folder: Path | ObjectFolder, action: str) -> Iterator[None]:
    """Inside: a failure of an operation on an object-storage folder (Lance's or pyarrow's) becomes one line."""
    if not isinstance(folder, ObjectFolder):
        yield
        return
    try:
        yield
    except (OSError, ValueError, RuntimeError) as exc:
        raise ObjectStoreError(str(folder), action, exc) from None


def location(root: Path, text: str) -> Path | ObjectFolder:
    """An artifact folder as the manifest records it: an s3:// URI, else a path relative to the project root."""
    return ObjectFolder(text) if is_uri(text) else root / text


def remove_tree(folder: Path | ObjectFolder) -> None:
    """Delete a folder and everything in it, locally or on object storage (a missing one is fine)."""
    if isinstance(folder, ObjectFolder):
        try:
            folder.remove()
        except ObjectStoreError:
            pass  # as rmtree's ignore_errors: a superseded folder left behind is removed by the next prune
    else:
        shutil.rmtree(folder, ignore_errors=True)
