"""The dashboard's pure parts: the figures and the filters."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
from dashboard_cases import ABSORBED_KEY, HARMFUL_KEY

from dashboard import charts
from dashboard.filters import Filters, window_bounds
from dashboard.swimlane import swimlane_figure
from queries.key_executions import summarise


def _timeline(store, key: str) -> pd.DataFrame:
    import queries

    return queries.timeline(store, key)


def test_swimlanes_draw_one_lane_per_execution_with_lock_and_window(stories) -> None:
    frame = _timeline(stories, HARMFUL_KEY)
    figure = swimlane_figure(frame, summarise(frame))
    assert list(figure.layout.yaxis.ticktext) == [
        "producer", "#1 w1:101 · attempt 1", "#2 w2:202 · attempt 2"
    ]
    names = {trace.name for trace in figure.data}
    assert {"execution", "visibility timeout", "lock validity", "ran without its lock",
            "side_effect", "deliver", "enqueue"} <= names
    assert not figure.layout.shapes, "these two runs never overlapped"


def test_swimlanes_shade_the_overlap(stories) -> None:
    frame = _timeline(stories, ABSORBED_KEY)
    figure = swimlane_figure(frame, summarise(frame))
    (shade,) = figure.layout.shapes
    assert shade.fillcolor == "#d62728"
    assert figure.layout.annotations[0].text == "#1 and #2 overlap"


def test_bucket_width_follows_the_span() -> None:
    assert charts.bucket_for(pd.Timedelta(minutes=30)) == "1min"
    assert charts.bucket_for(pd.Timedelta(hours=3)) == "5min"
    assert charts.bucket_for(pd.Timedelta(days=30)) == "1D"
    assert charts.bucket_for(None) == "1h"


def test_over_time_names_the_busiest_job_types_and_sums_the_rest() -> None:
    bucket = pd.Timestamp("2025-11-30T12:00Z")
    over_time = pd.DataFrame(
        {
            "bucket": [bucket] * 3, "job_type": ["a", "b", "c"], "duplicate_keys": [5, 3, 1],
            "harmful": [2, 1, 1], "absorbed": [3, 2, 0],
        }
    )
    top = charts.top_job_types(over_time, keep=1)
    assert top.set_index("job_type")["harmful"].to_dict() == {"a": 2, charts.OTHER: 2}
    figure = charts.duplicates_over_time_figure(over_time, keep=1)
    assert {t.name for t in figure.data} == {"a", charts.OTHER}


def test_causes_split_harmful_and_absorbed(stories) -> None:
    import queries

    figure = charts.causes_figure(queries.duplicates(stories))
    assert {t.name for t in figure.data} == {"harmful", "absorbed"}


def test_headroom_ranks_the_tightest_job_type_first() -> None:
    timing = pd.DataFrame(
        {
            "job_type": ["fast", "slow"], "p99_ms": [100.0, 50_000.0],
            "lock_ttl_ms": [10_000.0, 10_000.0], "visibility_timeout_ms": [30_000, 30_000],
        }
    )
    figure = charts.headroom_figure(timing)
    # Plotly draws the last category of a horizontal bar chart at the top.
    assert list(figure.layout.yaxis.categoryarray) == ["fast", "slow"]


def test_ratio_chart_keeps_the_highest_rows() -> None:
    frame = pd.DataFrame({"job_type": list("abcdef"), "ratio": [0.1, 0.6, 0.2, 0.5, 0.3, 0.4]})
    figure = charts.ratio_figure(frame, "ratio", "job_type", "Ratio", "r", limit=2)
    assert list(figure.data[0].y) == ["d", "b"]
    assert figure.layout.title.text == "Ratio (top 2 of 6)"


def test_job_type_table_ranks_harm_first(stories) -> None:
    import queries

    table = charts.job_type_table(queries.duplicates(stories))
    first = table.iloc[0]
    assert (first["job_type"], first["duplicates"], first["harmful"], first["absorbed"]) == (
        "billing.charge", 2, 1, 1
    )
    assert first["extra_executions"] == 2


def test_time_windows_end_at_the_newest_event() -> None:
    newest = datetime(2025, 11, 30, 12, 0)
    assert window_bounds("1h", newest) == (datetime(2025, 11, 30, 11, 0), None)
    assert window_bounds("all", newest) == (None, None)
    custom = (datetime(2025, 11, 30, 9), datetime(2025, 11, 30, 10))
    assert window_bounds("custom", newest, custom) == custom
    assert Filters(job_type="x").describe() == "job_type=x"


def test_ratio_chart_takes_numbers_stored_as_objects() -> None:
    frame = pd.DataFrame({"job_type": ["a", "b"], "ratio": pd.Series([0.5, None], dtype=object)})
    figure = charts.ratio_figure(frame, "ratio", "job_type", "Ratio", "r")
    assert list(figure.data[0].y) == ["a"]
