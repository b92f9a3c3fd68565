"""The query stage: named SQL per question, run on any store, answers as data frames."""

from queries.loader import query_names, run
from queries.timeline import timeline

__all__ = ["query_names", "run", "timeline"]
