"""The BullMQ lab at a larger size: more plain jobs and several rounds of the faults at
once (tests/bullmq_support.py describes them), read live by `BullMQSource`, scored against
the jobs' ledger. Prints the score, how long the scenario ran, the entries read and the
source's rate once the scenario is over (a replay of the whole stream into a new store).

Each round needs two workers of its own (one blocked by its stall, one SIGKILLed by its
crash); `--workers` defaults to that plus two.

    python -m benchmarks.bullmq_lab [--plain 2000] [--rounds 3] [--workers N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import orjson  # noqa: E402
from bullmq_support import MAPPING, Lab, lab_missing, load_ledger, truth  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from support.scoring import score  # noqa: E402

from collectors.mapping import FieldMapping  # noqa: E402
from collectors.service.bullmq_source import BullMQSource  # noqa: E402
from collectors.service.collector import Collector  # noqa: E402
from dupescope.cli import main as cli  # noqa: E402
from store.embedded import EmbeddedStore  # noqa: E402

CAUSES = ("producer_retry", "visibility_timeout", "worker_crash", "broker_redelivery",
          "retry_after_failure")


def start_reading(root: Path, lab: Lab,
                  mapping: FieldMapping) -> tuple[BullMQSource, Collector, EmbeddedStore]:
    store = EmbeddedStore(root)
    collector = Collector(store)
    source = BullMQSource(collector, lab.url, root / "bullmq-state.json", prefix=lab.prefix,
                          mapping=mapping, discover_seconds=0.2).start()
    if not source.connected.wait(10):
        raise SystemExit("the source did not connect")
    return source, collector, store


def caught_up(source: BullMQSource, lab: Lab, timeout: float = 120.0) -> None:
    client = lab.redis()
    key = f"{lab.prefix}:{lab.queue}:events"
    state_key = f"{source.shown_url}|{lab.prefix}|{lab.queue}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = client.xrevrange(key, count=1)
        if last and source.state.ids.get(state_key) == last[0][0]:
            return
        time.sleep(0.1)
    raise SystemExit("the source did not catch up with the stream")


def duplicates(root: Path) -> list[dict]:
    result = CliRunner().invoke(cli, ["--store", str(root), "duplicates", "--format", "json"])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return list(orjson.loads(result.output))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plain", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    missing = lab_missing()
    if missing:
        print(missing)
        return 1
    workers = args.workers or 2 * args.rounds + 2
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "mapping.toml").write_text(MAPPING)
        mapping = FieldMapping.load(base / "mapping.toml")
        lab = Lab(base, plain=args.plain, rounds=args.rounds)
        try:
            source, collector, store = start_reading(base / "live", lab, mapping)
            started = time.monotonic()
            lab.start_workers(workers)
            lab.produce()
            lab.wait_done(timeout=600)
            caught_up(source, lab)
            scenario = time.monotonic() - started
            source.stop()
            collector.close()
            store.close()
            ledger = load_ledger(lab.lines, base / "ledger.sqlite")
            by_job = {r.job_id: r.key for r in ledger}
            expected = truth(args.rounds)
            rows = []
            for row in duplicates(base / "live"):
                keys = {by_job.get(j.split("@")[0]) for j in row["job_ids"]}
                if row["key"] not in expected and len(keys) == 1 and None not in keys:
                    row = {**row, "key": keys.pop()}
                rows.append(row)
            result = score(rows, expected, evidence=CAUSES)
            entries = lab.redis().xlen(f"{lab.prefix}:{lab.queue}:events")
            print(f"plain jobs {args.plain}, fault rounds {args.rounds}, workers {workers}")
            print(f"scenario {scenario:.1f} s, {entries} stream entries")
            print(f"live reading: {result.summary()}")
            replay_started = time.monotonic()
            again, collector, store = start_reading(base / "replay", lab, mapping)
            caught_up(again, lab)
            replay = time.monotonic() - replay_started
            again.stop()
            collector.close()
            store.close()
            print(f"replay of the stream: {again.stats['entries']} entries in {replay:.2f} s "
                  f"({again.stats['entries'] / replay:,.0f} entries/s, store writes included)")
        finally:
            lab.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
