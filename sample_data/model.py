"""The discrete-event model: producers, outbox relay, broker, workers, locks, records.

Every lifecycle step is emitted as a contract event at the moment it happens in the
model, and every fact the ground truth needs (who ran what, who held which lock, which
clock was off) is kept in the model's own records, never re-read from the events.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from sample_data import catalog
from sample_data.catalog import JobType
from sample_data.clock import HOUR, MARGIN, MAX_OFFSET_MS, MINUTE, MS, SECOND, SYNCED_MS
from sample_data.engine import Process, Sim
from sample_data.rates import Rates

# Contract events per job on clean traffic, used to size the arrival rate.
EVENTS_PER_JOB = 6.7
MAX_FAILURES = 4  # own failures before a job is dead-lettered
CRASH_LOOP_FACTOR = 6.0  # crash-rate multiplier while the bad release is deployed
LOCK_POLL_US = 250 * MS
FAILOVER_LAG_US = 1 * SECOND  # lock writes newer than this are lost when the store fails over

ExecGen = Generator[int, None, None]


#: Events by which a run says what became of its effect: a duplicate none of whose runs
#: sent one has an unknown outcome (the contract's rule).
EFFECT_EVIDENCE = frozenset({"side_effect", "idempotency_hit", "lock_contended",
                             "occ_conflict", "commit"})


@dataclass(frozen=True)
class Settings:
    """Queue and lock settings laid over the catalogue's for some job types (all where
    `job_types` is None): what a what-if proposes, for the model to run again with. The
    bodies' lengths and the faults stay those of the catalogue's settings."""

    visibility_timeout_ms: int | None = None
    lock_ttl_ms: int | None = None
    heartbeat: bool = False
    job_types: frozenset[str] | None = None

    def applies(self, jt: JobType) -> bool:
        return self.job_types is None or jt.name in self.job_types


@dataclass
class Job:
    job_id: str
    jt: JobType
    idem_key: str | None
    resource_key: str
    producer: str
    clean: bool = False  # a competitor injected by a fault: runs without faults of its own
    rng: random.Random | None = None  # its own draws, where faults are held fixed

    @property
    def key(self) -> str:
        return self.idem_key or self.job_id


@dataclass
class Grant:
    """One lock grant as the lock store saw it."""

    lock_key: str
    owner: str
    ex: Execution
    acquired_at: int
    valid_until: int
    released_at: int | None = None

    @property
    def held_until(self) -> int:
        return self.valid_until if self.released_at is None else min(
            self.valid_until, self.released_at)


@dataclass
class Execution:
    idx: int
    job: Job
    attempt: int
    worker: Worker
    deliver_at: int
    trigger: str  # what made the broker deliver it
    plan: str = "clean"
    last_at: int = 0
    end: str | None = None  # ack, nack, fail, crash (silent), lost (settled by the parent)
    side_effect: bool = False
    #: It sent an event saying what became of its effect (EFFECT_EVIDENCE).
    effect_reported: bool = False
    grant: Grant | None = None
    extend_visibility: bool = True
    heartbeat: bool = False
    rng: random.Random | None = None  # its own draws, where faults are held fixed

    @property
    def worker_id(self) -> str:
        return self.worker.worker_id


@dataclass
class Message:
    job: Job
    attempts: int = 0
    failures: int = 0
    done: bool = False
    queued: bool = False
    current: Execution | None = None
    triggers: dict[str, int] = field(default_factory=dict)  # deliveries so far, by trigger


@dataclass
class Worker:
    worker_id: str
    host: int
    slot: int
    version: str
    alive: bool = True
    busy: Execution | None = None
    proc: Process | None = None
    restart_pending: bool = False


@dataclass
class RawEvent:
    t: int  # true time, µs since EPOCH
    emitter: str  # the process whose clock stamped it
    ex: int  # execution index, -1 when not part of an execution
    job: Job | None
    fields: dict[str, Any]


@dataclass
class Model:
    seed: int
    target_events: int
    rates: Rates
    hours: float = 3.0
    #: Settings laid over the catalogue's; given (even empty), faults are held fixed.
    settings: Settings | None = None
    rng: random.Random = field(init=False)
    sim: Sim = field(init=False, default_factory=Sim)
    events: list[RawEvent] = field(init=False, default_factory=list)
    jobs: list[Job] = field(init=False, default_factory=list)
    executions: list[Execution] = field(init=False, default_factory=list)
    grants: list[Grant] = field(init=False, default_factory=list)
    offsets_ms: dict[str, float] = field(init=False, default_factory=dict)
    keyless_producer_retries: list[tuple[str, str]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.locks: dict[str, Grant] = {}
        self.idem_done: set[str] = set()
        self.rows_done: set[str] = set()
        self.messages: dict[str, Message] = {}
        self.ready: deque[tuple[Message, str]] = deque()
        self.idle: list[Worker] = []
        self.version = catalog.FIRST_VERSION
        self.used_pids: set[tuple[int, int]] = set()
        self.host_offset_ms: dict[int, float] = {}
        self.parents: dict[int, str] = {}
        self.used_resources: dict[str, set[int]] = {}
        self._weights = [jt.weight for jt in catalog.JOB_TYPES]

    # ---- held faults ------------------------------------------------------------------
    # With `settings` given, every draw that decides a job's identity, its faults and its
    # body comes from a stream of its own, named by the job (and for a run, by what
    # delivered it and how many times that did), not from the one shared sequence, whose
    # order follows the timing that the settings change. Two runs at different settings
    # then inject the same faults into the same jobs.

    @property
    def fixed_faults(self) -> bool:
        return self.settings is not None

    def _stream(self, *name: object) -> random.Random:
        return random.Random("/".join(map(str, (self.seed, *name))))

    def _in(self, rng: random.Random | None, fn: Any, *args: Any) -> None:
        """Call `fn` drawing from `rng` (the shared sequence where it is None)."""
        if rng is None:
            fn(*args)
            return
        shared, self.rng = self.rng, rng
        try:
            fn(*args)
        finally:
            self.rng = shared

    def _later(self, delay: int, rng: random.Random | None, fn: Any, *args: Any) -> None:
        self.sim.after(delay, self._in, rng, fn, *args)

    def _owned(self, gen: ExecGen, rng: random.Random | None) -> ExecGen:
        """`gen` drawing from `rng` whenever it runs."""
        while True:
            shared = self.rng
            if rng is not None:
                self.rng = rng
            try:
                delay = next(gen)
            except StopIteration:
                return
            finally:
                self.rng = shared
            yield delay

    def _vt_ms(self, jt: JobType) -> int:
        s = self.settings
        if s is not None and s.visibility_timeout_ms is not None and s.applies(jt):
            return s.visibility_timeout_ms
        return jt.visibility_timeout_ms

    def _ttl_ms(self, jt: JobType) -> int:
        s = self.settings
        if s is not None and s.lock_ttl_ms is not None and s.applies(jt) and jt.locked:
            return s.lock_ttl_ms
        return jt.lock_ttl_ms

    def _beats(self, jt: JobType) -> bool:
        """Whether the settings add a heartbeat: lock renewed, visibility extended."""
        return self.settings is not None and self.settings.heartbeat and self.settings.applies(jt)

    # ---- ids, clocks, sampling -------------------------------------------------------

    def _hex(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def _uuid(self) -> str:
        h = self._hex(128)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def _u(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def _latency(self) -> int:
        """Broker hop: a few milliseconds, occasionally tens."""
        return min(int(self.rng.lognormvariate(math.log(4_000), 0.6)), 60 * MS) + 500

    def _work(self, job: Job) -> int:
        """Body duration; bodies without a heartbeat finish well inside lock TTL and VT."""
        jt = job.jt
        us = int(self.rng.lognormvariate(math.log(jt.median_ms * MS), jt.sigma))
        if job.clean:
            us = max(us, 3 * MARGIN)  # a competitor holds its lock long enough to be seen
        if not jt.heartbeat:
            cap = jt.visibility_timeout_ms * MS - 3 * MARGIN
            if jt.locked:
                cap = min(cap, jt.lock_ttl_ms * MS - 3 * MARGIN)
            us = min(us, cap)
        return max(us, 20 * MS)

    def _backoff(self, failures: int) -> int:
        base = min(2 * SECOND * 2 ** (failures - 1), 60 * SECOND)
        return max(int(base * self.rng.uniform(0.5, 1.5)), 2 * MARGIN)

    def _host_offset(self, host: int, skewed: bool) -> float:
        if skewed:
            ms = self.rng.uniform(60.0, MAX_OFFSET_MS) * self.rng.choice((-1, 1))
        else:
            ms = max(-SYNCED_MS, min(SYNCED_MS, self.rng.gauss(0.0, 1.5)))
        return round(ms, 3)

    def _new_process_id(self, host: int, name: str) -> str:
        while True:
            pid = self._u(1_000, 65_000)
            if (host, pid) not in self.used_pids:
                self.used_pids.add((host, pid))
                break
        wid = f"{name}:{pid}"
        self.offsets_ms[wid] = self.host_offset_ms[host]
        return wid

    # ---- emitting ----------------------------------------------------------------------

    def emit(self, emitter: str, event: str, ex: Execution | None = None,
             job: Job | None = None, **extra: Any) -> None:
        job = ex.job if ex is not None else job
        f: dict[str, Any] = {"event": event}
        if job is not None:
            if event != "enqueue_deduped":
                f["job_id"] = job.job_id
            f["job_type"] = job.jt.name
            if job.idem_key is not None:
                f["idempotency_key"] = job.idem_key
            f["resource_key"] = job.resource_key
            f["queue"] = job.jt.queue
        if ex is not None:
            if not job.jt.celery:
                f["delivery_attempt"] = ex.attempt
            f["worker_id"] = ex.worker_id
            ex.last_at = self.sim.now
            ex.effect_reported = ex.effect_reported or event in EFFECT_EVIDENCE
        else:
            f["worker_id"] = emitter
        f.update(extra)
        self.events.append(RawEvent(self.sim.now, emitter, ex.idx if ex else -1, job, f))

    # ---- fleet -------------------------------------------------------------------------

    def _start_fleet(self) -> None:
        n_hosts = catalog.HOSTS
        draws = [self.rng.random() for _ in range(n_hosts)]
        skewed = {h for h in range(n_hosts) if draws[h] < self.rates.clock_skew}
        if self.rates.clock_skew > 0 and not skewed:
            skewed = {min(range(n_hosts), key=lambda h: draws[h])}
        for h in range(n_hosts):
            self.host_offset_ms[h] = self._host_offset(h, h in skewed)
        # producers and the relay are well synced: they anchor the skew estimate
        self.producers: list[str] = []
        for i, name in enumerate((*catalog.PRODUCERS, catalog.OUTBOX_RELAY)):
            host = 1_000 + i
            self.host_offset_ms[host] = round(
                max(-2.0, min(2.0, self.rng.gauss(0.0, 0.7))), 3)
            self.producers.append(self._new_process_id(host, name))
        self.relay = self.producers.pop()
        self.slots: list[Worker] = []
        for h in range(n_hosts):
            self.parents[h] = self._new_process_id(h, f"host-{h + 1}")
            for s in range(catalog.PROCS_PER_HOST):
                w = Worker(self._new_process_id(h, f"host-{h + 1}"), h, s, self.version)
                self.slots.append(w)
                self.sim.at(self._u(1 * SECOND, 6 * SECOND), self._worker_up, w)

    def _worker_up(self, w: Worker) -> None:
        self.emit(w.worker_id, "worker_start", service_version=w.version)
        self.idle.append(w)
        self._dispatch()

    def _replace(self, old: Worker, delay: int) -> None:
        new = Worker(self._new_process_id(old.host, f"host-{old.host + 1}"), old.host,
                     old.slot, self.version)
        self.slots[old.host * catalog.PROCS_PER_HOST + old.slot] = new
        self.sim.after(delay, self._worker_up, new)

    def _graceful_restart(self, w: Worker) -> None:
        if w in self.idle:
            self.idle.remove(w)
        w.alive = False
        self.emit(w.worker_id, "worker_stop", service_version=w.version)
        self._replace(w, self._u(500 * MS, 2 * SECOND))

    def _roll(self, slot_index: int) -> None:
        w = self.slots[slot_index]
        if not w.alive or w.version == self.version:
            return
        if w.busy is None:
            self._graceful_restart(w)
        else:
            w.restart_pending = True

    def _deploy(self, version: str) -> None:
        self.version = version
        for i in range(len(self.slots)):
            self.sim.after(i * 1_500 * MS, self._roll, i)

    def _crash_factor(self, w: Worker) -> float:
        return CRASH_LOOP_FACTOR if w.version == catalog.CRASH_LOOPING_VERSION else 1.0

    # ---- producers ---------------------------------------------------------------------

    def _resource(self, jt: JobType) -> str:
        pool = catalog.RESOURCE_POOLS[jt.resource]
        used = self.used_resources.setdefault(jt.resource, set())
        n = self._u(1, pool)
        used.add(n)
        return f"{jt.resource}:{n}"

    def _new_job(self, jt: JobType, idem_key: str | None, resource: str, producer: str,
                 clean: bool = False) -> Job:
        job = Job(self._uuid(), jt, idem_key, resource, producer, clean)
        if self.fixed_faults:
            job.rng = self._stream("job", job.job_id)
        self.jobs.append(job)
        return job

    def _idem_key(self, jt: JobType) -> str | None:
        return f"{jt.name}:{self._hex(48)}" if jt.keyed else None

    def produce(self, jt: JobType, resource: str | None = None, clean: bool = False,
                idem_key: str | None = None) -> Job:
        producer = self.rng.choice(self.producers)
        resource = resource or self._resource(jt)
        key = idem_key if idem_key is not None else self._idem_key(jt)
        job = self._new_job(jt, key, resource, producer, clean)
        if jt.outbox and not clean:
            # business change and outbox row commit together; the relay publishes later
            self.emit(producer, "outbox_write", job=job)
            self._later(self._u(50 * MS, 1_500 * MS), job.rng, self.publish, job, self.relay)
            return job
        self.publish(job, producer)
        if not clean and self.rng.random() < self.rates.producer_retry:
            # the publish timed out on the producer's side although the broker took it
            self._later(self._u(MARGIN + 500 * MS, 5 * SECOND), job.rng,
                        self._producer_retry, job)
        return job

    def _producer_retry(self, first: Job) -> None:
        jt = first.jt
        if jt.unique:
            self.emit(first.producer, "enqueue_deduped", job=first)
            return
        job = self._new_job(jt, first.idem_key, first.resource_key, first.producer)
        if first.idem_key is None:
            self.keyless_producer_retries.append((first.job_id, job.job_id))
        self.publish(job, first.producer)

    def publish(self, job: Job, emitter: str) -> None:
        self.emit(emitter, "enqueue", job=job)
        msg = Message(job)
        self.messages[job.job_id] = msg
        self._make_ready(msg, self._latency(), "enqueue")

    def _schedule_traffic(self) -> None:
        horizon = int(self.hours * HOUR)
        n_jobs = max(1, int(self.target_events / EVENTS_PER_JOB))
        mean_gap = horizon / n_jobs
        t = 8 * SECOND
        while True:
            t += int(self.rng.expovariate(1.0 / mean_gap))
            if t >= horizon:
                break
            jt = self.rng.choices(catalog.JOB_TYPES, self._weights)[0]
            self._produce_at(t, jt)
        n_stampedes = self._poisson(self.rates.cache_stampede * self.hours)
        stampede_types = [jt for jt in catalog.JOB_TYPES if jt.stampede]
        for _ in range(n_stampedes):
            t0 = self._u(5 * MINUTE, horizon - 5 * MINUTE)
            jt = self.rng.choice(stampede_types)
            resource = self._resource(jt)
            for _ in range(self._u(15, 40)):
                self._produce_at(t0 + self._u(0, 2 * SECOND), jt, resource)
        # a crash-looping release and its rollback when crashes are on, a clean one otherwise
        deploys = catalog.DEPLOYS_WITH_CRASHES if self.rates.worker_crash > 0 else catalog.DEPLOYS
        for share, version in deploys:
            self.sim.at(int(horizon * share), self._deploy, version)

    def _produce_at(self, t: int, jt: JobType, resource: str | None = None) -> None:
        if not self.fixed_faults:
            self.sim.at(t, self.produce, jt, resource)
            return
        self._produced = getattr(self, "_produced", 0) + 1
        self.sim.at(t, self._in, self._stream("produce", self._produced), self.produce, jt,
                    resource)

    def _poisson(self, lam: float) -> int:
        if lam <= 0:
            return 0
        n, p, limit = 0, 1.0, math.exp(-lam)
        while True:
            p *= self.rng.random()
            if p <= limit:
                return n
            n += 1

    # ---- broker ------------------------------------------------------------------------

    def _make_ready(self, msg: Message, delay: int, trigger: str, force: bool = False) -> None:
        self.sim.after(delay, self._ready, msg, trigger, force)

    def _ready(self, msg: Message, trigger: str, force: bool) -> None:
        if force:
            msg.done = False
        if msg.done or msg.queued:
            return
        msg.queued = True
        self.ready.append((msg, trigger))
        self._dispatch()

    def _dispatch(self) -> None:
        while self.ready and self.idle:
            msg, trigger = self.ready.popleft()
            msg.queued = False
            if msg.done:
                continue
            pick = msg.job.rng if msg.job.rng is not None else self.rng
            i = pick.randrange(len(self.idle))
            self.idle[i], self.idle[-1] = self.idle[-1], self.idle[i]
            self._deliver(msg, self.idle.pop(), trigger)

    def _deliver(self, msg: Message, w: Worker, trigger: str) -> None:
        msg.attempts += 1
        ex = Execution(len(self.executions), msg.job, msg.attempts, w, self.sim.now, trigger)
        self.executions.append(ex)
        msg.current = ex
        w.busy = ex
        if self.fixed_faults:
            n = msg.triggers[trigger] = msg.triggers.get(trigger, 0) + 1
            ex.rng = self._stream("run", msg.job.job_id, trigger, n)
            w.proc = self.sim.spawn(self._owned(self._run(ex, msg), ex.rng))
            self._later(self._vt_ms(msg.job.jt) * MS, msg.job.rng, self._vt_check, msg, ex)
            return
        w.proc = self.sim.spawn(self._run(ex, msg))
        self.sim.after(msg.job.jt.visibility_timeout_ms * MS, self._vt_check, msg, ex)

    def _vt_check(self, msg: Message, ex: Execution) -> None:
        if msg.done or msg.current is not ex or ex.end in ("ack", "nack", "fail", "lost"):
            return
        vt = self._vt_ms(msg.job.jt) * MS
        if ex.end is None and ex.extend_visibility:
            # the consumer extended it
            self._later(vt * 2 // 3, msg.job.rng, self._vt_check, msg, ex)
            return
        if ex.end == "crash" and self.sim.now < ex.last_at + MARGIN:
            self._later(ex.last_at + MARGIN - self.sim.now, msg.job.rng, self._vt_check, msg, ex)
            return
        self._make_ready(msg, self._latency(), "visibility_timeout")

    # ---- locks -------------------------------------------------------------------------

    def _try_acquire(self, lock_key: str, owner: str, ex: Execution, ttl_ms: int) -> bool:
        held = self.locks.get(lock_key)
        if held is not None and held.valid_until > self.sim.now:
            return False
        g = Grant(lock_key, owner, ex, self.sim.now, self.sim.now + ttl_ms * MS)
        self.locks[lock_key] = g
        self.grants.append(g)
        ex.grant = g
        return True

    def _holds(self, g: Grant) -> bool:
        return self.locks.get(g.lock_key) is g and g.valid_until > self.sim.now

    def _release(self, ex: Execution) -> None:
        g = ex.grant
        if g is None or g.released_at is not None:
            return
        ok = self._holds(g)
        if ok:
            del self.locks[g.lock_key]
        g.released_at = self.sim.now
        self.emit(ex.worker_id, "lock_release", ex, lock_key=g.lock_key, lock_owner=g.owner,
                  released=ok)
        if not ok and self.rng.random() < 0.6:
            self.emit(ex.worker_id, "lock_expired", ex, lock_key=g.lock_key, lock_owner=g.owner)

    def _heartbeat(self, ex: Execution, g: Grant) -> ExecGen:
        ttl = self._ttl_ms(ex.job.jt)
        while True:
            yield ttl * MS // 3
            if ex.end is not None or g.released_at is not None:
                return
            if not self._holds(g):
                self.emit(ex.worker_id, "lock_expired", ex, lock_key=g.lock_key,
                          lock_owner=g.owner)
                return
            g.valid_until = self.sim.now + ttl * MS
            self.emit(ex.worker_id, "lock_renew", ex, lock_key=g.lock_key, lock_owner=g.owner,
                      lock_ttl_ms=ttl)

    def _failover(self) -> None:
        """The lock store's replica is promoted without its most recent writes."""
        cutoff = self.sim.now - FAILOVER_LAG_US
        for key in [k for k, g in self.locks.items() if g.acquired_at >= cutoff]:
            del self.locks[key]

    # ---- faults ------------------------------------------------------------------------

    def _plan(self, ex: Execution) -> str:
        """Pick at most one fault for this execution, by its rate."""
        job, jt, r = ex.job, ex.job.jt, self.rates
        if job.clean:
            return "clean"
        # Held fixed, the release a run meets is the one deployed when it was delivered,
        # not that of the worker the timing picked.
        crash = r.worker_crash * (
            (CRASH_LOOP_FACTOR if self.version == catalog.CRASH_LOOPING_VERSION else 1.0)
            if self.fixed_faults else self._crash_factor(ex.worker))
        vt_ok = not jt.locked or jt.heartbeat
        options = [
            ("visibility_timeout", r.visibility_timeout if vt_ok else 0.0),
            ("crash", crash),
            ("fail", r.retry_after_failure),
            ("lock_expiry", r.lock_expiry if jt.locked else 0.0),
            ("split_brain", r.split_brain if jt.locked and jt.lock_ttl_ms >= 8_000 else 0.0),
        ]
        x = self.rng.random()
        for name, p in options:
            if x < p:
                if name == "crash":
                    return self.rng.choices(
                        ("crash_before_effect", "crash_after_effect", "crash_after_commit"),
                        (0.2, 0.35, 0.45))[0]
                if name == "fail":
                    return self.rng.choices(
                        ("fail_before_effect", "fail_after_effect"), (0.75, 0.25))[0]
                if name == "lock_expiry" and self.rng.random() < r.overlap:
                    vt_path = (r.visibility_timeout > 0 and self.rng.random() < 0.5
                               and jt.lock_ttl_ms * MS + 3 * MARGIN < jt.visibility_timeout_ms * MS)
                    return "overlap_redelivery" if vt_path else "overlap_competitor"
                return name
            x -= p
        return "clean"

    # ---- the worker's view of one execution ------------------------------------------

    def _run(self, ex: Execution, msg: Message) -> ExecGen:
        job, jt = ex.job, ex.job.jt
        ex.plan = self._plan(ex)
        ex.heartbeat = jt.heartbeat and ex.plan not in (
            "lock_expiry", "overlap_competitor", "overlap_redelivery")
        ex.extend_visibility = ex.plan not in ("visibility_timeout", "overlap_redelivery")
        if self._beats(jt):
            ex.heartbeat = ex.extend_visibility = True
        self.emit(ex.worker_id, "deliver", ex, visibility_timeout_ms=self._vt_ms(jt))
        yield self._u(1 * MS, 20 * MS)
        work = self._work(job)
        if jt.locked:
            lock_key = f"lock:{job.resource_key}"
            owner = f"{ex.worker_id}/{self._hex(32)}"
            waited = 0
            while not self._try_acquire(lock_key, owner, ex, self._ttl_ms(jt)):
                if waited >= jt.max_wait_ms * MS:
                    held_by = self.locks[lock_key].owner
                    self.emit(ex.worker_id, "lock_contended", ex, lock_key=lock_key,
                              lock_owner=owner, wait_ms=waited // MS, held_by=held_by)
                    yield self._u(1 * MS, 5 * MS)
                    if jt.on_contended == "nack":
                        self._nack(ex, msg, "lock_contended")
                    else:
                        self._ack(ex, msg)
                    return
                yield LOCK_POLL_US
                waited += LOCK_POLL_US
            g = ex.grant
            assert g is not None
            extra = {"wait_ms": waited // MS} if waited else {}
            self.emit(ex.worker_id, "lock_acquire", ex, lock_key=lock_key, lock_owner=owner,
                      lock_ttl_ms=self._ttl_ms(jt), **extra)
            work = self._locked_work(ex, g, work)
            if ex.heartbeat:
                self.sim.spawn(self._owned(self._heartbeat(ex, g), ex.rng))
        yield self._u(1 * MS, 10 * MS)
        if jt.guard == "idem" and job.key in self.idem_done:
            yield from self._absorbed(ex, msg, "idempotency_hit")
            return
        if ex.plan in ("visibility_timeout",):
            # the body outlives the visibility timeout by a clear margin
            elapsed = self.sim.now - ex.deliver_at
            work = jt.visibility_timeout_ms * MS + self._u(2 * MARGIN, 8 * MARGIN) - elapsed
        pre = int(work * self.rng.uniform(0.2, 0.8))
        yield pre
        if ex.plan == "crash_before_effect":
            self._crash(ex, msg)
            return
        if ex.plan == "fail_before_effect":
            self._fail(ex, msg)
            return
        if jt.guard == "occ" and job.key in self.rows_done:
            yield from self._absorbed(ex, msg, "occ_conflict")
            return
        self.emit(ex.worker_id, "side_effect", ex, msg=jt.effect)
        ex.side_effect = True
        self.rows_done.add(job.key)
        if ex.plan == "crash_after_effect":
            yield self._u(5 * MS, max(work - pre, 10 * MS))
            self._crash(ex, msg)
            return
        yield max(work - pre, 1 * MS)
        if ex.plan == "fail_after_effect":
            self._fail(ex, msg)
            return
        self.emit(ex.worker_id, "commit", ex)
        if jt.keyed:
            self.idem_done.add(job.key)
        yield self._u(1 * MS, 10 * MS)
        if ex.plan == "crash_after_commit":
            self._crash(ex, msg)
            return
        self._release(ex)
        yield self._u(1 * MS, 5 * MS)
        self._ack(ex, msg)

    def _locked_work(self, ex: Execution, g: Grant, work: int) -> int:
        """Shape the body's length for lock faults, now that the grant time is known."""
        jt = ex.job.jt
        ttl = jt.lock_ttl_ms * MS
        if ex.plan == "lock_expiry":
            return ttl + self._u(2 * MARGIN, 6 * MARGIN)
        if ex.plan == "overlap_competitor":
            # another job on the same resource takes the expired lock mid-gap
            at = g.acquired_at + ttl + self._u(3 * MARGIN // 2, 5 * MARGIN // 2)
            self._later(at - self.sim.now, ex.rng, self.produce, jt, ex.job.resource_key, True)
            return ttl + self._u(5 * MARGIN, 9 * MARGIN)
        if ex.plan == "overlap_redelivery":
            # the job's own redelivery, after the visibility timeout, takes the expired lock
            end = ex.deliver_at + jt.visibility_timeout_ms * MS + self._u(4 * MARGIN, 10 * MARGIN)
            return end - self.sim.now
        if ex.plan == "split_brain":
            self.sim.after(self._u(50 * MS, 300 * MS), self._failover)
            same_key = self.rates.producer_retry > 0 and jt.keyed and self.rng.random() < 0.5
            self._later(400 * MS, ex.rng, self.produce, jt, ex.job.resource_key, True,
                        ex.job.idem_key if same_key else None)
            return min(ttl - 2 * MARGIN, self._u(4 * MARGIN, 8 * MARGIN))
        return work

    # ---- settling ----------------------------------------------------------------------

    def _finish(self, ex: Execution) -> None:
        w = ex.worker
        w.busy = None
        if not w.alive:
            return
        if w.restart_pending:
            self._graceful_restart(w)
            return
        self.idle.append(w)
        self._dispatch()

    def _absorbed(self, ex: Execution, msg: Message, guard_event: str) -> ExecGen:
        """The job's guard caught a repeat: it says so, and the run ends without the effect."""
        self.emit(ex.worker_id, guard_event, ex)
        yield self._u(1 * MS, 5 * MS)
        self._release(ex)
        self._ack(ex, msg)

    def _ack(self, ex: Execution, msg: Message) -> None:
        self.emit(ex.worker_id, "ack", ex)
        ex.end = "ack"
        msg.done = True
        if not ex.job.clean and self.rng.random() < self.rates.broker_redelivery:
            # the ack was lost on the broker's side; it delivers the job once more
            self._make_ready(msg, self._u(2 * MARGIN, 60 * SECOND), "broker_redelivery", True)
        self._finish(ex)

    def _nack(self, ex: Execution, msg: Message, reason: str) -> None:
        msg.failures += 1
        delay = self._backoff(msg.failures)
        self.emit(ex.worker_id, "nack", ex, reason=reason, delay_ms=delay // MS)
        ex.end = "nack"
        self._make_ready(msg, delay, "retry")
        self._finish(ex)

    def _fail(self, ex: Execution, msg: Message) -> None:
        self._release(ex)
        reason = self.rng.choice((
            "ConnectionResetError: peer reset", "TimeoutError: upstream 504",
            "HTTPError: 503 Service Unavailable", "OperationalError: deadlock detected"))
        if msg.failures + 1 < MAX_FAILURES:
            self._nack(ex, msg, reason)
            return
        msg.failures += 1
        self.emit(ex.worker_id, "fail", ex, reason=reason)
        ex.end = "fail"
        if self.rng.random() < 0.5:
            # an operator redrives the dead-letter queue
            self._make_ready(msg, self._u(3 * MINUTE, 10 * MINUTE), "redrive")
        self._finish(ex)

    def _crash(self, ex: Execution, msg: Message) -> None:
        """The worker process is killed: it says nothing more, ever."""
        w = ex.worker
        ex.end = "crash"
        w.alive = False
        w.busy = None
        self._replace(w, self._u(1 * SECOND, 4 * SECOND))
        if ex.job.jt.celery:
            # the pool's parent process notices the dead child and settles its task
            self._later(self._u(50 * MS, 300 * MS), msg.job.rng, self._worker_lost, ex, msg)

    def _worker_lost(self, ex: Execution, msg: Message) -> None:
        parent = self.parents[ex.worker.host]
        self.emit(parent, "nack", ex,
                  reason="WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL).')",
                  settled_by=parent)
        ex.end = "lost"
        self._make_ready(msg, self._u(MARGIN + 200 * MS, 3 * SECOND), "worker_lost")

    # ---- run ---------------------------------------------------------------------------

    def run(self) -> Model:
        self._start_fleet()
        self._schedule_traffic()
        self.sim.run()
        # graceful shutdown of the fleet once the queue has drained
        self.sim.now += 5 * SECOND
        for w in self.slots:
            if w.alive:
                self.emit(w.worker_id, "worker_stop", service_version=w.version)
        return self

    def offset_us(self, emitter: str) -> int:
        return round(self.offsets_ms[emitter] * 1000)
