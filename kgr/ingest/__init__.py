"""Input readers into the normalized graph, entity typing, and passage linking.

The names below load their modules on first use, so `kgr.ingest.formats` (the command line's list of formats)
imports without the readers and numpy."""

from importlib import import_module

_MODULE_OF = {
    "FORMATS": "kgr.ingest.formats",
    **dict.fromkeys(("detect_format", "fill_descriptions", "link_passages", "read_file", "read_graph"),
                    "kgr.ingest.sources"),
    **dict.fromkeys(("Schema", "apply_schema", "assign_types", "infer_types", "load_schema"), "kgr.ingest.types"),
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'kgr.ingest' has no attribute {name!r}")
    return getattr(import_module(_MODULE_OF[name]), name)
