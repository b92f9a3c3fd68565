"""Each dashboard page renders over a small store, shows what it should and never fails."""

from __future__ import annotations

import pytest
from dashboard_app import frame_with, open_page, texts
from dashboard_cases import ABSORBED_KEY, HARMFUL_KEY, dashboard_events


@pytest.fixture
def filled(serve_events) -> str:
    return serve_events(dashboard_events())


def test_overview_counts_duplicates_and_lists_the_worst_keys(filled) -> None:
    app = open_page("overview")
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Duplicate keys"] == "2"
    assert metrics["Harmful (effect ran twice)"] == "1"
    assert len(app.get("plotly_chart")) == 2
    worst = frame_with(app, "timeline")
    assert worst["timeline"].iloc[0] == f"timeline?key={HARMFUL_KEY}"


def test_timeline_deep_link_gives_the_verdict_and_the_swimlanes(filled) -> None:
    app = open_page("timeline", key=HARMFUL_KEY)
    assert not app.exception
    assert app.text_input(key="key").value == HARMFUL_KEY
    assert texts(app.error) == [
        "Delivered twice because the first worker (w1:101) went silent after its side "
        "effect; the second execution ran the effect again: harmful."
    ]
    assert len(app.get("plotly_chart")) == 1
    assert [s.value for s in app.subheader][:2] == ["Executions", "Events"]


def test_timeline_of_an_absorbed_duplicate_is_a_warning(filled) -> None:
    app = open_page("timeline", key=ABSORBED_KEY)
    assert not app.exception
    assert texts(app.warning)[0].endswith(
        "the second execution found the idempotency record and skipped the effect: absorbed."
    )


def test_durations_draws_headroom_and_a_distribution_and_lints(filled) -> None:
    app = open_page("durations")
    assert not app.exception
    assert len(app.get("plotly_chart")) == 2
    assert "Settings to change" in [s.value for s in app.subheader]
    assert app.selectbox(key="duration_job_type").value == "billing.charge"


def test_alerts_lists_lock_overruns_linking_to_timelines(filled) -> None:
    app = open_page("alerts")
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Executions that outlived their lock"] == "1"
    links = frame_with(app, "timeline")["timeline"].tolist()
    assert links == [f"timeline?key={HARMFUL_KEY}"]
    assert "Alert history" in [s.value for s in app.subheader]


def test_checklist_shows_every_item(filled) -> None:
    app = open_page("checklist")
    assert not app.exception
    titles = [s.value for s in app.subheader]
    for title in ("Redeliveries", "Idempotency hits vs new executions", "Lock contention",
                  "Optimistic-concurrency conflicts", "Outbox lag",
                  "Crash loops by service version", "Clock skew per worker", "Cache stampedes"):
        assert title in titles
    assert app.get("plotly_chart"), "redeliveries and idempotency hits are drawn"


@pytest.mark.parametrize("page", ["overview", "timeline", "durations", "alerts", "checklist"])
def test_an_empty_store_gets_a_helpful_message(page, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DUPESCOPE_STORE", str(tmp_path / "nothing-here"))
    app = open_page(page)
    assert not app.exception
    assert texts(app.info), "an empty store explains itself"
    if page != "timeline":
        assert "holds no events yet" in texts(app.info)[0]


@pytest.mark.parametrize(
    ("page", "question"),
    [("overview", "duplicates"), ("durations", "durations"), ("alerts", "lock_overruns"),
     ("checklist", "checklist")],
)
def test_a_page_whose_question_this_build_lacks_says_so(page, question, filled,
                                                       monkeypatch) -> None:
    import queries

    monkeypatch.setattr(queries, question, None)  # as `getattr(queries, question, None)` finds it
    app = open_page(page)
    assert not app.exception
    assert f"queries.{question}" in texts(app.info)[0]


@pytest.mark.parametrize(
    ("page", "all_clear"),
    [("alerts", "No lock expired while its execution was still running."),
     ("durations", "No unsafe setting found in what was observed.")],
)
def test_a_clean_store_gets_the_all_clear(page, all_clear, serve_events) -> None:
    from forensics_cases import locked

    serve_events(locked("j1", 1, "w1", "o1", "00:00", 30_000,
                        [("00:02", "side_effect"), ("00:03", "lock_release"), ("00:03", "ack")]))
    app = open_page(page)
    assert not app.exception
    assert all_clear in texts(app.success)


def test_the_pages_work_on_the_clickhouse_dialect(tmp_path, monkeypatch, make_table) -> None:
    from dashboard import source
    from store.clickhouse import ChdbStore

    writer = ChdbStore(str(tmp_path / "chdb"))
    writer.write(make_table(dashboard_events()))
    writer.close()
    url = f"chdb://{tmp_path / 'chdb'}"
    monkeypatch.setenv("DUPESCOPE_STORE", url)
    try:
        app = open_page("timeline", key=HARMFUL_KEY)
        assert not app.exception
        assert "went silent after its side effect" in texts(app.error)[0]
        for page in ("overview", "durations", "alerts", "checklist"):
            app.switch_page(f"app_pages/{page}.py").run()
            assert not app.exception, page
    finally:
        source.close(url)
