"""The "What if" page and the timeline's report download, in Streamlit's AppTest."""

from __future__ import annotations

from dashboard_app import frame_with, open_page, texts
from forensics_cases import run


def two_job_types() -> list[dict]:
    """A billing charge redelivered after 30 s while its run went on to 40 s (both
    charged), and a mail that crashed and was redelivered 30 s later."""
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")],
                 idempotency_key="inv-1")
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")],
                  idempotency_key="inv-1")
    events += run("m1", 1, "w3", "01:00", [("01:02", "side_effect")],
                  idempotency_key="mail-1", job_type="email.send")
    events += run("m1", 2, "w4", "01:30", [("01:31", "idempotency_hit"), ("01:32", "ack")],
                  idempotency_key="mail-1", job_type="email.send")
    return events


def test_without_a_setting_the_page_asks_for_one(serve_events) -> None:
    serve_events(two_job_types())
    app = open_page("whatif")
    assert not app.exception
    assert any("Type a visibility timeout" in t for t in texts(app.info))


def test_a_longer_visibility_timeout_removes_the_redelivery(serve_events) -> None:
    serve_events(two_job_types())
    app = open_page("whatif", visibility_timeout="60")
    assert not app.exception
    summary = frame_with(app, "duplicates_after").set_index("job_type")
    assert summary.loc["billing.charge", "duplicates_after"] == 0
    assert summary.loc["email.send", "added_delay_p50_ms"] == 30_000
    keys = frame_with(app, "timeline")
    assert keys["timeline"].tolist() == ["timeline?key=inv-1"]


def test_changing_a_setting_changes_the_answer(serve_events) -> None:
    serve_events(two_job_types())
    app = open_page("whatif", visibility_timeout="60")
    app.number_input(key="visibility_timeout").set_value(35.0).run()
    assert not app.exception
    summary = frame_with(app, "duplicates_after").set_index("job_type")
    assert summary.loc["billing.charge", "duplicates_after"] == 1  # it ran 40 s
    assert summary.loc["email.send", "added_delay_p50_ms"] == 5_000


def test_the_timeline_offers_the_report(serve_events) -> None:
    serve_events(two_job_types())
    app = open_page("timeline", key="inv-1")
    assert not app.exception
    buttons = [b for b in app.get("download_button")]
    assert [b.proto.label for b in buttons] == ["Download report"]
