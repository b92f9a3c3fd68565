"""The SQS lab: a moto server (SQS, in server mode) on a free local port, a producer and
three boto3 consumers (produce.py, consume.py) run under `opentelemetry-instrument` with
no code of theirs for tracing, exporting OTLP/HTTP to a dupescope collector. Faults:

- a job that outlives the queue's visibility timeout (2 s): SQS hands the message to
  another consumer while the first still works (visibility_timeout);
- a consumer killed (SIGKILL) after its side effect, before its delete: the message comes
  back once its visibility timeout ends (worker_crash);
- a producer that sends the same work twice: two message ids (producer_retry).

The consumers write the side-effect ledger (tests/support/ledger.py), the truth.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from support import ledger

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
VISIBILITY_TIMEOUT_S = 2
SLOW_SECONDS = 5.0  # well past the 2 s visibility timeout, on a busy machine too


def plan(scale: int = 1) -> list[tuple[str, str]]:
    """(key, behaviour) in send order; a key listed twice is sent twice (two message ids).
    `scale` multiplies every group (benchmarks/queue_labs.py runs larger ones)."""
    suffix = [""] if scale == 1 else [f"-{n}" for n in range(scale)]
    return [
        *((f"order-slow{s}", "slow") for s in suffix),
        *((f"order-crash{s}", "crash") for s in suffix),
        *((f"order-{i}{s}", "normal") for s in suffix for i in range(1, 6)),
        *((f"order-twice{s}", "normal") for s in suffix for _ in range(2)),
    ]


@dataclass
class Lab:
    sends: list[tuple[str, str]]  # (key, message id)
    runs: list[ledger.Row]
    killed_pids: set[int]
    seconds: float


def available() -> str | None:
    """Why the lab cannot run here, or None."""
    for tool in ("moto_server", "opentelemetry-instrument"):
        if not (BIN / tool).exists():
            return f"{tool} is not installed in this environment (make install brings it)"
    return None


def truth(rows: list[ledger.Row]) -> dict[str, str]:
    """key -> cause for the keys whose effect ran more than once: two message ids is a
    producer retry; else the first run, if it never finished, was lost with its consumer;
    if it finished after the second began, the second came while it ran."""
    runs: dict[str, dict[str, float | None]] = {}  # run -> effect and done times
    key_of, job_of = {}, {}
    for row in rows:
        run = runs.setdefault(row.run, {"effect": None, "done": None})
        run[row.kind] = row.t
        key_of[row.run], job_of[row.run] = row.key, row.job_id
    by_key: dict[str, list[str]] = {}
    for run, times in sorted(runs.items(), key=lambda item: item[1]["effect"] or 0.0):
        if times["effect"] is not None:
            by_key.setdefault(key_of[run], []).append(run)
    causes = {}
    for key, key_runs in by_key.items():
        if len(key_runs) < 2:
            continue
        if len({job_of[run] for run in key_runs}) > 1:
            causes[key] = "producer_retry"
            continue
        first_done, second = runs[key_runs[0]]["done"], runs[key_runs[1]]["effect"]
        assert second is not None
        causes[key] = (
            "worker_crash" if first_done is None
            else "visibility_timeout" if first_done > second else "broker_redelivery"
        )
    return causes


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"sqs lab: {what} within {timeout} s")
        time.sleep(0.1)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # an answer all the same
    except OSError:
        return False


def run(
    workdir: Path, sqs_port: int, otlp_port: int, record_receive_count: bool, scale: int = 1
) -> Lab:
    """The scenario, start to end (16-20 s at scale 1). A collector must listen on
    `otlp_port`. Each crashing job takes a consumer down: 2 * scale + 1 consumers run."""
    import boto3

    jobs = plan(scale)
    started = time.monotonic()
    truth_path = workdir / "ledger.db"
    ledger.create(truth_path)
    endpoint = f"http://127.0.0.1:{sqs_port}"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "lab", "AWS_SECRET_ACCESS_KEY": "lab",
        "AWS_DEFAULT_REGION": "us-east-1",
        "LAB_SQS_ENDPOINT": endpoint, "LAB_LEDGER": str(truth_path),
        "LAB_SLOW_SECONDS": str(SLOW_SECONDS),
        "LAB_RECORD_RECEIVE_COUNT": "1" if record_receive_count else "0",
        "PYTHONPATH": str(HERE.parent),
        "OTEL_SERVICE_NAME": "sqs-lab",
        "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",  # export ended spans within 0.2 s
    }
    moto = subprocess.Popen([str(BIN / "moto_server"), "-p", str(sqs_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    consumers: list[subprocess.Popen] = []
    try:
        _wait(lambda: _answers(endpoint), 30, "moto answering")
        client = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="lab", aws_secret_access_key="lab")
        env["LAB_QUEUE_URL"] = client.create_queue(
            QueueName="charges", Attributes={"VisibilityTimeout": str(VISIBILITY_TIMEOUT_S)}
        )["QueueUrl"]
        instrumented = [str(BIN / "opentelemetry-instrument"), sys.executable]
        produced = subprocess.run(
            [*instrumented, str(HERE / "produce.py"), *(f"{k}:{b}" for k, b in jobs)],
            env=env, capture_output=True, check=True, timeout=60,
        )
        sends = [tuple(line.split()) for line in produced.stdout.decode().splitlines()]
        assert len(sends) == len(jobs), produced.stderr
        consumers = [
            subprocess.Popen([*instrumented, str(HERE / "consume.py")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(2 * scale + 1)
        ]
        crashing = {key for key, behaviour in jobs if behaviour == "crash"}
        _wait(lambda: {r.key for r in ledger.read(truth_path)} >= crashing, 60,
              "the crashing jobs' side effects")
        crashed = {r.pid for r in ledger.read(truth_path) if r.key in crashing}
        for victim in (c for c in consumers if c.pid in crashed):
            victim.send_signal(signal.SIGKILL)  # after its effect, before its delete
            victim.wait(10)
        keys = {key for key, _ in jobs}

        def settled() -> bool:
            rows = ledger.read(truth_path)
            done = {r.run for r in rows if r.kind == "done"}
            finished = {r.key for r in rows if r.kind == "done"} >= keys
            return finished and all(
                r.run in done for r in rows if r.kind == "effect" and r.pid not in crashed
            )

        _wait(settled, 60, "every job done")
        time.sleep(1.0)  # the last spans' export (every 0.2 s)
    finally:
        for consumer in consumers:
            if consumer.poll() is None:
                consumer.send_signal(signal.SIGINT)  # the SDK flushes on the way out
        for consumer in consumers:
            try:
                consumer.wait(15)
            except subprocess.TimeoutExpired:
                consumer.kill()
        moto.terminate()
        moto.wait(10)
    return Lab([(k, m) for k, m in sends], ledger.read(truth_path), crashed,
               time.monotonic() - started)
