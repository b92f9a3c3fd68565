"""What a running collector keeps in memory beyond its queue."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from collect_support import ROOT

TAKE_ONE_TRACE_BATCH = """
import sys
from benchmarks.collector import trace_request
from collectors.service.collector import Collector
from store.embedded import EmbeddedStore

collector = Collector(EmbeddedStore(sys.argv[1]))
body = trace_request(0, 10, steps=3).SerializeToString()
result = collector.otlp("traces", body, "protobuf", "test")
collector.close()
print(result.accepted, "polars" in sys.modules)
"""


def test_a_collector_taking_only_otlp_never_loads_the_json_lines_parser(tmp_path: Path) -> None:
    # polars, which parses JSON-lines bodies and tailed files, is ~30 MB of memory.
    done = subprocess.run(
        [sys.executable, "-c", TAKE_ONE_TRACE_BATCH, str(tmp_path / "store")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )
    assert done.stdout.split() == ["40", "False"]
