"""Collector throughput: spans/s end to end over OTLP/HTTP protobuf, against the rate at
which protobuf alone can parse the same bodies, and peak memory when overloaded.

    python -m benchmarks.collector --spans 100000 [--clients 4] [--steps 3] [--rounds 3]

Each span is a job execution span: ~10 attributes and 3 span events, by default all
lifecycle steps (lock_acquire, side_effect, ack), so one span gives 4 canonical rows;
`--steps 0` makes them ordinary events, one row per span. The collector
runs as a real `dupescope collect` process on an embedded store in a temporary folder;
the clients send pre-built, distinct bodies (so nothing is skipped as a repeat) over
keep-alive connections. Overload: twice the measured rate is aimed at a collector with a
small queue, from more clients than it holds batches (what they manage to send is
printed); the collector must answer 429 rather than grow.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collectors.service.run import keep_freed_memory
from sample_data.otlp_requests import trace_request

ROOT = Path(__file__).resolve().parents[1]


def decode_rate(bodies: list[bytes], spans_per_body: int, seconds: float = 2.0) -> float:
    """Spans/s of ParseFromString alone, the ceiling any collector in Python works under.

    Run under the collector's own malloc settings (`keep_freed_memory`, applied by
    `main`): with glibc's defaults a process whose heap holds little else gives the pages
    of each parse back and faults them in again for the next, and ParseFromString then
    spends half its time in the kernel (0.6M spans/s against 1.35M here on the same
    bodies). The baseline would then depend on what else the process held.
    """
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for body in bodies[:20]:
            ExportTraceServiceRequest.FromString(body)
            done += spans_per_body
    return done / (time.perf_counter() - started)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Collector:
    """A `dupescope collect` subprocess on a fresh embedded store."""

    def __init__(self, store: Path, queue_size: int, decode_workers: int) -> None:
        self.port = _free_port()
        command = [
            sys.executable, "-c", "from dupescope.cli import main; main()", "collect",
            "--store", str(store), "--http-port", str(self.port), "--grpc-port", "-1",
            "--queue-size", str(queue_size), "--decode-workers", str(decode_workers),
            "--log-level", "ERROR",
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        line = self.process.stderr.readline() if self.process.stderr else ""
        if "listening" not in line:
            raise RuntimeError(f"collector did not start: {line}")

    def peak_rss_mb(self) -> float:
        """VmHWM of the collector and its decoding workers, in MB."""
        total = 0
        for pid in [self.process.pid, *_children(self.process.pid)]:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    for child in list(found):
        found += _children(child)
    return found


def send_all(port: int, bodies: list[bytes], clients: int, pace: float = 0.0) -> dict[str, int]:
    """Send every body once (retrying after 429); `pace` spaces each client's sends."""
    counts = {"ok": 0, "throttled": 0, "other": 0}
    lock = threading.Lock()
    queue = list(reversed(bodies))

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Content-Type": "application/x-protobuf"}
        while True:
            with lock:
                if not queue:
                    break
                body = queue.pop()
            started = time.perf_counter()
            while True:
                connection.request("POST", "/v1/traces", body=body, headers=headers)
                answer = connection.getresponse()
                answer.read()
                with lock:
                    key = {200: "ok", 429: "throttled"}.get(answer.status, "other")
                    counts[key] += 1
                if answer.status != 429:
                    break
                time.sleep(0.05)
            if pace:
                time.sleep(max(0.0, pace - (time.perf_counter() - started)))
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counts


def end_to_end(
    folder: Path, bodies: list[bytes], warm: list[bytes], args: argparse.Namespace
) -> tuple[float, float]:
    """Spans/s of one run on a fresh collector, and the collector's peak RSS in MB."""
    collector = Collector(folder, 200_000, args.decode_workers)
    try:
        # Warm-up batches first, unmeasured: the first batches also pay for the heap
        # growing and the first spare files being made.
        send_all(collector.port, warm, args.clients)
        started = time.perf_counter()
        counts = send_all(collector.port, bodies, args.clients)
        elapsed = time.perf_counter() - started
        return counts["ok"] * args.batch / elapsed, collector.peak_rss_mb()
    finally:
        collector.stop()
        shutil.rmtree(folder, ignore_errors=True)  # each run starts on an equal disk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=100_000, help="spans to send end to end")
    parser.add_argument("--batch", type=int, default=1000, help="spans per request")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3, choices=range(4),
                        help="span events per span that are lifecycle steps (rows)")
    parser.add_argument("--decode-workers", type=int, default=0,
                        help="decoding processes (0: the receiving threads decode)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="end-to-end runs, each on a fresh collector between two "
                             "decode-only measurements")
    parser.add_argument("--overload-clients", type=int, default=48,
                        help="clients offering twice the rate (more than the 20 batches "
                             "the overload queue holds)")
    parser.add_argument("--overload-seconds", type=float, default=6.0,
                        help="how long twice the rate is offered, at most as long as twice "
                             "the end-to-end bodies last")
    args = parser.parse_args()
    keep_freed_memory()  # as the collector does; see decode_rate

    batches = max(1, args.spans // args.batch)
    started = time.perf_counter()
    bodies = [trace_request(b, args.batch, steps=args.steps).SerializeToString()
              for b in range(batches)]
    warm = [trace_request(10**6 + b, args.batch, steps=args.steps).SerializeToString()
            for b in range(max(8, batches // 10))]
    print(f"built {batches} bodies of {args.batch} spans "
          f"({sum(map(len, bodies)) / batches / 1024:.0f} KiB each) "
          f"in {time.perf_counter() - started:.1f}s")

    with tempfile.TemporaryDirectory() as folder:
        # The machine's speed drifts by tens of percent within minutes, so each run's
        # ratio is taken against the decode-only rates measured just before and after it,
        # and the rounds' median is the figure.
        parse = [decode_rate(bodies, args.batch)]
        print(f"decode only (ParseFromString): {parse[0]:,.0f} spans/s, with the "
              f"collector's malloc settings")
        rates, ratios, rss = [], [], 0.0
        for round_ in range(1, args.rounds + 1):
            rate, peak = end_to_end(Path(folder) / f"store-{round_}", bodies, warm, args)
            parse.append(decode_rate(bodies, args.batch))
            ratio = rate / ((parse[-2] + parse[-1]) / 2)
            rates.append(rate)
            ratios.append(ratio)
            rss = max(rss, peak)
            print(f"round {round_}: end to end {rate:,.0f} spans/s "
                  f"({rate * (1 + args.steps):,.0f} rows/s, {batches} batches, "
                  f"{args.clients} clients, decode workers {args.decode_workers}); "
                  f"decode only after it {parse[-1]:,.0f} spans/s; ratio {ratio:.3f}x")
        rate = statistics.median(rates)
        print(f"end to end: {rate:,.0f} spans/s, median of {args.rounds} "
              f"(range {min(rates):,.0f}-{max(rates):,.0f})")
        print(f"ratio to decode-only: {statistics.median(ratios):.3f}x, median of "
              f"{args.rounds} (range {min(ratios):.3f}-{max(ratios):.3f}x)")
        print(f"peak RSS after the runs: {rss:.0f} MB")

        overload(Path(folder) / "overload", bodies, rate, args)


def overload(folder: Path, bodies: list[bytes], rate: float, args: argparse.Namespace) -> None:
    """Twice `rate` aimed at a collector whose queue holds 20 batches, by more clients
    than that: with fewer, the queue never fills and no 429 can be answered. Each client
    waits for its answer, as an exporter does, so what is sent is measured and printed:
    it falls short of twice the rate once answers take longer than a client's pace."""
    clients = args.overload_clients
    wanted = min(int(2 * rate * args.overload_seconds / args.batch) + 1, 2 * len(bodies))
    # The end-to-end bodies (this store has none of them yet), then new ones as needed.
    extra = [trace_request(len(bodies) + b, args.batch, steps=args.steps).SerializeToString()
             for b in range(max(0, wanted - len(bodies)))]
    offered = (bodies + extra)[:wanted]
    collector = Collector(folder, 20 * args.batch * (1 + args.steps), args.decode_workers)
    try:
        started = time.perf_counter()
        counts = send_all(collector.port, offered, clients,
                          pace=clients * args.batch / (2 * rate))
        elapsed = time.perf_counter() - started
        accepted = counts["ok"] * args.batch / elapsed
        sent = sum(counts.values()) * args.batch / elapsed  # refused ones and their retries
        print(f"overload ({len(offered)} batches paced for {2 * rate:,.0f} spans/s from "
              f"{clients} clients, over {elapsed:.1f}s): {sent:,.0f} spans/s sent "
              f"({sent / rate:.2f}x the end-to-end rate), {counts['throttled']} answers 429, "
              f"{counts['other']} other errors, {accepted:,.0f} spans/s accepted, "
              f"peak RSS {collector.peak_rss_mb():.0f} MB")
    finally:
        collector.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
