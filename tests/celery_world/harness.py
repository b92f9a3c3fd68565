"""The scenario on real parts: a real broker, real Celery prefork workers in subprocesses,
real faults, real collectors; and the truth of what ran.

    world = CeleryWorld("redis", folder)       # or "rabbitmq"
    world.run()                                # about 30-40 s on a busy 2-core machine
    rows = world.duplicates("dupescope")       # `dupescope duplicates --format json`
    score(rows, world.truth.by_key)            # or truth.by_job_id for sources keyed by it

Sources scored from the same run: "dupescope" (dupescope's own Celery instrumentation)
and "otel" (CeleryInstrumentor spans alone), each through its own `dupescope collect`
(`sources=` chooses; `sources=()` runs uninstrumented workers); the `celery_world`
fixture adds "events" (a `--celery-broker` collector on the run's event exchange) and
"logs" (every worker's log in one `dupescope ingest`). What a test of another source
needs:

- before `run()`: `world.broker_url`, `world.queue`, `world.event_exchange` (the run's
  own, for `--celery-exchange`), `world.redis_db`; and
  `world.add_collector(name, *args)`: one more `dupescope collect ARGS` running through the
  scenario, started before the workers (e.g. `"--celery-broker", world.broker_url`), whose
  store is `world.stores[name]`;
- after `run()`: `world.worker_logs` (each worker's `--logfile` path, nodename and main
  pid, and whether it was SIGKILLed), `world.truth`, `world.duplicates(name)` for any
  store in `world.stores` (add one for a store you fill yourself, e.g. by `dupescope
  ingest`), `world.ingest_worker_logs(name)` (all the worker logs in one store),
  `world.collector_metrics[name]` and `world.collector_health[name]` (its counters and
  /healthz at the end), `world.phases`.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
from celery_worker_support import (
    WorkerProcess,
    delete_queues_and_exchanges,
    delete_redis_keys,
    says_ready,
)
from click.testing import CliRunner
from collect_support import free_port, get_json
from support.redis_db import claim_redis_db, release_redis_db

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
#: Tasks whose pool process is SIGKILLed mid-run in `run_pool_kills` (the worker's main
#: process lives on and settles them), and the normal tasks around them.
POOL_KILL_KEYS = 2
POOL_NORMAL_TASKS = 6
#: The pool-kill scenario's Redis visibility timeout. No task in it outlives one on
#: purpose, and on a loaded machine the worker's main process may settle a lost pool
#: process (and requeue its task) seconds late: a short timeout restored the task first,
#: and its second run was then truly a visibility timeout's.
POOL_KILL_VISIBILITY_S = 30.0
#: How long the scenario may go without any progress (no run of a task began or ended, no
#: worker logged a line) before it counts as stalled. A step waits as long as progress
#: goes on: on a machine busy with other work the same step takes several times longer,
#: which is no stall.
STALL_S = 30.0
#: How long a worker may take to come up, logging nothing meanwhile: importing Celery,
#: OpenTelemetry and dupescope takes seconds alone, tens of them on a busy machine.
STARTUP_S = 120.0


@dataclass
class WorkerLog:
    """One worker as a log source sees it."""

    nodename: str
    path: Path
    pid: int
    killed: bool = False


class Worker(WorkerProcess):
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
        super().__init__(
            command, cwd=ROOT, env=world.env(),
            stdout=subprocess.DEVNULL, stderr=open(world.folder / f"{name}.stderr", "wb"),
        )
        self.record = WorkerLog(self.nodename, self.log, self.process.pid)

    def ready(self) -> bool:
        if not self.alive():
            raise RuntimeError(f"worker {self.nodename} exited: see {self.log}")
        return says_ready(self.log, self.nodename)

    def kill(self, wait_s: float = 10) -> None:
        """SIGKILL without waiting (victims die together; `reap` waits)."""
        self.kill_group()
        self.record.killed = True

    def reap(self) -> None:
        self.process.wait(10)


class Collector:
    """`dupescope collect` in a subprocess, started without waiting for it (see `ready`),
    so that the workers start meanwhile: their exporters retry until it answers."""

    def __init__(self, store: Path, log: Path, *args: str) -> None:
        self.http_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        command = [
            sys.executable, "-c", "from dupescope.cli import main; main()", "collect",
            "--store", str(store), "--http-port", str(self.http_port), "--grpc-port", "-1",
            "--log-level", "WARNING", *args,
        ]
        self.log = log
        self.process = subprocess.Popen(
            command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL, stderr=open(log, "wb"),
        )

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"collector exited: {self.log.read_text()[-3000:]}")
        try:
            get_json(f"{self.url}/healthz")
        except OSError:
            return False
        return True

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
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


def _health(url: str) -> dict:
    try:
        return get_json(f"{url}/healthz")
    except OSError:
        return {}


def wait_until(
    condition: Callable[[], bool], what: str, timeout_s: float = STALL_S,
    progress: Callable[[], object] | None = None, detail: Callable[[], str] | None = None,
) -> None:
    """Until `condition()`; a TimeoutError once `timeout_s` passed with no change in
    `progress()` (if given), saying `detail()`."""
    last = progress() if progress else None
    deadline = time.monotonic() + timeout_s
    while not condition():
        if progress is not None and (now := progress()) != last:
            last, deadline = now, time.monotonic() + timeout_s
        elif time.monotonic() > deadline:
            said = f" ({detail()})" if detail else ""
            raise TimeoutError(
                f"the scenario stalled: {what}, no progress for {timeout_s:g} s{said}")
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
        self, broker: str, folder: Path, sources: tuple[str, ...] = ("dupescope", "otel"),
        reject_on_worker_lost: bool = False, visibility_s: float = VISIBILITY_S,
    ) -> None:
        self.broker = broker
        #: The Redis transport's visibility timeout in the workers.
        self.visibility_s = visibility_s
        #: Celery's task_reject_on_worker_lost in the workers (with acks_late, always on).
        self.reject_on_worker_lost = reject_on_worker_lost
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.run_id = uuid.uuid4().hex[:8]
        self.queue = f"dupescope-world-{self.run_id}"
        # Celery's default event exchange is shared by every app on a RabbitMQ vhost: a
        # receiver on it would read other runs' duplicates as this run's.
        self.event_exchange = f"{self.queue}.events"
        self.redis_db = claim_redis_db()
        self.backend_url = f"{REDIS}/{self.redis_db}"
        if broker == "redis":
            self.broker_url = self.backend_url
        elif broker == "rabbitmq":
            self.broker_url = RABBITMQ
        else:
            raise ValueError(f"unknown broker {broker!r}: redis or rabbitmq")
        self.ledger = folder / "ledger.jsonl"
        #: The app's own log of its side effects, a JSON line each keyed by the task id.
        self.effects_log = folder / "effects.jsonl"
        self.sources = sources
        self.stores: dict[str, Path] = {name: folder / f"store-{name}" for name in sources}
        self._collector_args: dict[str, tuple[str, ...]] = {name: () for name in sources}
        self._collectors: dict[str, Collector] = {}
        self._producer: subprocess.Popen | None = None
        self.workers: list[Worker] = []
        self.sent: list[dict] = []
        self.truth: Truth | None = None
        #: Each collector's Prometheus counters at the end, by name (what it received and
        #: ignored: a source whose spans are all read past shows it here).
        self.collector_metrics: dict[str, dict[str, float]] = {}
        self.seconds: float | None = None
        #: Each collector's /healthz at the end, by name.
        self.collector_health: dict[str, dict] = {}
        #: Seconds each step of the run took, in order.
        self.phases: dict[str, float] = {}
        #: The pids of the pool processes `run_pool_kills` SIGKILLed.
        self.killed_pool_processes: list[int] = []

    # What other sources' tests use.
    def add_collector(self, name: str, *args: str) -> Path:
        """One more `dupescope collect ARGS` running through the scenario; its store."""
        self._collector_args[name] = args
        self.stores[name] = self.folder / f"store-{name}"
        return self.stores[name]

    @property
    def worker_logs(self) -> list[WorkerLog]:
        return [w.record for w in self.workers]

    def ingest_worker_logs(self, name: str = "logs") -> Path:
        """Every worker's log file, the SIGKILLed ones' too, in one `dupescope ingest
        --format celery-log` into a store of its own; that store."""
        store = self.stores[name] = self.folder / f"store-{name}"
        paths = [str(log.path) for log in self.worker_logs]
        result = CliRunner().invoke(
            dupescope_cli, ["--store", str(store), "ingest", "--format", "celery-log", *paths]
        )
        assert result.exit_code == 0, result.output
        return store

    def ingest(self, name: str, *paths: Path, into: str | None = None) -> Path:
        """`dupescope ingest PATHS` into store `name`, a copy of store `into` first if
        given (that store itself stays as it was); the store."""
        import shutil

        store = self.stores[name] = self.folder / f"store-{name}"
        if into is not None:
            shutil.copytree(self.stores[into], store)
        result = CliRunner().invoke(
            dupescope_cli, ["--store", str(store), "ingest", *map(str, paths)])
        assert result.exit_code == 0, result.output
        return store

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
            "WORLD_EVENT_EXCHANGE": self.event_exchange,
            "WORLD_LEDGER": str(self.ledger),
            "WORLD_VISIBILITY_S": str(self.visibility_s),
            "WORLD_EFFECTS_LOG": str(self.effects_log),
            "WORLD_REJECT_ON_WORKER_LOST": "1" if self.reject_on_worker_lost else "0",
        }
        for name, variable in (("dupescope", "WORLD_DUPESCOPE_URL"), ("otel", "WORLD_OTEL_URL")):
            if name in self._collectors:
                env[variable] = self._collectors[name].url
        return env

    def run(self) -> Truth:
        started = time.monotonic()
        try:
            with self._phase("collectors, workers and producer"):
                self._start_collectors_and_producer()
                self._start_workers(2)
                wait_until(lambda: all(c.ready() for c in self._collectors.values()),
                           "collectors starting", STARTUP_S)
            with self._phase("normal tasks and producer retries"):
                self._normal_tasks_and_producer_retries()
            with self._phase("settle"):
                # Everything exported before a worker dies: a SIGKILL loses the batch its
                # process had not sent yet, and the run it should lose is the crashed one,
                # not a normal run that ended a moment before.
                self._settle()
            with self._phase("worker crashes"):
                self._worker_crashes()
            if self.broker == "redis":
                with self._phase("visibility timeouts"):
                    self._visibility_timeouts()
            # RabbitMQ has no visibility timeout: an unacked message comes back only when
            # its consumer's connection drops, or after the server's consumer_timeout
            # (30 min by default, server-wide on RabbitMQ 3.10; the per-queue
            # x-consumer-timeout needs 3.12), after which the worker's channel is closed
            # and its running task can no longer ack. So fault (2) runs on Redis only.
            with self._phase("last settle"):
                self._settle()
        finally:
            self._stop()
        return self._finish(started)

    def run_pool_kills(self, count: int = POOL_KILL_KEYS) -> Truth:
        """The pool-process scenario: one worker; normal tasks, then `count` tasks whose
        pool process is SIGKILLed after the effect, the worker's main process alive. With
        `reject_on_worker_lost` Celery requeues them and they run again; without, they do
        not."""
        started = time.monotonic()
        try:
            with self._phase("collectors, worker and producer"):
                self._start_collectors_and_producer()
                self._start_workers(1)
                wait_until(lambda: all(c.ready() for c in self._collectors.values()),
                           "collectors starting", STARTUP_S)
            with self._phase("normal tasks"):
                plan = [{"key": self._key("normal", i), "behaviour": "normal"}
                        for i in range(POOL_NORMAL_TASKS)]
                keys = {s["key"] for s in self._produce(plan)}
                self._wait_for_runs("done", keys, "normal tasks",
                                    lambda done: len(done) >= len(keys))
            with self._phase("pool process kills"):
                self._pool_process_kills(count)
            with self._phase("last settle"):
                self._settle()
        finally:
            self._stop()
        return self._finish(started)

    def _start_collectors_and_producer(self) -> None:
        for name, args in self._collector_args.items():
            log = self.folder / f"collector-{name}.stderr"
            self._collectors[name] = Collector(self.stores[name], log, *args)
        self._producer = subprocess.Popen(
            [sys.executable, "-m", "celery_world.produce"], cwd=ROOT, env=self.env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(self.folder / "producer.stderr", "wb"),
        )

    def _stop(self) -> None:
        with self._phase("stop"):
            for worker in self.workers:
                worker.terminate()
            for worker in self.workers:
                worker.stop()
            if self._producer is not None:
                self._producer.stdin.close()  # its spans are flushed as it leaves
                self._producer.wait(20)
            for name, collector in self._collectors.items():
                self.collector_metrics[name] = _metrics(collector.url)
                self.collector_health[name] = _health(collector.url)
                collector.process.terminate()
            for collector in self._collectors.values():
                collector.stop()
        self._clean_broker()

    def _finish(self, started: float) -> Truth:
        killed = [w.nodename for w in self.workers if w.record.killed]
        self.truth = build(ledger.read(self.ledger), self.sent, killed)
        self.seconds = time.monotonic() - started
        return self.truth

    def _pool_process_kills(self, count: int) -> None:
        """SIGKILL the pool process of each of `count` crash tasks once it ran its effect
        (its pid is in the ledger); then wait for the main process to settle each (its
        log says WorkerLostError) and, where Celery requeues, for the second run."""
        plan = [{"key": self._key("poolkill", i), "behaviour": "crash"} for i in range(count)]
        keys = {s["key"] for s in self._produce(plan)}
        self._wait_for_runs("effect", keys, "pool-kill tasks",
                            lambda runs: len(runs) >= len(keys))
        for entry in self._entries("effect", keys):
            os.kill(entry.pid, signal.SIGKILL)
            self.killed_pool_processes.append(entry.pid)
        if self.reject_on_worker_lost:
            self._wait_for_runs("done", keys, "requeued runs",
                                lambda done: {e.key for e in done} == keys, STARTUP_S)
        else:
            logs = [w.log for w in self.workers]
            wait_until(lambda: sum(f.read_text(errors="replace").count("WorkerLostError")
                                   for f in logs if f.exists()) >= count,
                       "the main process settling its lost pool processes",
                       progress=self._progress)

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(time.monotonic() - started, 2)

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

    def _start_workers(self, count: int, wait: bool = True) -> list[Worker]:
        fresh = [Worker(self, f"world-{self.run_id}-{len(self.workers) + i}") for i in range(count)]
        self.workers += fresh
        if wait:
            self._wait_ready(fresh)
        return fresh

    def _wait_ready(self, workers: list[Worker]) -> None:
        wait_until(lambda: all(w.ready() for w in workers), "workers starting", STARTUP_S,
                   detail=lambda: f"not ready: {[w.log for w in workers if not w.ready()]}")

    def _progress(self) -> tuple[int, ...]:
        """What grows while the scenario moves: the ledger, and every worker's log."""
        files = [self.ledger, *(w.log for w in self.workers)]
        return tuple(f.stat().st_size if f.exists() else 0 for f in files)

    def _wait_for_runs(self, kind: str, keys: set[str], what: str,
                       done: Callable[[list[ledger.Entry]], bool],
                       timeout_s: float = STALL_S) -> None:
        """Until `done` holds of the ledger's `kind` entries for `keys`, as long as the
        scenario moves; a stall says which keys have none and which workers are alive."""
        def detail() -> str:
            seen = {e.key for e in self._entries(kind, keys)}
            alive = [w.nodename for w in self.workers if w.process.poll() is None]
            return f"no {kind} for {sorted(keys - seen)[:10]}; workers alive {alive}; " \
                f"ledger and logs in {self.folder}"

        wait_until(lambda: done(self._entries(kind, keys)), what, timeout_s,
                   progress=self._progress, detail=detail)

    def _produce(self, plan: list[dict]) -> list[dict]:
        """Hand the producer a plan; the tasks it sent."""
        producer = self._producer
        assert producer is not None and producer.stdin and producer.stdout
        producer.stdin.write(orjson.dumps(plan) + b"\n")
        producer.stdin.flush()
        sent = []
        while (line := producer.stdout.readline()) not in (b"", b"sent\n"):
            sent.append(orjson.loads(line))
        if not line:
            stderr = (self.folder / "producer.stderr").read_text()[-3000:]
            raise RuntimeError(f"producer failed: {stderr}")
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
        self._wait_for_runs("done", keys, "normal tasks", lambda done: len(done) >= len(sent))

    def _worker_crashes(self) -> None:
        plan = [{"key": self._key("crash", i), "behaviour": "crash"} for i in range(CRASH_KEYS)]
        keys = {s["key"] for s in self._produce(plan)}
        self._wait_for_runs("effect", keys, "crash tasks", lambda runs: len(runs) >= len(keys))
        holding = {e.node for e in self._entries("effect", keys)}
        victims = [w for w in self.workers if w.nodename in holding]
        # All at once: a victim still running when another dies could take (RabbitMQ
        # hands it over at once) and finish the redelivery, then die before exporting it.
        # So every victim is stopped before any is killed: a stopped worker keeps its
        # connection (nothing is redelivered yet) and runs nothing, however long the
        # harness waits for a core between two kills.
        for worker in victims:
            worker.stop_group()
        for worker in victims:
            worker.kill()
        for worker in victims:
            worker.reap()
        # Another worker for each one lost; a survivor may take the redelivery first.
        fresh = self._start_workers(len(victims), wait=False)
        # Up to a worker's start-up: the survivors may all have been victims.
        self._wait_for_runs("done", keys, "redelivery",
                            lambda done: {e.key for e in done} == keys, STARTUP_S)
        self._wait_ready(fresh)

    def _visibility_timeouts(self) -> None:
        plan = [
            {"key": self._key("outlive", i), "behaviour": "outlive"} for i in range(OUTLIVE_KEYS)
        ]
        keys = {s["key"] for s in self._produce(plan)}
        self._wait_for_runs("done", keys, "outliving tasks",
                            lambda done: len(done) >= 2 * len(keys))

    def _clean_broker(self) -> None:
        """Remove what this run made in the shared Redis and RabbitMQ (never a FLUSHDB)."""
        import redis

        client = redis.Redis.from_url(self.backend_url)
        names = [f"celery-task-meta-{s['task_id']}" for s in self.sent]
        names += [f"dupescope-deliveries-{s['task_id']}" for s in self.sent]
        for start in range(0, len(names), 500):
            client.delete(*names[start:start + 500])
        delete_redis_keys(client, f"*{self.queue}*")  # the event exchange's bindings too
        release_redis_db(self.redis_db)
        for shared in client.scan_iter(match="_kombu.binding*"):
            if client.type(shared) == b"zset":
                stale = [m for m in client.zrange(shared, 0, -1) if self.queue.encode() in m]
                if stale:
                    client.zrem(shared, *stale)
        if self.broker == "rabbitmq":
            # The event receivers' durable queues, and the run's exchanges.
            receivers = [
                broker["queue"]
                for health in self.collector_health.values()
                for broker in health.get("celery", [])
                if broker.get("queue")
            ]
            delete_queues_and_exchanges(self.broker_url, queues=[self.queue, *receivers],
                                        exchanges=[self.queue, self.event_exchange])
