"""Evaluation samples: the schema and the readers for every format people keep them in."""

from offline_eval.data.schema import FIELD_ALIASES, DataError, Sample

__all__ = ["FIELD_ALIASES", "DataError", "Sample"]
