"""Values from events and from the URL are drawn as text, never as Markdown or HTML."""

from __future__ import annotations

import re
from urllib.parse import quote

import pandas as pd
import pytest
from dashboard_app import open_page, shown
from dashboard_cases import (
    HOSTILE_HOST,
    HOSTILE_JOB_TYPE,
    HOSTILE_KEY,
    HOSTILE_LANE,
    HOSTILE_QUEUE,
    HOSTILE_WORKER,
    hostile_events,
)

from dashboard import charts
from dashboard.escape import html, md, plain_frame
from dashboard.swimlane import swimlane_figure
from queries.key_executions import summarise

#: Markdown that makes a link or an image, or an HTML tag: none may reach a renderer.
MARKUP = re.compile(r"(?<!\\)\]\((?!\\)|(?<!\\)<[a-zA-Z/]")


@pytest.fixture
def hostile(serve_events) -> str:
    return serve_events(hostile_events())


def _markdown_of(app) -> list[str]:  # type: ignore[no-untyped-def]
    """The Markdown source of every text element a page drew."""
    kinds = ("markdown", "caption", "info", "error", "warning", "success", "exception")
    return [str(e.value) for kind in kinds for e in app.get(kind)]


@pytest.mark.parametrize(
    "value",
    [HOSTILE_WORKER, HOSTILE_LANE, HOSTILE_JOB_TYPE, HOSTILE_QUEUE, ":red[x] $x$ ~~s~~ `c`",
     "line\n# heading\n- item", "a\\](b)", "&lt;img&gt;", "www.example.com a@b.example"],
)
def test_md_reads_back_as_the_value_and_holds_no_markup(value) -> None:
    escaped = md(value)
    assert not MARKUP.search(escaped)
    resolved = re.sub(r"\\(.)", r"\1", escaped)  # the text GFM looks for bare links in
    assert not re.search(r"https?://|www\.|\w@\w", resolved)
    assert "\n" not in escaped
    assert shown(escaped) == value.replace("\n", " ")


def test_html_escapes_tags_and_entities() -> None:
    assert html('<a href="x">y</a> &amp;') == "&lt;a href=&quot;x&quot;&gt;y&lt;/a&gt; &amp;amp;"
    assert html("x" * 50, limit=10) == "x" * 9 + "…"


def test_plain_frame_escapes_only_text_cells() -> None:
    frame = pd.DataFrame({"job_type": [HOSTILE_LANE, None], "n": [1, 2]})
    escaped = plain_frame(frame)
    assert escaped["job_type"].iloc[0] == html(HOSTILE_LANE)
    assert pd.isna(escaped["job_type"].iloc[1])
    assert escaped["n"].tolist() == [1, 2]
    assert frame["job_type"].iloc[0] == HOSTILE_LANE  # the caller's frame is untouched


def test_the_timeline_page_draws_hostile_values_as_text(hostile) -> None:
    app = open_page("timeline", key=HOSTILE_KEY)
    assert not app.exception
    sources = _markdown_of(app)
    assert sources, "the page drew no text at all"
    assert not [s for s in sources if MARKUP.search(s)]
    verdict = shown(app.error[0].value)
    assert f"({HOSTILE_WORKER})" in verdict  # the worker id, as its own characters
    assert HOSTILE_JOB_TYPE in shown(app.caption[0].value)


def test_a_hostile_search_in_the_url_is_drawn_as_text(hostile) -> None:
    search = f"nosuch [x]({HOSTILE_HOST}/search)"
    app = open_page("timeline", key=search)
    assert not app.exception
    [said] = [s for s in _markdown_of(app) if "Nothing starts with" in s]
    assert not MARKUP.search(said)
    assert search in shown(said)


def test_hostile_filter_values_are_drawn_as_text(hostile) -> None:
    app = open_page("overview")
    app.selectbox(key="job_type").set_value(HOSTILE_JOB_TYPE).run()
    app.selectbox(key="queue").set_value(HOSTILE_QUEUE).run()
    assert not app.exception
    assert app.selectbox(key="queue").value == HOSTILE_QUEUE
    assert app.metric[0].value == "1"
    assert not [s for s in _markdown_of(app) if MARKUP.search(s)]


@pytest.mark.parametrize("page", ["overview", "durations", "alerts", "checklist"])
def test_every_page_draws_hostile_values_as_text(hostile, page) -> None:
    app = open_page(page)
    assert not app.exception
    assert not [s for s in _markdown_of(app) if MARKUP.search(s)]


def _figure_texts(figure) -> list[str]:  # type: ignore[no-untyped-def]
    """Every string Plotly would render as its HTML subset: labels, names, hovers, ticks."""
    found: list[str] = []

    def walk(value) -> None:  # type: ignore[no-untyped-def]
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list | tuple):
            for inner in value:
                walk(inner)

    walk(figure.to_plotly_json())
    return found


def _hostile_markup(texts: list[str]) -> list[str]:
    return [t for t in texts if re.search(r"<(a|img)\b", t, re.IGNORECASE)]


def test_the_swimlane_escapes_worker_ids_lock_owners_and_reasons(embedded, make_table) -> None:
    from queries import timeline

    embedded.write(make_table(hostile_events()))
    frame = timeline(embedded, HOSTILE_KEY)
    figure = swimlane_figure(frame, summarise(frame))
    texts = _figure_texts(figure)
    assert not _hostile_markup(texts)
    ticks = list(figure.layout.yaxis.ticktext)
    assert any(html(HOSTILE_LANE)[:40] in t for t in ticks)


def test_charts_escape_job_types_and_workers() -> None:
    duplicates = pd.DataFrame(
        {"key": [HOSTILE_KEY], "job_type": [HOSTILE_LANE], "cause": ["worker_crash"],
         "harmful": [True], "outcome": ["harmful"], "executions": [2]}
    )
    figures = [
        charts.causes_figure(duplicates),
        charts.ratio_figure(pd.DataFrame({"job_type": [HOSTILE_LANE], "r": [0.5]}), "r",
                            "job_type", "title", "label"),
        charts.crash_loop_figure(pd.DataFrame(
            {"worker_id": [HOSTILE_LANE], "service_version": [HOSTILE_LANE],
             "unclean_restarts": [3], "starts": [4], "stops": [1], "version_changes": [0]})),
        charts.duration_figure(pd.DataFrame({"duration_ms": [1.0, 2.0]}),
                               pd.Series({"job_type": HOSTILE_LANE})),
    ]
    for figure in figures:
        assert not _hostile_markup(_figure_texts(figure))


def test_links_to_hostile_keys_stay_relative_and_encoded() -> None:
    from dashboard.ui import timeline_link

    assert timeline_link(HOSTILE_KEY) == f"timeline?key={quote(HOSTILE_KEY, safe='')}"
