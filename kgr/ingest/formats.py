"""The input formats `kgr ingest` reads (kept apart from the readers so the command line can list them cheaply)."""

from __future__ import annotations

# Each is detected from a file's extension or content (`kgr.ingest.sources.detect_format`) or named by --format.
FORMATS = ("triples", "csv", "tsv", "jsonl", "json", "lightrag", "openie", "graphrag")
