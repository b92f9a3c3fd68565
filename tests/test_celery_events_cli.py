"""`dupescope collect --celery-broker`: the command, as a user runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from celery_broker_support import REDIS_URL, Worker, new_broker, wait_for
from click.testing import CliRunner
from collect_support import Subprocess, get_json

from dupescope.cli import main
from store.embedded import EmbeddedStore


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


@pytest.mark.timeout(90)
def test_collect_stores_the_events_of_a_worker_and_reports_the_broker(tmp_path: Path) -> None:
    broker = new_broker(REDIS_URL)
    collector = Subprocess(tmp_path / "store", "--celery-broker", broker.url,
                           "--celery-exchange", broker.exchange)
    worker = None
    try:
        def connected() -> list[dict]:
            health = get_json(collector.url + "/healthz")  # answered before it connects
            return [r for r in health.get("celery", []) if r["connected"]]

        [report] = wait_for(connected, 20, "the broker connection")
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
