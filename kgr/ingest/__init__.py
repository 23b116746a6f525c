"""Input readers into the normalized graph, entity typing, and passage linking."""

from kgr.ingest.sources import FORMATS, detect_format, fill_descriptions, link_passages, read_file, read_graph
from kgr.ingest.types import Schema, apply_schema, assign_types, infer_types, load_schema

__all__ = ["FORMATS", "Schema", "apply_schema", "assign_types", "detect_format", "fill_descriptions",
           "infer_types", "link_passages", "load_schema", "read_file", "read_graph"]
