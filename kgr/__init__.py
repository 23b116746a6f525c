"""kgr: retrieval of relational paths over knowledge graphs (DotRAG, CS-RAG and baselines)."""

__version__ = "0.1.0"
