"""DotRAG: relational path retrieval guided by a policy's decisions.

`method.py` (the method: anchors, trajectories, the walk, packing), `plan.py` (the typed plan and its stored JSON
form), `policy.py` (the decisions and the `Policy` base with its hooks; the LLM and random policies), `offline.py`
(the offline policy: decisions from embeddings, no LLM), `random_policy.py` (the seeded chooser of the
random-choices ablation).
"""
