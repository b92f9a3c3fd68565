"""Celery events shaped exactly as Celery 5.7 emits them (captured from a real prefork
worker started with -E): a producer's task-sent, a worker's task-received, its other task
events and its heartbeats."""

from __future__ import annotations

T = 1_796_156_226.0
WORKER = {"hostname": "w1@billing", "utcoffset": 0.0, "pid": 11460}
PRODUCER = {"hostname": "gen11491@web", "utcoffset": 0.0, "pid": 11491}
UUID = "6197a43f-fd0b-4fb0-a655-ad7283d0c23a"


def sent(at: float = T, clock: int = 1, uuid: str = UUID) -> dict:
    return {**PRODUCER, "clock": clock, "uuid": uuid, "root_id": uuid, "parent_id": None,
            "name": "billing.charge", "args": "('order-1',)", "kwargs": "{}", "retries": 0,
            "eta": None, "expires": None, "queue": "billing", "exchange": "",
            "routing_key": "billing", "timestamp": at, "type": "task-sent"}


def received(at: float = T + 0.002, clock: int = 4, uuid: str = UUID, **worker) -> dict:
    return {**WORKER, **worker, "clock": clock, "uuid": uuid, "name": "billing.charge",
            "args": "('order-1',)", "kwargs": "{}", "root_id": uuid, "parent_id": None,
            "retries": 0, "eta": None, "expires": None, "timestamp": at,
            "type": "task-received"}


def task(kind: str, at: float, clock: int, uuid: str = UUID, **fields) -> dict:
    return {**WORKER, "clock": clock, "uuid": uuid, "timestamp": at, "type": kind, **fields}


def heartbeat(at: float, clock: int, **worker) -> dict:
    return {**WORKER, **worker, "clock": clock, "freq": 2.0, "active": 1, "processed": 0,
            "loadavg": [1.88, 3.21, 1.82], "sw_ident": "py-celery", "sw_ver": "5.7.0",
            "sw_sys": "Linux", "timestamp": at, "type": "worker-heartbeat"}
