"""Datasets as tasks: `from_jsonl`, `from_csv` and `from_hf` read a dataset row by
row into a `corral.TaskSource` (spooled to a task file as they read, so a million
rows never sit in memory), each row's fields mapped to a task's id, inputs, target
and metadata (or a function of the row).
"""

from ._readers import from_csv, from_hf, from_jsonl

__all__ = ["from_csv", "from_hf", "from_jsonl"]
