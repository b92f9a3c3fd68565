"""`dupescope collect --celery-broker`: the command, as a user runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from celery_broker_support import AMQP_URL, REDIS_URL, Worker, new_broker, wait_for
from click.testing import CliRunner
from collect_support import Subprocess, get_json, rows

from collectors.service.celery_source import default_queue_name
from dupescope.cli import main
from store.embedded import EmbeddedStore


def connected(collector: Subprocess) -> list[dict]:
    """The brokers /healthz reports connected (it answers before they are)."""
    health = get_json(collector.url + "/healthz")
    return [r for r in health.get("celery", []) if r["connected"]]


def test_without_celery_installed_the_option_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kombu", None)  # as if not installed
    result = CliRunner().invoke(main, [
        "--store", str(tmp_path / "store"), "collect", "--http-port", "-1",
        "--grpc-port", "-1", "--celery-broker", REDIS_URL,
    ])
    assert result.exit_code == 1
    assert "pip install 'dupescope[celery]'" in result.output


def test_a_broker_url_no_transport_takes_is_refused_naming_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [
        "--store", str(tmp_path / "store"), "collect", "--http-port", "-1",
        "--grpc-port", "-1", "--celery-broker", "foo://127.0.0.1",
    ])
    assert result.exit_code == 1
    assert "No such transport: foo" in result.output


@pytest.mark.timeout(90)
def test_collect_stores_the_events_of_a_worker_and_reports_the_broker(tmp_path: Path) -> None:
    broker = new_broker(REDIS_URL)
    collector = Subprocess(tmp_path / "store", "--celery-broker", broker.url,
                           "--celery-exchange", broker.exchange)
    worker = None
    try:
        [report] = wait_for(lambda: connected(collector), 20, "the broker connection")
        assert report["broker"].endswith("127.0.0.1:6379/11")
        worker = Worker(tmp_path / "worker", broker, "w1@cli-test")
        job = broker.app().send_task("tests.double", args=(4,))

        def events() -> list[str]:
            store = EmbeddedStore(tmp_path / "store")
            try:
                frame = store.execute("SELECT event FROM events WHERE job_id = $j ORDER BY ts",
                                      {"j": job.id})
            finally:
                store.close()
            return list(frame["event"])

        wait_for(lambda: sorted(events()) == ["ack", "deliver", "enqueue"], 30,
                 f"the task's rows\n{worker.output()}")
    finally:
        if worker is not None:
            worker.stop()
        collector.stop()
        broker.cleanup()


@pytest.mark.timeout(120)
def test_a_collector_killed_mid_stream_resumes_from_rabbitmq_losing_and_doubling_nothing(
    tmp_path: Path,
) -> None:
    broker = new_broker(AMQP_URL)
    store_path = tmp_path / "store"
    args = ("--celery-broker", broker.url, "--celery-exchange", broker.exchange)
    collector = Subprocess(store_path, *args)
    worker = None
    try:
        wait_for(lambda: connected(collector), 20, "the broker connection")
        worker = Worker(tmp_path / "worker", broker, "w1@kill-test")
        def settled() -> dict[str, list[str]]:
            store = EmbeddedStore(store_path)
            try:
                table = rows(store)  # repeats collapsed, as every reader does
            finally:
                store.close()
            kinds: dict[str, list[str]] = {}
            for job_id, event in zip(table["job_id"].to_pylist(), table["event"].to_pylist(),
                                     strict=True):
                kinds.setdefault(job_id, []).append(event)
            return kinds

        app = broker.app()
        jobs = [app.send_task("tests.double", args=(i,)) for i in range(10)]
        wait_for(lambda: any(job.id in settled() for job in jobs), 20, "the first rows")
        collector.kill()  # SIGKILL, whatever it was doing
        jobs += [app.send_task("tests.double", args=(i,)) for i in range(10, 20)]
        collector = Subprocess(store_path, *args)

        wait_for(lambda: all("ack" in settled().get(job.id, []) for job in jobs), 40,
                 f"every task's ack\n{worker.output()}")
        kinds = settled()
        assert all(sorted(kinds[job.id]) == ["ack", "deliver", "enqueue"] for job in jobs)
        result = CliRunner().invoke(main, ["--store", str(store_path), "duplicates",
                                           "--format", "json"])
        assert result.output.strip() == "[]"
    finally:
        if worker is not None:
            worker.stop()
        collector.stop()
        broker.cleanup(default_queue_name(f"embedded store at {store_path}", broker.url,
                                          broker.exchange))
