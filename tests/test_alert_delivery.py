"""Delivery to a real HTTP receiver: one incident, one delivery; retries keep the id."""

from __future__ import annotations

import urllib.request

from alert_receiver import Receiver, make_watcher
from forensics_cases import locked
from prometheus_client.parser import text_string_to_metric_families

from alerts import history
from alerts.ids import alert_id
from alerts.sinks import WebhookSink

OVERLAPPED = locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")]) + locked(
    "j1", 2, "w2", "o2", "00:12", 10_000, [("00:13", "lock_release"), ("00:13", "ack")]
)
HEADLINE_ID = alert_id("lock_expired_while_running", "j1", 1, "lock:acct-1", "o1")
STALE_ID = alert_id("stale_owner_write", "j1", 1, "lock:acct-1", "o1")


def test_one_incident_is_one_delivery(embedded, make_table) -> None:
    embedded.write(make_table(OVERLAPPED))
    with Receiver() as receiver:
        sink = WebhookSink(receiver.url, dashboard_url="http://dash:8501/")
        watcher = make_watcher(embedded, [sink])
        fired = watcher.tick()
        watcher.tick()
        assert {a.id for a in fired} == {HEADLINE_ID, STALE_ID}
        assert sorted(receiver.keys()) == sorted([HEADLINE_ID, STALE_ID])
    body = receiver.accepted[HEADLINE_ID]
    assert body["id"] == HEADLINE_ID
    assert (body["rule"], body["severity"], body["key"]) == (
        "lock_expired_while_running", "critical", "j1"
    )
    assert body["job_type"] == "billing.charge"
    assert body["timeline_url"] == "http://dash:8501/timeline?key=j1"
    assert body["evidence"]["overlapped_by"] == "o2"
    assert body["evidence"]["expired_at"] == "2025-11-30T12:00:10.000000Z"
    assert body["evidence"]["overrun_ms"] == 5000.0


def test_a_flaky_receiver_gets_the_same_id_every_time(embedded, make_table) -> None:
    embedded.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])))
    with Receiver(fail_first=2) as receiver:
        watcher = make_watcher(embedded, [WebhookSink(receiver.url)])
        watcher.tick()
    assert receiver.keys() == [HEADLINE_ID] * 3
    assert list(receiver.accepted) == [HEADLINE_ID]
    [row] = history(embedded).to_dict(orient="records")
    assert (row["alert_id"], row["deliveries_sent"], row["deliveries_pending"]) == (
        HEADLINE_ID, 1, 0
    )


def test_retries_left_over_wait_in_the_outbox(embedded, make_table) -> None:
    embedded.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])))
    with Receiver(fail_first=4) as receiver:
        watcher = make_watcher(embedded, [WebhookSink(receiver.url)])
        watcher.tick()  # three attempts fail; the fourth waits for its backoff
        assert watcher.state.pending_count() == 1
        assert len(receiver.requests) == 3
        import time

        time.sleep(0.1)
        watcher.tick()  # the fourth fails, the fifth is accepted
    assert receiver.keys() == [HEADLINE_ID] * 5
    assert watcher.state.pending_count() == 0


def test_a_rejected_request_is_not_retried(embedded, make_table) -> None:
    embedded.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])))
    with Receiver(fail_first=10, fail_status=400) as receiver:
        make_watcher(embedded, [WebhookSink(receiver.url)]).tick()
    assert len(receiver.requests) == 1
    [row] = history(embedded).to_dict(orient="records")
    assert (row["deliveries_failed"], row["last_error"]) == (1, "HTTP 400")


def test_slack_format_sends_text(embedded, make_table) -> None:
    embedded.write(make_table(OVERLAPPED))
    with Receiver() as receiver:
        sink = WebhookSink(receiver.url, fmt="slack", dashboard_url="http://dash")
        make_watcher(embedded, [sink]).tick()
    body = receiver.accepted[HEADLINE_ID]
    assert set(body) == {"text"}
    assert body["text"].startswith("[CRITICAL] lock_expired_while_running: lock lock:acct-1")
    assert "<http://dash/timeline?key=j1|timeline>" in body["text"]


def test_metrics_count_what_the_receiver_got(embedded, make_table) -> None:
    embedded.write(make_table(OVERLAPPED))
    with Receiver(fail_first=1) as receiver:
        watcher = make_watcher(embedded, [WebhookSink(receiver.url)])
        server = watcher.metrics.serve(0)
        try:
            watcher.tick()
            port = server.server_port  # type: ignore[attr-defined]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
        finally:
            server.shutdown()  # type: ignore[attr-defined]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    def total(name: str) -> float:
        return sum(v for (n, _), v in samples.items() if n == name)

    assert total("dupescope_alert_deliveries_total") == len(receiver.accepted) == 2
    assert total("dupescope_alert_delivery_failures_total") == 1
    assert total("dupescope_alerts_total") == 2
    key = ("dupescope_alerts_total",
           (("job_type", "billing.charge"), ("rule", "lock_expired_while_running"),
            ("severity", "critical")))
    assert samples[key] == 1
    assert total("dupescope_lock_overrun_seconds_count") == 1
    assert total("dupescope_lock_overrun_seconds_sum") == 5.0
    assert total("dupescope_alert_outbox_pending") == 0
    assert total("dupescope_alert_evaluation_lag_seconds") > 0


def test_a_lock_alert_is_delivered_before_the_job_type_rules_run(
    embedded, make_table, monkeypatch
) -> None:
    from alerts import detectors

    embedded.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])))
    with Receiver() as receiver:
        seen_by_storm_rule: list[list[str]] = []
        storm = detectors.DETECTORS["redelivery_storm"]

        def storm_after_delivery(store, rule, **filters):  # type: ignore[no-untyped-def]
            seen_by_storm_rule.append(receiver.keys())  # what had arrived when it ran
            return storm(store, rule, **filters)

        monkeypatch.setitem(detectors.DETECTORS, "redelivery_storm", storm_after_delivery)
        make_watcher(embedded, [WebhookSink(receiver.url)]).tick()
    assert seen_by_storm_rule == [[HEADLINE_ID]]


def test_deliveries_owed_to_a_webhook_no_longer_given_do_not_hold_back_the_others(
    store, make_table, monkeypatch
) -> None:
    import logging
    from datetime import UTC, datetime, timedelta
    from logging.handlers import BufferingHandler

    from alerts.model import Alert
    from alerts.state import open_state

    # More than a page of older deliveries, queued for a webhook `watch` is not given now.
    owed = [Alert(id=f"old-{n}", rule="redelivery_storm", severity="warning", summary="old")
            for n in range(150)]
    earlier = datetime.now(UTC) - timedelta(hours=1)
    open_state(store).record(owed, ["webhook:gone"], earlier)
    store.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])))
    # Heard on the logger itself: logging set up by another test in this process may have
    # disabled it, raised its level or replaced the root's handlers.
    logger, heard = logging.getLogger("dupescope.alerts"), BufferingHandler(1000)
    monkeypatch.setattr(logger, "disabled", False)
    monkeypatch.setattr(logger, "handlers", [heard])
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "isEnabledFor", lambda level: level >= logging.WARNING)
    with Receiver() as receiver:
        watcher = make_watcher(store, [WebhookSink(receiver.url)])
        watcher.tick()
        assert receiver.keys() == [HEADLINE_ID]
    assert watcher.state.pending_sinks() == ["webhook:gone"]  # kept for a watch given it
    assert watcher.state.pending_count() == 150
    told = [r.getMessage() for r in heard.buffer]
    assert "outbox has deliveries for webhook:gone, not configured" in told
