"""`whatif` checked against the workload model run again, and timed at N events.

Part one runs the model (`--model-events`, seed 7, faults raised so that each cause is
met often, held fixed per job) at the catalogue's settings (A), asks `whatif` for each
proposed setting (B), runs the model at B with the same seed and faults, and prints per
job type and cause the duplicates avoided, predicted and actual, the harmful duplicates
avoided, and the crashed runs' added wait (p50, predicted and actual).
Part two times `whatif` on an embedded store of `--events` model events
(`sample_data/fast.py`, built as forensics_speed builds it): the first call (derived
tables built), then warm (median of 5). The size is a flag: 10M is a lead's run, not one
for a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.forensics_speed import canonical
from collectors.arrow_batch import rows_to_table
from collectors.jsonlines import decode_lines
from collectors.normalise import Normaliser
from queries import duplicates
from queries.derived import query_arrow
from queries.duplicates_table import filters
from queries.whatif import Settings, replay, whatif
from sample_data import fast
from sample_data.model import Settings as ModelSettings
from sample_data.rerun import added_waits
from sample_data.workload import Workload, generate
from store.embedded import EmbeddedStore

RATES = {"visibility_timeout": 0.05, "lock_expiry": 0.08, "worker_crash": 0.02}

#: (label, job types, the model's settings at B, what whatif is asked)
PROPOSALS: tuple[tuple[str, tuple[str, ...], dict[str, Any], dict[str, Any]], ...] = (
    ("visibility timeout 60 s", ("email.send_receipt", "notifications.webhook_deliver"),
     {"visibility_timeout_ms": 60_000}, {"visibility_timeout_ms": 60_000}),
    ("visibility timeout 35 s", ("email.send_receipt", "notifications.webhook_deliver"),
     {"visibility_timeout_ms": 35_000}, {"visibility_timeout_ms": 35_000}),
    ("lock TTL 90 s", ("billing.charge_card",), {"lock_ttl_ms": 90_000},
     {"lock_ttl_ms": 90_000}),
    ("lock TTL 60 s", ("tasks.process_upload",), {"lock_ttl_ms": 60_000},
     {"lock_ttl_ms": 60_000}),
    # The model's heartbeat renews the lock every TTL/3 and extends visibility.
    ("heartbeat", ("email.send_receipt", "billing.charge_card"), {"heartbeat": True},
     {"heartbeat_ms": 5_000}),
)


def store_of(workload: Workload, folder: Path) -> EmbeddedStore:
    import orjson

    store = EmbeddedStore(folder)
    lines = [(i, orjson.dumps(e)) for i, e in enumerate(workload.events, start=1)]
    for at in range(0, len(lines), 200_000):
        decoded = decode_lines(lines[at:at + 200_000], Normaliser(), "model")
        store.write(rows_to_table(decoded.rows))
    return store


def model_rerun(model_events: int, work: Path) -> None:
    print(f"== model run again: {model_events:,} events, seed 7, rates {RATES}")
    started = time.perf_counter()
    base = generate(7, model_events, 1.0, settings=ModelSettings(), **RATES)
    a = store_of(base, work / "a")
    print(f"setting A run and stored in {time.perf_counter() - started:.1f} s")
    print(f"{'setting':24} {'job type':32} {'cause':20} {'avoided pred':>12} {'actual':>7}")
    for label, job_types, change, asked in PROPOSALS:
        rerun = generate(7, model_events, 1.0,
                         settings=ModelSettings(**change, job_types=frozenset(job_types)),
                         **RATES)
        b = store_of(rerun, work / label.replace(" ", "-"))
        for job_type in job_types:
            answer = whatif(a, Settings(**asked), job_type=job_type)
            before = Counter(duplicates(a, job_type=job_type)["cause"])
            after = Counter(duplicates(b, job_type=job_type)["cause"])
            for row in answer.causes.to_dict(orient="records"):
                cause = row["cause"]
                print(f"{label:24} {job_type:32} {cause:20} {row['before'] - row['after']:>12}"
                      f" {before[cause] - after[cause]:>7}")
            summary = answer.summary.iloc[0]
            harm_actual = (int(duplicates(a, job_type=job_type)["harmful"].sum())
                           - int(duplicates(b, job_type=job_type)["harmful"].sum()))
            print(f"{label:24} {job_type:32} {'harmful':20} "
                  f"{summary['harmful_before'] - summary['harmful_after']:>12} {harm_actual:>7}")
            waits = added_waits(base.model, rerun.model, frozenset({job_type}))
            actual = f"{np.quantile(waits, 0.5):.0f}" if waits else "-"
            predicted = summary["added_delay_p50_ms"]
            shown = "-" if predicted is None or predicted != predicted else f"{predicted:.0f}"
            print(f"{label:24} {job_type:32} {'added wait p50 ms':20} {shown:>12} {actual:>7}"
                  f"   ({len(waits)} crashes met in both runs)")
        b.close()
    a.close()


def timing(events: int, work: Path) -> None:
    store = EmbeddedStore(work / "timed")
    started = time.perf_counter()
    offset = 0
    for batch in fast.arrow_batches(events):
        store.write(canonical(batch, offset))
        offset += batch.num_rows
    store.compact()
    built = time.perf_counter() - started
    print(f"\n== whatif at {events:,} events (store built in {built:.0f} s)")
    proposal = Settings(visibility_timeout_ms=120_000, lock_ttl_ms=60_000)

    def once() -> float:
        began = time.perf_counter()
        whatif(store, proposal)
        return time.perf_counter() - began

    print(f"first call (derived tables built): {once():7.2f} s")
    warm = statistics.median(once() for _ in range(5))
    print(f"warm (median of 5):                {warm:7.3f} s")
    answer = whatif(store, proposal)
    print(f"{int(answer.summary['duplicates_before'].sum()):,} duplicates replayed, "
          f"{len(answer.keys):,} keys change")
    bound = filters()
    began = time.perf_counter()
    runs = query_arrow(store, "whatif_runs", **bound, key=None)
    keys = query_arrow(store, "duplicates", **bound)
    overruns = query_arrow(store, "whatif_new_overruns", **bound, **proposal.params())
    asked = time.perf_counter() - began
    began = time.perf_counter()
    replay(runs, keys, proposal, overruns)
    print(f"of which the three queries {asked:.3f} s, the replay of {runs.num_rows:,} runs "
          f"{time.perf_counter() - began:.3f} s")
    store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-events", type=int, default=200_000,
                        help="events of each model run (A and every B)")
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="events of the store whatif is timed on")
    parser.add_argument("--skip-model", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-whatif-") as folder:
        if not args.skip_model:
            model_rerun(args.model_events, Path(folder))
        if args.events:
            timing(args.events, Path(folder))


if __name__ == "__main__":
    main()
