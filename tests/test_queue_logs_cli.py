"""RQ's and arq's worker logs through `dupescope ingest` and `collect --tail`: told from
content (or named with --format), dated by --date or the file's modification time, and
followed as they grow without a repeat across a restart."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner
from collect_support import append, running, wait_for_rows
from support.arq_log_lines import RETRIED, STARTING
from support.rq_log_lines import KILLED, OK, STARTED

from collectors.files import ingest_files
from dupescope.cli import main
from queries import duplicates
from store.embedded import EmbeddedStore


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _causes(store: Path) -> dict[str, str]:
    code, out, err = _run("duplicates", "--store", str(store), "--format", "json")
    assert code == 0, err
    return {row["key"]: row["cause"] for row in json.loads(out)}


def test_rq_and_arq_logs_are_told_from_content_and_their_duplicates_found(tmp_path: Path
                                                                           ) -> None:
    rq, arq, store = tmp_path / "rq.log", tmp_path / "arq.log", tmp_path / "store"
    rq.write_bytes(STARTED + OK + KILLED)
    arq.write_bytes(STARTING + RETRIED)
    code, _, err = _run("ingest", "--store", str(store), "--date", "2026-12-05", str(rq),
                        str(arq))
    assert code == 0, err
    assert "10 events stored" in err and "0 rejected" in err
    assert _causes(store) == {
        "b05893de-191a-4b43-a65c-8fb734a8a168": "worker_crash",
        "f0bf96903c4c49659d684f17f686bf55": "retry_after_failure",
    }


def test_date_dates_the_lines_and_without_it_the_files_time_does(tmp_path: Path) -> None:
    log = tmp_path / "rq.log"
    log.write_bytes(OK)
    written = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()
    os.utime(log, (written, written))
    for store, flags, day in ((tmp_path / "a", ["--date", "2026-12-05"], "2026-12-05"),
                              (tmp_path / "b", [], "2026-11-30")):
        code, _, err = _run("ingest", "--store", str(store), *flags, str(log))
        assert code == 0, err
        code, out, _ = _run("timeline", "1444b288-07e1-4a7e-a893-3ca47f4f1763", "--store",
                            str(store), "--format", "json")
        assert {event["ts"][:10] for event in json.loads(out)} == {day}


def test_a_date_that_is_none_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "rq.log"
    log.write_bytes(OK)
    code, _, err = _run("ingest", "--store", str(tmp_path / "s"), "--date", "5/12/2026",
                        str(log))
    assert code == 2 and "--date" in err and "YYYY-MM-DD" in err


def test_format_names_a_log_whose_first_lines_tell_nothing(tmp_path: Path) -> None:
    log = tmp_path / "rq.log"
    quiet = b"".join(b"08:00:00 some other logger says hello\n" for _ in range(300))
    log.write_bytes(quiet + OK)
    code, _, err = _run("ingest", "--store", str(tmp_path / "s"), "--format", "rq-log",
                        "--date", "2026-12-05", str(log))
    assert code == 0, err
    assert "2 events stored" in err


def test_bad_lines_are_reported_with_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "rq.log"
    log.write_bytes(STARTED + b"07:57:17 Worker w: q1: a.b('o-9') (1444b2\n" + OK)
    code, _, err = _run("ingest", "--store", str(tmp_path / "s"), str(log))
    assert code == 0
    assert f"rejected {log}:2: an RQ start line cut short" in err
    assert "2 events stored" in err and "1 rejected" in err


def test_a_growing_rq_log_is_followed_and_read_again_without_a_repeat(tmp_path: Path
                                                                      ) -> None:
    log, state = tmp_path / "worker.log", tmp_path / "tail-state.json"
    store = EmbeddedStore(tmp_path / "store")
    lines = KILLED.splitlines(keepends=True)
    log.write_bytes(STARTED + lines[0])
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None):
        wait_for_rows(store, 1)
    append(log, b"".join(lines[1:]))  # written while the collector is down
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        wait_for_rows(store, 4)
        assert c.collector.health()["received"] == 3
    ingest_files([str(log)], store)
    distinct = store.execute("SELECT count(DISTINCT event_uid) AS n FROM events")["n"][0]
    assert distinct == 4
    rows = store.execute("SELECT event, execution_id FROM events ORDER BY ts")
    assert rows["execution_id"][1] == rows["execution_id"][0]  # the nack ends the first run
    assert list(duplicates(store)["cause"]) == ["worker_crash"]


def test_rq_redis_names_a_url_that_is_none(tmp_path: Path) -> None:
    code, _, err = _run("collect", "--store", str(tmp_path / "s"), "--http-port", "-1",
                        "--grpc-port", "-1", "--rq-redis", "localhost:6379")
    assert code == 1 and "--rq-redis: not a Redis URL" in err
