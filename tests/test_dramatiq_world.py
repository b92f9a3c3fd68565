"""Real Dramatiq 2.x workers (`dramatiq` processes) on a real Redis and a real RabbitMQ,
with real faults, scored source by source against the side-effect ledger the actors write.

Each lab runs two `dramatiq -v` commands (one process, one thread each), then:
- one message whose first run kills its worker process with SIGKILL after its effect (the
  `dramatiq` command then stops; the other one runs the message again);
- messages whose first run fails after its effect (Dramatiq retries them);
- a producer that sends the same work twice (two message ids, one key);
- messages that run once.
Truth: a key whose effect ran in two runs is a duplicate, its cause the fault it was given.
Sources: the workers' logs at -v (both brokers), and RabbitMQ's Firehose (its own vhost,
created and deleted here, traced only there).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest
from support import ledger
from support.redis_db import REDIS_HOST, REDIS_PORT, claim_redis_db, release_redis_db
from support.scoring import Score, score

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
RABBITMQCTL = shutil.which("rabbitmqctl")
MAPPING = '[fields]\nidempotency_key = "dramatiq.args.0"\n'
CAUSES = {"crash": "worker_crash", "fail": "retry_after_failure", "twice": "producer_retry"}
#: The causes each source carries evidence of.
LOG_EVIDENCE = ("worker_crash", "retry_after_failure", "producer_retry")
FIREHOSE_EVIDENCE = ("worker_crash", "retry_after_failure", "producer_retry")


@dataclass
class Lab:
    """What one lab run left: its logs, the firehose's store (RabbitMQ), the ledger."""

    root: Path
    logs: list[Path]
    truth: dict[str, str]
    ledger_rows: list[ledger.Row]
    firehose_store: Path | None = None
    keys: dict[str, str] = field(default_factory=dict)  # key -> fault


def _dramatiq(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(BIN / "dramatiq"), "-v", "--processes", "1", "--threads", "1",
             "dramatiq_lab_app"],
            cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _wait(what: str, done: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _ready(log: Path) -> bool:
    return log.exists() and b"Worker process is ready for action" in log.read_bytes()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def _done_keys(path: Path) -> set[str]:
    return {row.key for row in ledger.read(path) if row.kind == "done"}


def _run_lab(root: Path, url: str, send_env: dict[str, str]) -> tuple[list[Path], dict[str, str]]:
    """Start two workers, make every fault happen, and wait until every key is done."""
    queue = f"dupescope-w48b-{uuid.uuid4().hex[:8]}"
    ledger_path = root / "ledger.sqlite"
    ledger.create(ledger_path)
    env = {**os.environ, **send_env, "DUPESCOPE_DRAMATIQ_BROKER": url,
           "DUPESCOPE_DRAMATIQ_QUEUE": queue, "DUPESCOPE_DRAMATIQ_LEDGER": str(ledger_path),
           # One message in hand at a time: a killed worker held only the one it ran.
           "dramatiq_queue_prefetch": "1", "PYTHONPATH": str(HERE)}
    logs = [root / "worker-a.log", root / "worker-b.log"]
    workers = [_dramatiq(env, log) for log in logs]
    keys = {"crash-1": "crash", "fail-1": "fail", "fail-2": "fail", "twice-1": "twice",
            "twice-2": "twice", **{f"once-{n}": "" for n in range(4)}}
    try:
        _wait("both workers", lambda: all(_ready(log) for log in logs), 60)
        sender = subprocess.run(
            [sys.executable, "-c", _SEND, json.dumps(keys)], cwd=HERE, env=env,
            capture_output=True, timeout=60,
        )
        assert sender.returncode == 0, sender.stderr.decode()
        _wait("every key done", lambda: _done_keys(ledger_path) >= set(keys), 60)
    finally:
        for worker in workers:
            _stop(worker)
    return logs, keys


# The producer: the crash first and alone (so the worker it kills holds no other message),
# then the rest; a `twice` key is sent twice, as a producer retrying a send would.
_SEND = """
import json, sys, time
import dramatiq_lab_app as app
from support import ledger
keys = json.loads(sys.argv[1])
app.charge.send("crash-1", "crash")
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if any(r.key == "crash-1" and r.kind == "done" for r in ledger.read(app.LEDGER)):
        break
    time.sleep(0.1)
for key, fault in keys.items():
    if fault == "crash":
        continue
    app.charge.send(key, fault)
    if fault == "twice":
        app.charge.send(key, fault)
"""


def _truth(rows: list[ledger.Row], keys: dict[str, str]) -> dict[str, str]:
    return {key: CAUSES[keys[key]] for key, runs in ledger.effects_by_key(rows).items()
            if runs > 1}


def _duplicates(store: Path) -> list[dict[str, object]]:
    shown = subprocess.run(
        [str(BIN / "dupescope"), "duplicates", "--store", str(store), "--format", "json",
         "--since", "2000-01-01"],
        capture_output=True, timeout=120, check=True,
    )
    out = shown.stdout.decode()
    return list(json.loads(out[: out.rindex("]") + 1])) if "[" in out else []


def _ingest_logs(lab: Lab, name: str) -> list[dict[str, object]]:
    store = lab.root / name
    mapping = lab.root / "mapping.toml"
    mapping.write_text(MAPPING)
    subprocess.run(
        [str(BIN / "dupescope"), "ingest", "-q", "--store", str(store), "--mapping",
         str(mapping), *map(str, lab.logs)],
        capture_output=True, timeout=120, check=True,
    )
    return _duplicates(store)


@pytest.fixture(scope="module")
def redis_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    import redis

    db = claim_redis_db()
    root = tmp_path_factory.mktemp("dramatiq-redis")
    try:
        logs, keys = _run_lab(root, f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}", {})
        rows = ledger.read(root / "ledger.sqlite")
        yield Lab(root, logs, _truth(rows, keys), rows, keys=keys)
    finally:
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        for key in client.scan_iter("dramatiq:*"):
            client.delete(key)
        release_redis_db(db)


def _rabbitmqctl(*args: str) -> None:
    assert RABBITMQCTL is not None
    subprocess.run([RABBITMQCTL, *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def rabbitmq_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if RABBITMQCTL is None or os.geteuid() != 0:
        pytest.skip("the RabbitMQ lab needs rabbitmqctl, as root, for a vhost of its own")
    vhost = f"dupescope-w48b-{uuid.uuid4().hex[:8]}"
    root = tmp_path_factory.mktemp("dramatiq-rabbitmq")
    _rabbitmqctl("add_vhost", vhost)
    collector: subprocess.Popen[bytes] | None = None
    try:
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        _rabbitmqctl("trace_on", "-p", vhost)
        url = f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}"
        store = root / "firehose"
        mapping = root / "mapping.toml"
        mapping.write_text(MAPPING)
        said = root / "collect.log"
        with open(said, "wb") as out:
            collector = subprocess.Popen(
                [str(BIN / "dupescope"), "collect", "--store", str(store), "--http-port",
                 "-1", "--grpc-port", "-1", "--compact-every", "0", "--mapping", str(mapping),
                 "--rabbitmq-firehose", url],
                stderr=out, stdout=subprocess.DEVNULL, start_new_session=True,
            )
        _wait_consuming(collector, said)
        logs, keys = _run_lab(root, url, {})
        time.sleep(1.0)  # the last trace messages' rows made durable
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)
        rows = ledger.read(root / "ledger.sqlite")
        yield Lab(root, logs, _truth(rows, keys), rows, firehose_store=store, keys=keys)
    finally:
        if collector is not None and collector.poll() is None:
            collector.kill()
            collector.wait(10)
        _rabbitmqctl("delete_vhost", vhost)


def _wait_consuming(collector: subprocess.Popen[bytes], said: Path) -> None:
    """Until the collector's firehose queue consumes (it logs so once bound)."""

    def consuming() -> bool:
        assert collector.poll() is None, said.read_text()
        return b"rabbitmq firehose: consuming" in said.read_bytes()

    _wait("the firehose consumer", consuming, 30)


def _check(result: Score) -> None:
    print(result.summary())
    assert result.precision >= 0.99, result.summary()
    assert result.recall >= 0.99, result.summary()
    assert result.cause_accuracy >= 0.95, result.summary()


# -- the labs' own truth -------------------------------------------------------------------


def test_every_fault_really_ran_twice_on_redis(redis_lab: Lab) -> None:
    assert set(redis_lab.truth) == {k for k, fault in redis_lab.keys.items() if fault}


def test_every_fault_really_ran_twice_on_rabbitmq(rabbitmq_lab: Lab) -> None:
    assert set(rabbitmq_lab.truth) == {k for k, fault in rabbitmq_lab.keys.items() if fault}


# -- the workers' logs at -v ---------------------------------------------------------------


def test_logs_at_debug_find_every_duplicate_and_its_cause_on_redis(redis_lab: Lab) -> None:
    _check(score(_ingest_logs(redis_lab, "logs"), redis_lab.truth, LOG_EVIDENCE))


def test_logs_at_debug_find_every_duplicate_and_its_cause_on_rabbitmq(rabbitmq_lab: Lab) -> None:
    _check(score(_ingest_logs(rabbitmq_lab, "logs"), rabbitmq_lab.truth, LOG_EVIDENCE))


# -- the Firehose --------------------------------------------------------------------------


def test_the_firehose_finds_every_duplicate_and_its_cause(rabbitmq_lab: Lab) -> None:
    assert rabbitmq_lab.firehose_store is not None
    rows = _duplicates(rabbitmq_lab.firehose_store)
    _check(score(rows, rabbitmq_lab.truth, FIREHOSE_EVIDENCE))


def test_the_firehose_sees_the_crashed_message_redelivered_to_another_connection(
    rabbitmq_lab: Lab,
) -> None:
    assert rabbitmq_lab.firehose_store is not None
    shown = subprocess.run(
        [str(BIN / "dupescope"), "timeline", "--store", str(rabbitmq_lab.firehose_store),
         "crash-1", "--format", "json", "--no-verdict"],
        capture_output=True, timeout=120, check=True,
    ).stdout.decode()
    events = json.loads(shown[: shown.rindex("]") + 1])
    delivers = [e for e in events if e["event"] == "deliver"]
    flags = [json.loads(e["attrs"])["rabbitmq.redelivered"] for e in delivers]
    assert flags == [False, True]
    assert delivers[0]["worker_id"] != delivers[1]["worker_id"]
