"""The scenario on real parts: a real broker, real Celery prefork workers in subprocesses,
real faults, real collectors; and the truth of what ran.

    world = CeleryWorld("redis", folder)       # or "rabbitmq"
    world.run()                                # about 30 s
    rows = world.duplicates("dupescope")       # `dupescope duplicates --format json`
    score(rows, world.truth.by_key)

What a test of another source needs, all known before `run()`:

- `world.broker_url`, `world.queue`: where the workers' messages and events go;
- `world.add_collector(name, *args)`: one more `dupescope collect` running through the
  scenario (e.g. `"--celery-broker", world.broker_url`), its store `world.stores[name]`;
- after `run()`: `world.worker_logs` (each worker's `--logfile`, nodename and pid, and
  whether it was SIGKILLed), `world.truth`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson
from click.testing import CliRunner
from collect_support import Subprocess

from celery_world import ledger
from celery_world.truth import Truth, build
from dupescope.cli import main as dupescope_cli

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
REDIS = "redis://127.0.0.1:6379"
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
VISIBILITY_S = 3.0
NORMAL_TASKS = 60
RESENT_KEYS = 3
CRASH_KEYS = 2
OUTLIVE_KEYS = 2
WAIT_S = 30.0


@dataclass
class WorkerLog:
    """One worker as a log source sees it."""

    nodename: str
    path: Path
    pid: int
    killed: bool = False


def free_redis_db() -> int:
    """An empty Redis database (highest first): the event stream is per database, and a
    quiet one holds only this run's events. DUPESCOPE_TEST_REDIS_DB overrides."""
    import redis

    chosen = os.environ.get("DUPESCOPE_TEST_REDIS_DB")
    if chosen:
        return int(chosen)
    for db in range(15, 0, -1):
        if redis.Redis(host="127.0.0.1", port=6379, db=db).dbsize() == 0:
            return db
    return 0


class Worker:
    """`celery worker --pool=prefork -c 2` in its own process group (a SIGKILL takes the
    main process and its pool processes at once, as a lost host or OOM kill does)."""

    def __init__(self, world: CeleryWorld, name: str) -> None:
        self.nodename = f"{name}@{socket.gethostname()}"
        self.log = world.folder / f"{name}.log"
        command = [
            sys.executable, "-m", "celery", "-A", "celery_world.app", "worker",
            "--pool=prefork", "-c", "2", "-n", self.nodename, "-Q", world.queue,
            "-l", "INFO", "--logfile", str(self.log), "-E",
            "--without-gossip", "--without-mingle",
        ]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=world.env(), start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=open(world.folder / f"{name}.stderr", "wb"),
        )
        self.record = WorkerLog(self.nodename, self.log, self.process.pid)

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"worker {self.nodename} exited: see {self.log}")
        return self.log.exists() and f"{self.nodename} ready." in self.log.read_text()

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.record.killed = True

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()  # warm shutdown: pool processes flush their spans
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def _metrics(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def wait_until(condition, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the scenario stalled: {what}")
        time.sleep(0.1)


class CeleryWorld:
    """One run of the scenario on one broker.

    Faults: (1) a worker SIGKILLed after a task's side effect and before its ack, then a
    new worker (the broker redelivers: Redis after the visibility timeout, RabbitMQ when
    the connection drops); (2) on Redis, a task that outlives the visibility timeout and
    is redelivered while still running; (3) a producer that times out waiting for a
    result and sends the same key again as a new task. Plus normal tasks, each run once.
    """

    def __init__(
        self, broker: str, folder: Path, sources: tuple[str, ...] = ("dupescope", "otel")
    ) -> None:
        self.broker = broker
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.run_id = uuid.uuid4().hex[:8]
        self.queue = f"dupescope-world-{self.run_id}"
        self.redis_db = free_redis_db()
        self.backend_url = f"{REDIS}/{self.redis_db}"
        if broker == "redis":
            self.broker_url = self.backend_url
        elif broker == "rabbitmq":
            self.broker_url = RABBITMQ
        else:
            raise ValueError(f"unknown broker {broker!r}: redis or rabbitmq")
        self.ledger = folder / "ledger.jsonl"
        self.sources = sources
        self.stores: dict[str, Path] = {name: folder / f"store-{name}" for name in sources}
        self._collector_args: dict[str, tuple[str, ...]] = {name: () for name in sources}
        self._collectors: dict[str, Subprocess] = {}
        self.workers: list[Worker] = []
        self.sent: list[dict] = []
        self.truth: Truth | None = None
        #: Each collector's Prometheus counters at the end, by name (what it received and
        #: ignored: a source whose spans are all read past shows it here).
        self.collector_metrics: dict[str, dict[str, float]] = {}
        self.seconds: float | None = None

    # What other sources' tests use.
    def add_collector(self, name: str, *args: str) -> Path:
        """One more `dupescope collect ARGS` running through the scenario; its store."""
        self._collector_args[name] = args
        self.stores[name] = self.folder / f"store-{name}"
        return self.stores[name]

    @property
    def worker_logs(self) -> list[WorkerLog]:
        return [w.record for w in self.workers]

    def duplicates(self, source: str) -> list[dict]:
        """`dupescope duplicates --format json` on that source's store."""
        result = CliRunner().invoke(
            dupescope_cli, ["--store", str(self.stores[source]), "duplicates", "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        return orjson.loads(result.stdout)

    # The run.
    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)]),
            "WORLD_BROKER_URL": self.broker_url,
            "WORLD_BACKEND_URL": self.backend_url,
            "WORLD_QUEUE": self.queue,
            "WORLD_LEDGER": str(self.ledger),
            "WORLD_VISIBILITY_S": str(VISIBILITY_S),
        }
        for name, variable in (("dupescope", "WORLD_DUPESCOPE_URL"), ("otel", "WORLD_OTEL_URL")):
            if name in self._collectors:
                env[variable] = self._collectors[name].url
        return env

    def run(self) -> Truth:
        started = time.monotonic()
        try:
            for name, args in self._collector_args.items():
                self._collectors[name] = Subprocess(self.stores[name], *args)
            self._start_workers(2)
            self._normal_tasks_and_producer_retries()
            self._worker_crashes()
            if self.broker == "redis":
                self._visibility_timeouts()
            # RabbitMQ has no visibility timeout: an unacked message comes back only when
            # its consumer's connection drops, or after the server's consumer_timeout
            # (30 min by default, server-wide on RabbitMQ 3.10; the per-queue
            # x-consumer-timeout needs 3.12), after which the worker's channel is closed
            # and its running task can no longer ack. So fault (2) runs on Redis only.
            self._settle()
        finally:
            for worker in self.workers:
                worker.stop()
            for name, collector in self._collectors.items():
                self.collector_metrics[name] = _metrics(collector.url)
                collector.stop()
            self._clean_broker()
        killed = [w.nodename for w in self.workers if w.record.killed]
        self.truth = build(ledger.read(self.ledger), self.sent, killed)
        self.seconds = time.monotonic() - started
        return self.truth

    def _settle(self, quiet_s: float = 1.0, timeout_s: float = 10.0) -> None:
        """Wait until no collector has received a row for `quiet_s`: the workers' last
        batches are in before they are stopped."""
        deadline = time.monotonic() + timeout_s
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            now = [
                _metrics(c.url).get("dupescope_collector_received_rows_total")
                for c in self._collectors.values()
            ]
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            time.sleep(0.2)

    def _start_workers(self, count: int) -> None:
        fresh = [Worker(self, f"world-{self.run_id}-{len(self.workers) + i}") for i in range(count)]
        self.workers += fresh
        wait_until(lambda: all(w.ready() for w in fresh), "workers starting")

    def _produce(self, plan: list[dict]) -> list[dict]:
        path = self.folder / f"plan-{len(self.sent)}.json"
        path.write_bytes(orjson.dumps(plan))
        done = subprocess.run(
            [sys.executable, "-m", "celery_world.produce", str(path)],
            cwd=ROOT, env=self.env(), capture_output=True, timeout=WAIT_S,
        )
        if done.returncode:
            raise RuntimeError(f"producer failed: {done.stderr.decode()[-3000:]}")
        sent = [orjson.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
        self.sent += sent
        return sent

    def _entries(self, kind: str, keys: set[str]) -> list[ledger.Entry]:
        return [e for e in ledger.read(self.ledger) if e.kind == kind and e.key in keys]

    def _key(self, what: str, i: int) -> str:
        return f"{self.run_id}-{what}-{i}"

    def _normal_tasks_and_producer_retries(self) -> None:
        plan = [{"key": self._key("normal", i), "behaviour": "normal"} for i in range(NORMAL_TASKS)]
        plan += [
            {"key": self._key("resent", i), "behaviour": "slow", "resend_after_s": 0.3}
            for i in range(RESENT_KEYS)
        ]
        sent = self._produce(plan)
        keys = {s["key"] for s in sent}
        wait_until(lambda: len(self._entries("done", keys)) >= len(sent), "normal tasks")

    def _worker_crashes(self) -> None:
        plan = [{"key": self._key("crash", i), "behaviour": "crash"} for i in range(CRASH_KEYS)]
        keys = {s["key"] for s in self._produce(plan)}
        wait_until(lambda: len(self._entries("effect", keys)) >= len(keys), "crash tasks")
        holding = {e.node for e in self._entries("effect", keys)}
        victims = [w for w in self.workers if w.nodename in holding]
        for worker in victims:
            worker.kill()
        self._start_workers(len(victims))
        wait_until(lambda: {e.key for e in self._entries("done", keys)} == keys, "redelivery")

    def _visibility_timeouts(self) -> None:
        plan = [
            {"key": self._key("outlive", i), "behaviour": "outlive"} for i in range(OUTLIVE_KEYS)
        ]
        keys = {s["key"] for s in self._produce(plan)}
        wait_until(lambda: len(self._entries("done", keys)) >= 2 * len(keys), "outliving tasks")

    def _clean_broker(self) -> None:
        """Remove what this run made in the shared Redis and RabbitMQ (never a FLUSHDB)."""
        import redis

        client = redis.Redis.from_url(self.backend_url)
        names = [f"celery-task-meta-{s['task_id']}" for s in self.sent]
        names += [f"dupescope-deliveries-{s['task_id']}" for s in self.sent]
        names += list(client.scan_iter(match=f"*{self.queue}*"))
        for start in range(0, len(names), 500):
            client.delete(*names[start:start + 500])
        for shared in client.scan_iter(match="_kombu.binding*"):
            if client.type(shared) == b"zset":
                stale = [m for m in client.zrange(shared, 0, -1) if self.queue.encode() in m]
                if stale:
                    client.zrem(shared, *stale)
        if self.broker == "rabbitmq":
            from kombu import Connection

            with Connection(self.broker_url) as connection:
                channel = connection.default_channel
                channel.queue_delete(self.queue)
                channel.exchange_delete(self.queue)
