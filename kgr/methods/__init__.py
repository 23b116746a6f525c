"""Retrieval methods (DotRAG, CS-RAG, BM25, VSS), their shared record format and token-budget packing."""

# Each method's name and class ("module:Class"), imported only when it runs (`kgr.methods.runner.method_class`).
METHODS = {
    "dotrag": "kgr.methods.dotrag.method:DotRAG",
    "csrag": "kgr.methods.csrag.method:CSRAG",
    "bm25": "kgr.methods.baselines:BM25",
    "vss": "kgr.methods.baselines:VSS",
    "dpr": "kgr.methods.baselines:DensePassages",
}
