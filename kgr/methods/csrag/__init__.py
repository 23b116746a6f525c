"""CS-RAG: constraint-based, sufficiency-guided retrieval.

`method.py` (binding, sufficiency and passage recovery), `plan.py` (plans of atomic constraints and the offline
planner).
"""
