"""The offline policy, shared by both methods: a question read against the graph's type schema as scored chains of
(relation, type) steps. DotRAG asks it for its decisions (`kgr.methods.offline.policy`, `decisions`); CS-RAG plans its
constraints along the chain it walks over the graph around a mention (`kgr.methods.csrag.chains`)."""
