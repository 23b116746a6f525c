"""Retrieval methods (DotRAG, CS-RAG, BM25, VSS), their shared record format and token-budget packing."""
