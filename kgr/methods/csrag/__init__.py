"""CS-RAG: constraint-based, sufficiency-guided retrieval.

`method.py` (binding, sufficiency and passage recovery), `plan.py` (plans of atomic constraints and the planner over
the relation labels), `chains.py` (plans along the offline policy's walk), `planner.py` (which planner plans a
question: the backbone, the walk, the labels).
"""
