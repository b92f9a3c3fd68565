"""The first answer about the last hour of the Collector's tables, never read before.

A person who points dupescope at a large `otel_traces` asks about what just happened:
`dupescope duplicates --since 1h`. This builds `--spans` spans in the exporter's Map
layout (benchmarks/otel_spans.py, about 55k spans a day of the model's time) and, with
`--one-day`, moves every day's spans onto the newest day at the same time of day: the
table of a busy service, all of it in one day partition, so the last hour holds about a
24th of it. Then, from a fresh store over it:

- **last hour first**: `duplicates --since` (the newest span less an hour), read first
  (`read_recent_first`, store/otel.py), the whole table as backlog;
- **backlog**: the next `duplicates` in the same process, which reads the table whole
  and derives it;
- **whole**: from another fresh store, the first read alone (its spans a second), then
  the same `duplicates`: what the question waits without the last hour first.

    python -m benchmarks otel_last_hour --spans 11000000 [--one-day]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from chdb import session

from benchmarks import otel_spans
from queries import duplicates
from sample_data.clickhouse_exporter import traces_ddl
from store.otel import OtelChdbStore, OtelSource

#: Moves each span, its span events alike, onto the table's newest day.
ONTO_NEWEST_DAY = """
INSERT INTO otel.otel_traces
SELECT * REPLACE (
    Timestamp + toIntervalDay(dateDiff('day', toDate(Timestamp), {newest:Date}))
        AS Timestamp,
    arrayMap(t -> t + toIntervalDay(dateDiff('day', toDate(Timestamp), {newest:Date})),
        `Events.Timestamp`) AS `Events.Timestamp`)
FROM otel.spread
"""


def build(folder: Path, spans: int, one_day: bool) -> int:
    """The exporter's table of about `spans` spans; the spans made."""
    s = session.Session(str(folder))
    made = 0
    try:
        s.query("CREATE DATABASE otel")
        s.query(traces_ddl("otel", table="spread" if one_day else "otel_traces"))
        for rows, _ in otel_spans.batches(spans):
            otel_spans.insert(s, "otel.spread" if one_day else "otel.otel_traces", rows)
            made += rows.num_rows
            print(f"  {made:,} spans", flush=True)
        if one_day:
            s.query(traces_ddl("otel"))
            newest = s.query("SELECT toString(max(toDate(Timestamp))) FROM otel.spread",
                             "CSV").bytes().decode().strip().strip('"')
            s.query(ONTO_NEWEST_DAY, params={"newest": newest})
            s.query("DROP TABLE otel.spread")
    finally:
        s.close()
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks otel_last_hour")
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--one-day", action="store_true",
                        help="every span on the newest day (a busy service's table)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="dupescope-last-hour-"))
    try:
        started = time.perf_counter()
        spans = build(folder, args.spans, args.one_day)
        print(f"{spans:,} spans built in {time.perf_counter() - started:.1f} s", flush=True)
        figures = {}
        for own_db, first in (("recent_first", True), ("whole", False)):
            started = time.perf_counter()
            store = OtelChdbStore(str(folder), OtelSource("otel", own_db=own_db))
            try:
                newest = store.arrow("SELECT max(Timestamp) AS t FROM otel.otel_traces")
                since = newest["t"][0].as_py() - timedelta(hours=1)
                in_hour = store.arrow("SELECT count() AS n FROM otel.otel_traces "
                                      "WHERE Timestamp >= {s:DateTime64(9)}",
                                      {"s": since})["n"][0].as_py()
                if first:
                    store.read_recent_first(since)
                else:  # the first read alone, timed
                    read_started = time.perf_counter()
                    store.refresh()
                    figures["read"] = time.perf_counter() - read_started
                    print(f"whole: first read of {spans:,} spans in {figures['read']:.1f} s, "
                          f"{spans / figures['read']:,.0f} spans/s", flush=True)
                found = len(duplicates(store, since=since))
                answered = time.perf_counter() - started
                figures[own_db] = answered
                print(f"{own_db}: {found} duplicates in the last hour ({in_hour:,} spans) "
                      f"after {answered:.1f} s", flush=True)
                if first:
                    store.recent_from = None
                    started = time.perf_counter()
                    found = len(duplicates(store, since=since))
                    figures["backlog"] = time.perf_counter() - started
                    print(f"  then the backlog read whole and derived: {found} duplicates "
                          f"after {figures['backlog']:.1f} s more", flush=True)
            finally:
                store.close()
        print(f"\nthe last hour first: {figures['recent_first']:.1f} s to the first answer, "
              f"against {figures['whole']:.1f} s reading the {spans:,} spans whole first "
              f"({figures['whole'] / figures['recent_first']:.1f}x sooner)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
