"""`dupescope ingest` on Celery worker logs: detected, or named with --format celery-log,
and the flags for what such a log does not say."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner
from support.celery_log_lines import ADD, BANNER, FLAKY

from collectors import files, text_logs
from collectors.celery_log import CeleryLogReader
from collectors.decoders import Registry
from collectors.decoders.celery_log import CeleryLogText
from collectors.decoders.json_lines import LinesReference
from collectors.normalise import Normaliser
from dupescope.cli import main


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _events(store: Path, key: str) -> list[dict]:
    code, out, _ = _run("timeline", key, "--store", str(store), "--format", "json")
    assert code == 0
    return json.loads(out)


def test_a_celery_log_is_detected_and_its_duplicate_found(tmp_path: Path) -> None:
    log, store = tmp_path / "worker.log", tmp_path / "store"
    log.write_bytes(BANNER + FLAKY)
    code, _, err = _run("ingest", "--store", str(store), str(log))
    assert code == 0, err
    assert "4 events stored" in err and "0 rejected" in err
    code, out, _ = _run("duplicates", "--store", str(store), "--format", "json")
    assert [row["cause"] for row in json.loads(out)] == ["retry_after_failure"]


def test_format_celery_log_reads_a_log_its_start_does_not_tell(tmp_path: Path) -> None:
    log, store = tmp_path / "worker.log", tmp_path / "store"
    noisy_start = b"".join(b"loading plugin %d\n" % i for i in range(300))
    log.write_bytes(noisy_start + ADD)
    code, _, err = _run("ingest", "--store", str(store), "--format", "celery-log", str(log))
    assert code == 0, err
    assert "2 events stored" in err and "300 ignored" in err


def test_celery_hostname_names_the_worker(tmp_path: Path) -> None:
    log, store = tmp_path / "worker.log", tmp_path / "store"
    log.write_bytes(ADD)
    code, _, err = _run("ingest", "--store", str(store), "--celery-hostname", "celery@web-1",
                        str(log))
    assert code == 0, err
    events = _events(store, "e752fc26-8130-426c-ba61-db3b4aee25d8")
    assert {event["worker_id"] for event in events} == {"celery@web-1"}


def test_celery_timezone_moves_the_times_to_utc(tmp_path: Path) -> None:
    log, store = tmp_path / "worker.log", tmp_path / "store"
    log.write_bytes(ADD)
    code, _, err = _run("ingest", "--store", str(store), "--celery-timezone", "+01:00", str(log))
    assert code == 0, err
    events = _events(store, "e752fc26-8130-426c-ba61-db3b4aee25d8")
    assert events[0]["ts"].startswith("2026-12-01T19:26:39.561")


def test_an_unknown_celery_timezone_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(ADD)
    code, _, err = _run("ingest", "--store", str(tmp_path / "store"), "--celery-timezone",
                        "Mars/Olympus", str(log))
    assert code == 2 and "unknown time zone 'Mars/Olympus'" in err


@dataclass(frozen=True)
class NotedCeleryLog(CeleryLogText):
    """The registered Celery-log decoder, noting each log it gives a reader for."""

    logs: list[str] = field(default_factory=list)

    def reader(self, normaliser: Normaliser, source: str) -> CeleryLogReader:
        self.logs.append(source)
        return super().reader(normaliser, source)


def test_ingest_reads_a_celery_log_with_the_registrys_decoder(
    tmp_path: Path, monkeypatch
) -> None:
    decoder, registry = NotedCeleryLog(), Registry()
    registry.register(LinesReference())
    registry.register(decoder)
    monkeypatch.setattr(files, "REGISTRY", registry)
    monkeypatch.setattr(text_logs, "REGISTRY", registry)
    log, store = tmp_path / "worker.log", tmp_path / "store"
    log.write_bytes(ADD)
    code, _, err = _run("ingest", "--store", str(store), "--format", "celery-log", str(log))
    assert code == 0, err
    assert decoder.logs == [str(log)] and "2 events stored" in err
