"""Alert latency: from a batch accepted by the collector to its alert at a webhook.

Runs `dupescope collect` and `dupescope watch` as their own processes (as in production)
on a temporary embedded store beside a background of clean executions, then posts batches
of JSON lines that each hold one new lock overrun and times, from the collector's 200
(the batch is durable) to the alert's arrival at a real HTTP receiver on 127.0.0.1.
`--direct` writes the batches into the store instead, without the collector.
`--background-events N` adds N events of the benchmarks' own generator
(benchmarks/workload.py), compacted, as a store that has run a while holds them.
`--keep DIR` keeps that store in DIR and reuses it in the next run (10M events take
minutes to load and their first derivation longer).
Target: median under 2 s, at any size of the store.

    python -m benchmarks.alert_latency [--rounds 5] [--interval 1.0] [--background 2000]
                                       [--background-events 10000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import workload  # noqa: E402
from collectors.arrow_batch import rows_to_table  # noqa: E402
from collectors.jsonlines import decode_lines  # noqa: E402
from collectors.normalise import Normaliser  # noqa: E402
from store.embedded import EmbeddedStore  # noqa: E402

TARGET_S = 2.0

#: Tells this run's jobs from those of an earlier run into a store kept (`--keep`): an
#: alert already fired for a job is never fired again.
RUN = uuid.uuid4().hex[:6]


def _table(records: list[dict[str, Any]], source: str):  # type: ignore[no-untyped-def]
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, start=1)]
    return rows_to_table(decode_lines(lines, Normaliser(), source).rows)


def _ts(base: float, offset_s: float) -> str:
    stamp = time.gmtime(base + offset_s)
    micros = int(((base + offset_s) % 1) * 1e6)
    return time.strftime("%Y-%m-%dT%H:%M:%S", stamp) + f".{micros:06d}Z"


def _execution(job: str, start: float, duration_s: float, ttl_ms: int) -> list[dict[str, Any]]:
    common = {
        "job_id": job,
        "job_type": "billing.charge",
        "delivery_attempt": 1,
        "worker_id": f"w-{job}",
    }
    lock = {"lock_key": f"lock:{job}", "lock_owner": f"o-{job}"}
    return [
        {"ts": _ts(start, 0), "event": "deliver", "visibility_timeout_ms": 60_000, **common},
        {"ts": _ts(start, 0.001), "event": "lock_acquire", "lock_ttl_ms": ttl_ms, **common, **lock},
        {"ts": _ts(start, duration_s), "event": "side_effect", **common},
        {"ts": _ts(start, duration_s), "event": "ack", **common},
    ]


class Receiver:
    """Records when each alert id first arrived, and the first alert about each job."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.by_job: dict[str, float] = {}
        self.changed = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                now = time.monotonic()
                alert = orjson.loads(body) if body else {}
                job = (alert.get("evidence") or {}).get("job_id") or alert.get("key")
                with outer.changed:
                    outer.arrivals.setdefault(self.headers["Idempotency-Key"], now)
                    if isinstance(job, str):
                        outer.by_job.setdefault(job, now)
                    outer.changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, job: str, timeout: float) -> float | None:
        """When the first alert about `job` arrived (None if none within `timeout`): the
        background may raise alerts of its own."""
        with self.changed:
            if self.changed.wait_for(lambda: job in self.by_job, timeout):
                return self.by_job[job]
            return None


class CollectorProcess:
    """`dupescope collect` on a free port; `post` returns once the batch is durable."""

    def __init__(self, folder: str) -> None:
        command = [
            sys.executable,
            "-c",
            "from dupescope.cli import main; main()",
            "collect",
            "--store",
            folder,
            "--http-port",
            "0",
            "--grpc-port",
            "-1",
        ]
        self.process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "listening" in line:
                address = line.split("http=")[1].split()[0]
                self.url = f"http://{address}/v1/jsonlines"
                break
        else:
            raise RuntimeError("dupescope collect did not start")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    def post(self, records: list[dict[str, Any]]) -> None:
        body = b"\n".join(orjson.dumps(r) for r in records)
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/x-ndjson"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            if answer.status != 200:
                raise RuntimeError(f"collector answered {answer.status}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0, help="watch --interval")
    parser.add_argument("--background", type=int, default=2000, help="clean executions")
    parser.add_argument("--background-events", type=int, default=0,
                        help="events of benchmarks/workload.py written (and compacted) first")
    parser.add_argument(
        "--direct", action="store_true", help="write batches into the store, not the collector"
    )
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the store in this folder and reuse it in the next run "
                             "(its background events are written once)")
    args = parser.parse_args()
    if args.keep is None:
        with tempfile.TemporaryDirectory(prefix="dupescope-bench-") as folder:
            return measure(args, folder)
    return measure(args, str(args.keep))


def measure(args: argparse.Namespace, folder: str) -> int:
    """One run in `folder`: its background written unless it is there, then `watch` (and
    the collector) started and each round timed to its alert."""
    receiver = Receiver()
    store = EmbeddedStore(folder)
    if (Path(folder) / "events").exists():
        print(f"reused {folder} (its background written before)", flush=True)
    elif args.background_events:
        started = time.perf_counter()
        for part in workload.arrow_batches(args.background_events):
            store.write(part)
        store.compact()
        print(f"{args.background_events:,} background events written and compacted in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    base = time.time() - args.background * 0.5 - 600
    clean: list[dict[str, Any]] = []
    for n in range(args.background):
        clean += _execution(f"bg{RUN}-{n}", base + n * 0.5, 0.2, 30_000)
    store.write(_table(clean, "background"))
    warmup = f"warmup{RUN}"  # recent: inside the lateness window of a kept store's watermark
    store.write(_table(_execution(warmup, time.time() - 30, 12.0, 10_000), "warmup"))

    command = [
        sys.executable,
        "-c",
        "from dupescope.cli import main; main()",
        "watch",
        "--store",
        folder,
        "--webhook",
        receiver.url,
        "--interval",
        str(args.interval),
    ]
    watcher = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ))
    collector = None if args.direct else CollectorProcess(folder)
    try:
        # The first round builds the derived tables from nothing (minutes at 10M events).
        if receiver.wait_for(warmup, timeout=120 + args.background_events / 10_000) is None:
            print("watch never delivered the warm-up alert", file=sys.stderr)
            return 1
        latencies = []
        for round_ in range(args.rounds):
            job = f"overrun{RUN}-{round_}"
            records = _execution(job, time.time() - 20, 12.0, 10_000)
            if collector is None:
                batch = _table(records, job)
                written = time.monotonic()
                store.write(batch)  # durable on return: the clock starts here
            else:
                collector.post(records)  # 200 only once durable: the clock starts here
                written = time.monotonic()
            arrived = receiver.wait_for(job, timeout=60)
            if arrived is None:
                print(f"round {round_}: no alert within 60 s", file=sys.stderr)
                return 1
            latencies.append(arrived - written)
            time.sleep(0.3 + (round_ % 3) * 0.27)  # land at different points of the interval
    finally:
        if collector is not None:
            collector.stop()
        watcher.terminate()
        watcher.wait(timeout=30)

    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(
        f"alert latency, batch {'durable' if args.direct else 'accepted by the collector'} "
        f"-> webhook received ({args.rounds} rounds, "
        f"watch --interval {args.interval:g}, {args.background} background executions, "
        f"{args.background_events:,} background events):"
    )
    print("  each:   " + ", ".join(f"{v:.2f}s" for v in latencies))
    print(
        f"  min {ordered[0]:.2f}s  median {statistics.median(ordered):.2f}s  "
        f"p95 {p95:.2f}s  max {ordered[-1]:.2f}s  (target: median < {TARGET_S:g}s)"
    )
    ok = statistics.median(ordered) < TARGET_S
    print("  PASS" if ok else "  FAIL: above target")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
