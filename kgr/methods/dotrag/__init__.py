"""DotRAG: relational path retrieval guided by a policy's decisions.

`method.py` (the method: anchors, trajectories, the walk, packing), `plan.py` (the typed plan and its stored JSON
form), `policy.py` (the LLM and random policies; the decisions, the `Policy` base and the offline policy, shared with
CS-RAG's planner, are `kgr.methods.offline`), `random_policy.py` (the seeded chooser of the random-choices ablation).
"""
