"""A seeded, deterministic workload model of an at-least-once job system.

`generate()` runs the model and returns a `Workload`: contract events, OTLP spans and
the ground truth, all from one seed. The committed sample lives beside this file and
is rebuilt byte for byte by `python -m sample_data`.
"""

from __future__ import annotations

from pathlib import Path

from sample_data.rates import Rates
from sample_data.workload import Workload, generate

HERE = Path(__file__).resolve().parent
SAMPLE_PATH = HERE / "sample.jsonl.gz"
SAMPLE_TRUTH_PATH = HERE / "sample.truth.json"
SAMPLE_OTLP_PATH = HERE / "sample.otlp.jsonl.gz"
SAMPLE_SEED = 7
SAMPLE_EVENTS = 30_000

__all__ = [
    "SAMPLE_EVENTS", "SAMPLE_OTLP_PATH", "SAMPLE_PATH", "SAMPLE_SEED", "SAMPLE_TRUTH_PATH",
    "Rates", "Workload", "generate",
]
