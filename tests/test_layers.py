"""kgr's modules import downward only: ground helpers -> project, store, embeddings, reach -> ingest and the other
stages -> backbone (LLM plumbing) -> methods -> evaluate -> api -> cli (read from the source, every import statement
included). Within methods, the shared pieces sit below each method, and no method imports another."""

from __future__ import annotations

import ast
from pathlib import Path

KGR = Path(__file__).resolve().parent.parent / "kgr"

# Each module's layer, by its dotted name's longest listed prefix. A module may import its own layer and any below.
# Within methods: the shared pieces (run context, records, token packing, the runner, the graph index, passage
# ranking, the offline policy both methods read) are 4, each method (its module or folder) 4.5. The overview stage asks
# the backbone within a run context (4).
METHODS = ("kgr.methods.dotrag", "kgr.methods.csrag", "kgr.methods.baselines")  # each method's module or folder
LAYERS = {
    "kgr": 0, "kgr.errors": 0, "kgr.config": 0, "kgr.graph": 0, "kgr.console": 0, "kgr.ranking": 0, "kgr.lexicon": 0,
    "kgr.objectstore": 0, "kgr.columns": 0,
    "kgr.project": 1, "kgr.embed": 1, "kgr.embed_ray": 1, "kgr.embed_onnx": 1, "kgr.reach": 1, "kgr.store": 1, "kgr.schema": 1,
    "kgr.ingest": 2, "kgr.reach_stage": 2, "kgr.status": 2,
    "kgr.backbone": 3,
    "kgr.methods": 4, "kgr.perturb": 4, "kgr.overview": 4,
    **dict.fromkeys(METHODS, 4.5),
    "kgr.evaluate": 5,
    "kgr.api": 6,
    "kgr.cli": 7, "kgr.__main__": 7,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(KGR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(name: str) -> float:
    prefix = max((p for p in LAYERS if name == p or name.startswith(p + ".")), key=len, default=None)
    assert prefix is not None, f"{name} has no layer: add it to LAYERS"
    return LAYERS[prefix]


def kgr_imports(path: Path) -> set[str]:
    """The kgr modules a source file imports, at module level or inside functions (TYPE_CHECKING ones included)."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "kgr"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == "kgr":
                # `from kgr.backbone import templates` imports the submodule, not the package's other names
                submodules = {f"{base}.{a.name}" for a in node.names if is_module(f"{base}.{a.name}")}
                found |= submodules or {base}
    return found


def is_module(name: str) -> bool:
    path = KGR.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_every_import_goes_down_or_stays_in_its_layer():
    upward = []
    for path in sorted(KGR.rglob("*.py")):
        importer = module_name(path)
        for imported in sorted(kgr_imports(path)):
            if layer(imported) > layer(importer):
                upward.append(f"{importer} (layer {layer(importer)}) imports {imported} (layer {layer(imported)})")
    assert not upward, "\n".join(upward)


def method_of(name: str) -> str | None:
    """The method a module belongs to (its module or folder in METHODS), or None for a shared or other module."""
    return next((m for m in METHODS if name == m or name.startswith(m + ".")), None)


def test_no_method_imports_another():
    sideways = []
    for path in sorted(KGR.rglob("*.py")):
        importer = module_name(path)
        for imported in sorted(kgr_imports(path)):
            if method_of(importer) and method_of(imported) not in (None, method_of(importer)):
                sideways.append(f"{importer} imports {imported}")
    assert not sideways, "\n".join(sideways)


def test_no_import_cycle_between_modules():
    graph = {module_name(p): {m for m in kgr_imports(p) if m != module_name(p)} for p in KGR.rglob("*.py")}
    graph = {name: {m for m in deps if m in graph} for name, deps in graph.items()}
    visiting, done, cycles = set(), set(), []

    def visit(name: str, trail: list[str]) -> None:
        if name in done:
            return
        if name in visiting:
            cycles.append(" -> ".join(trail[trail.index(name):] + [name]))
            return
        visiting.add(name)
        for dep in sorted(graph[name]):
            visit(dep, trail + [name])
        visiting.discard(name)
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert not cycles, "\n".join(cycles)
