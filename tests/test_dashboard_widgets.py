"""The key search and the shared filters, driven as a person would."""

from __future__ import annotations

import pytest
from dashboard_app import frame_with, open_page, texts
from dashboard_cases import HARMFUL_KEY, dashboard_events


@pytest.fixture
def filled(serve_events) -> str:
    return serve_events(dashboard_events())


def test_a_lock_owner_prefix_suggests_its_key_and_picking_opens_it(filled) -> None:
    app = open_page("timeline")
    app.text_input(key="key").set_value("own-").run()
    assert not app.exception
    suggestions = app.selectbox(key="suggestion")
    assert suggestions.options == [f"own-a  ·  lock owner  →  {HARMFUL_KEY}"]
    suggestions.select_index(0).run()
    assert not app.exception
    assert app.text_input(key="key").value == HARMFUL_KEY
    assert "harmful" in texts(app.error)[0]


def test_a_job_id_opens_the_same_timeline(filled) -> None:
    app = open_page("timeline", key="j-crash")
    assert not app.exception
    assert "went silent after its side effect" in texts(app.error)[0]


def test_an_unknown_prefix_says_so(filled) -> None:
    app = open_page("timeline", key="zzz")
    assert not app.exception
    assert "Nothing starts with **zzz**" in texts(app.info)[0]


def test_no_key_offers_the_worst_duplicates(filled) -> None:
    app = open_page("timeline")
    assert not app.exception
    assert frame_with(app, "timeline")["timeline"].iloc[0] == f"timeline?key={HARMFUL_KEY}"


def test_job_type_filter_narrows_the_overview(filled) -> None:
    app = open_page("overview")
    assert app.selectbox(key="job_type").options == ["All", "billing.charge", "mail.send"]
    app.selectbox(key="job_type").set_value("mail.send").run()
    assert not app.exception
    assert texts(app.info) == ["No key ran more than once (job_type=mail.send)."]


def test_queue_filter_keeps_the_filter_across_pages(filled) -> None:
    app = open_page("overview")
    app.selectbox(key="queue").set_value("billing").run()
    assert {m.label: m.value for m in app.metric}["Duplicate keys"] == "2"
    app.switch_page("app_pages/alerts.py").run()
    assert not app.exception
    assert app.selectbox(key="queue").value == "billing"


def test_time_window_ends_at_the_newest_event(filled) -> None:
    app = open_page("overview")
    app.selectbox(key="window").set_value("15m").run()
    assert not app.exception
    # The newest event is at 12:02:03; both duplicates started within 15 minutes of it.
    assert {m.label: m.value for m in app.metric}["Duplicate keys"] == "2"


def test_a_link_to_the_root_with_filters_opens_the_overview_with_them(filled) -> None:
    from dashboard_app import APP
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params.update(window="Last 15 minutes", queue="billing")
    app.run()
    assert not app.exception
    assert app.selectbox(key="window").value == "15m"
    assert app.selectbox(key="queue").value == "billing"
    assert {m.label: m.value for m in app.metric}["Duplicate keys"] == "2"


def test_service_filter_is_offered_from_attrs_and_named_when_not_applied(filled) -> None:
    app = open_page("overview")
    assert app.selectbox(key="service").options == ["All", "billing", "mailer"]
    app.selectbox(key="service").set_value("billing").run()
    assert not app.exception
    assert any("Not narrowed by service" in c for c in texts(app.caption))


def test_auto_refresh_toggle_keeps_the_page_working(filled) -> None:
    app = open_page("overview")
    app.toggle(key="live").set_value(True).run()
    assert not app.exception
    assert {m.label: m.value for m in app.metric}["Duplicate keys"] == "2"


def test_a_store_written_while_open_is_read_again(filled, make_table) -> None:
    from dashboard import source
    from store.embedded import EmbeddedStore

    app = open_page("overview")
    late = {"idempotency_key": "inv-late", "job_id": "j-late"}
    more = [
        {**e, **late, "ts": e["ts"].replace("12:0", "12:1")}
        for e in dashboard_events()
        if e.get("idempotency_key") == HARMFUL_KEY
    ]
    EmbeddedStore(filled).write(make_table(more))
    source.forget_snapshots()  # what the snapshot's few-second ttl does on its own
    app.run()
    assert {m.label: m.value for m in app.metric}["Duplicate keys"] == "3"
