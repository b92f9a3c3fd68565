"""Plotly figures for the overview, durations, alerts and checklist pages.

Pure functions from query answers to figures, so each can be tested without Streamlit.
Harmful is always red, absorbed always blue-grey and unknown (no run reported its effect)
always amber, on every page. Every figure draws its frame through `plain_frame`: Plotly
renders HTML in labels, legends and hover texts, and job types, worker ids and keys come
from whoever writes events.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from dashboard.escape import html, plain_frame

HARMFUL = "#d62728"
OTHER = "other job types"
ABSORBED = "#6b8fb3"
UNKNOWN = "#e0a526"
OUTCOME_COLORS = {"harmful": HARMFUL, "absorbed": ABSORBED, "unknown": UNKNOWN}
#: The outcomes in the order they are drawn and counted (queries.duplicates' `outcome`).
OUTCOMES = ("harmful", "absorbed", "unknown")
#: (width, label) pairs tried in order: the first that gives at most ~80 bars wins.
BUCKETS = ("1min", "5min", "15min", "1h", "6h", "1D")
LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "legend": {"title": None}}


def bucket_for(span: pd.Timedelta | None, bars: int = 80) -> str:
    """A bucket width that shows `span` in at most about `bars` bars."""
    if span is None or pd.isna(span):
        return "1h"
    for width in BUCKETS:
        if span / pd.Timedelta(width) <= bars:
            return width
    return BUCKETS[-1]


def _naive(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    frame = frame.copy()
    for column in columns:
        if column in frame and isinstance(frame[column].dtype, pd.DatetimeTZDtype):
            frame[column] = frame[column].dt.tz_convert("UTC").dt.tz_localize(None)
    return frame


def top_job_types(over_time: pd.DataFrame, keep: int) -> pd.DataFrame:
    """The `keep` job types with most duplicates by name, the rest summed as "other"."""
    totals = over_time.groupby("job_type")["duplicate_keys"].sum().sort_values(ascending=False)
    kept = set(totals.head(keep).index)
    named = over_time.assign(
        job_type=over_time["job_type"].where(over_time["job_type"].isin(kept), OTHER)
    )
    outcomes = [o for o in OUTCOMES if o in named]
    return named.groupby(["bucket", "job_type"], as_index=False)[outcomes].sum()


def duplicates_over_time_figure(over_time: pd.DataFrame, keep: int = 8) -> go.Figure:
    """Duplicate keys per bucket and job type, harmful above, absorbed and unknown below."""
    grouped = top_job_types(plain_frame(over_time), keep)
    long = _naive(grouped, "bucket").melt(
        id_vars=["bucket", "job_type"],
        value_vars=[o for o in OUTCOMES if o in grouped],
        var_name="outcome",
        value_name="count",
    )
    fig = px.bar(
        long,
        x="bucket",
        y="count",
        color="job_type",
        facet_row="outcome",
        category_orders={
            "outcome": list(OUTCOMES),
            "job_type": sorted(set(long["job_type"]) - {OTHER}) + [OTHER],
        },
        color_discrete_map={OTHER: "#c7c7c7"},
        labels={"bucket": "time (UTC)", "count": "duplicate keys", "job_type": "job type"},
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(matches=None, rangemode="tozero")
    fig.update_layout(bargap=0.1, height=420, title="Duplicates over time", **LAYOUT)
    return fig


def causes_figure(duplicates: pd.DataFrame) -> go.Figure:
    """How many duplicate keys each cause explains, split by outcome."""
    duplicates = plain_frame(duplicates)
    counts = (
        duplicates.groupby(["cause", "outcome"], as_index=False)
        .size()
        .rename(columns={"size": "keys"})
    )
    order = counts.groupby("cause")["keys"].sum().sort_values().index.tolist()
    fig = px.bar(
        counts,
        x="keys",
        y="cause",
        color="outcome",
        orientation="h",
        color_discrete_map=OUTCOME_COLORS,
        category_orders={"cause": order[::-1], "outcome": list(OUTCOMES)},
        labels={"keys": "duplicate keys", "cause": ""},
    )
    fig.update_layout(height=380, title="Causes", **LAYOUT)
    return fig


def job_type_table(duplicates: pd.DataFrame) -> pd.DataFrame:
    """Job types ranked by harmful duplicates, then by all duplicates; how many were
    harmful, absorbed, or of unknown outcome (no run reported its effect)."""
    columns = ["job_type", "duplicates", *OUTCOMES, "extra_executions", "top_cause"]
    if duplicates.empty:
        return pd.DataFrame(columns=columns)
    grouped = duplicates.groupby("job_type", dropna=False)
    table = pd.DataFrame(
        {
            "duplicates": grouped.size(),
            **{o: grouped["outcome"].agg(lambda s, o=o: int((s == o).sum())) for o in OUTCOMES},
            "extra_executions": grouped["executions"].sum() - grouped.size(),
            "top_cause": grouped["cause"].agg(lambda c: c.value_counts().index[0]),
        }
    )
    table = table.reset_index().sort_values(["harmful", "duplicates"], ascending=False)
    return table[columns]


def worst_keys(duplicates: pd.DataFrame, limit: int = 50) -> pd.DataFrame:
    """Harmful keys first, then those of unknown outcome (they may be harmful), then the
    ones that ran the effect and ran most often."""
    rank = duplicates["outcome"].map(OUTCOME_RANK).fillna(0)
    return (duplicates.assign(_rank=rank)
            .sort_values(["_rank", "side_effects", "executions", "last_ts"], ascending=False)
            .drop(columns="_rank").head(limit))


#: How much a duplicate's outcome asks for a look: harmful, then unknown, then absorbed.
OUTCOME_RANK = {"harmful": 2, "unknown": 1, "absorbed": 0}


def duration_figure(samples: pd.DataFrame, summary: pd.Series) -> go.Figure:
    """Histogram of one job type's execution durations with its percentiles and limits."""
    samples = plain_frame(samples)
    fig = px.histogram(
        samples, x="duration_ms", nbins=60, labels={"duration_ms": "execution duration (ms)"},
        color_discrete_sequence=[ABSORBED],
    )
    lines = [
        ("p50", summary.get("p50_ms"), "#555555", "dot"),
        ("p95", summary.get("p95_ms"), "#555555", "dash"),
        ("p99", summary.get("p99_ms"), "#222222", "dash"),
        ("lock TTL", summary.get("lock_ttl_ms"), HARMFUL, "solid"),
        ("visibility timeout", summary.get("visibility_timeout_ms"), "#ff7f0e", "solid"),
    ]
    for position, (label, value, color, dash) in enumerate(lines):
        if value is None or pd.isna(value):
            continue
        fig.add_vline(
            x=float(value), line_color=color, line_dash=dash, line_width=2,
            annotation_text=f"{label} {float(value):,.0f}",
            annotation_position="top right" if position % 2 else "top left",
            annotation_y=1 - 0.08 * position, annotation_yref="paper",
            annotation_font_color=color,
        )
    title = f"{html(summary.get('job_type'), 80)}: how long executions ran"
    fig.update_layout(height=360, yaxis_title="executions", bargap=0.05, title=title, **LAYOUT)
    return fig


def headroom_figure(durations: pd.DataFrame, limit: int = 15) -> go.Figure:
    """p99 duration as a share of the lock TTL and of the visibility timeout, worst first.

    A share makes job types of very different lengths comparable; past 100% the setting
    is shorter than one run in a hundred.
    """
    used = plain_frame(durations).assign(
        lock=durations["p99_ms"] / durations["lock_ttl_ms"],
        visibility=durations["p99_ms"] / durations["visibility_timeout_ms"],
    )
    used["worst"] = used[["lock", "visibility"]].max(axis=1)
    used = used.dropna(subset=["worst"]).nlargest(limit, "worst")
    long = used.melt(
        id_vars=["job_type", "p99_ms", "lock_ttl_ms", "visibility_timeout_ms"],
        value_vars=["lock", "visibility"],
        var_name="against",
        value_name="share",
    ).dropna(subset=["share"])
    long["against"] = long["against"].map({"lock": "lock TTL", "visibility": "visibility timeout"})
    fig = px.bar(
        long, x="share", y="job_type", color="against", barmode="group", orientation="h",
        hover_data=["p99_ms", "lock_ttl_ms", "visibility_timeout_ms"],
        color_discrete_map={"lock TTL": HARMFUL, "visibility timeout": "#ff7f0e"},
        category_orders={"job_type": used["job_type"].tolist()},
        labels={"share": "p99 duration / setting", "job_type": "", "against": ""},
    )
    fig.add_vline(x=1, line_color="#222222", line_dash="dash",
                  annotation_text="the setting", annotation_position="top")
    fig.update_xaxes(tickformat=".0%")
    fig.update_layout(height=max(260, 34 * len(used) + 140),
                      title=f"p99 against the settings ({len(used)} tightest job types)",
                      **{**LAYOUT, "legend": {"title": None, "orientation": "h", "y": -0.12}})
    return fig


def overruns_figure(overruns: pd.DataFrame) -> go.Figure:
    """Each lock that expired while its execution ran: when, by how much, and if overlapped."""
    frame = _naive(plain_frame(overruns), "expired_at").assign(
        overlap=overruns["overlapped_by"].notna().map({True: "another owner took it",
                                                       False: "nobody took it"})
    )
    fig = px.scatter(
        frame, x="expired_at", y="overrun_ms", color="overlap",
        hover_data=["key", "job_type", "job_id", "worker_id", "lock_key", "lock_owner",
                    "overlapped_by"],
        color_discrete_map={"another owner took it": HARMFUL, "nobody took it": "#ff7f0e"},
        labels={"expired_at": "lock expired at (UTC)", "overrun_ms": "ran on without it (ms)"},
    )
    fig.update_traces(marker={"size": 11})
    fig.update_layout(height=340, title="Locks that expired while running", **LAYOUT)
    return fig


def ratio_figure(frame: pd.DataFrame, x: str, y: str, title: str, label: str,
                 hover: list[str] | None = None, percent: bool = False,
                 limit: int = 12) -> go.Figure:
    """A horizontal bar per row (job type or worker), the `limit` highest first."""
    frame = plain_frame(frame)
    numeric = frame.assign(**{x: pd.to_numeric(frame[x], errors="coerce").astype("float64")})
    top = numeric.dropna(subset=[x]).nlargest(limit, x)
    if len(frame) > len(top):
        title = f"{title} (top {len(top)} of {len(frame)})"
    fig = px.bar(top.iloc[::-1], x=x, y=y, orientation="h", hover_data=hover,
                 labels={x: label, y: ""}, color_discrete_sequence=[ABSORBED])
    if percent:
        fig.update_xaxes(tickformat=".0%")
    fig.update_layout(height=max(200, 30 * len(top) + 120), title=title, **LAYOUT)
    return fig


def skew_figure(skew: pd.DataFrame, tolerance_ms: float) -> go.Figure:
    """Estimated clock offset per worker, with the tolerance drawn."""
    frame = plain_frame(skew)
    frame = frame.assign(flag=frame["skewed"].map({True: "skewed", False: "within tolerance"}))
    fig = px.bar(frame.sort_values("behind_ms"), x="behind_ms", y="worker_id", color="flag",
                 orientation="h", hover_data=["causal_pairs", "violations"],
                 color_discrete_map={"skewed": HARMFUL, "within tolerance": ABSORBED},
                 labels={"behind_ms": "clock behind by (ms)", "worker_id": ""})
    fig.add_vline(x=tolerance_ms, line_dash="dash", line_color="#222222",
                  annotation_text=f"tolerance {tolerance_ms:.0f} ms")
    fig.update_layout(height=max(200, 30 * len(frame) + 110), title="Clock skew per worker",
                      **LAYOUT)
    return fig


def stampede_figure(stampedes: pd.DataFrame) -> go.Figure:
    """Bursts of executions on one resource key: when, how many, how many ran the effect."""
    frame = _naive(plain_frame(stampedes), "window_start")
    fig = px.scatter(frame, x="window_start", y="executions", size="executions",
                     color="job_type", hover_data=["resource_key", "keys", "side_effects"],
                     labels={"window_start": "time (UTC)", "executions": "executions in window"})
    fig.update_layout(height=320, title="Cache stampedes", **LAYOUT)
    return fig


def crash_loop_figure(crashes: pd.DataFrame) -> go.Figure:
    """Unclean restarts per worker, coloured by the service version it ran."""
    frame = plain_frame(crashes)
    frame = frame.assign(service_version=frame["service_version"].fillna("unknown"))
    fig = px.bar(frame.sort_values("unclean_restarts"), x="unclean_restarts", y="worker_id",
                 color="service_version", orientation="h",
                 hover_data=["starts", "stops", "version_changes"],
                 labels={"unclean_restarts": "restarts without a clean stop", "worker_id": ""})
    fig.update_layout(height=max(200, 30 * len(frame) + 110),
                      title="Crash loops by service version", **LAYOUT)
    return fig


def whatif_figure(summary: pd.DataFrame, limit: int = 15) -> go.Figure:
    """Duplicates and harmful duplicates per job type, observed and replayed under the
    proposed settings, the job types that change most first."""
    shown = plain_frame(summary).assign(
        change=(summary["duplicates_before"] - summary["duplicates_after"]).abs()
        + (summary["harmful_before"] - summary["harmful_after"]).abs())
    shown = shown.sort_values(["change", "duplicates_before"], ascending=False).head(limit)
    long = pd.DataFrame([
        {"job_type": row["job_type"], "what": what, "when": when, "keys": row[f"{what}_{when}"]}
        for row in shown.to_dict(orient="records")
        for what in ("duplicates", "harmful") for when in ("before", "after")
    ], columns=["job_type", "what", "when", "keys"])
    long["series"] = long["what"] + " " + long["when"].map({"before": "observed",
                                                            "after": "with the settings"})
    fig = px.bar(
        long, x="keys", y="job_type", color="series", barmode="group", orientation="h",
        category_orders={"job_type": shown["job_type"].tolist(),
                         "series": ["duplicates observed", "duplicates with the settings",
                                    "harmful observed", "harmful with the settings"]},
        color_discrete_map={"duplicates observed": "#9ecae1",
                            "duplicates with the settings": "#1f77b4",
                            "harmful observed": "#fcae91", "harmful with the settings": HARMFUL},
        labels={"keys": "duplicate keys", "job_type": "", "series": ""},
    )
    fig.update_layout(height=max(280, 60 * len(shown) + 140),
                      title="Before and after, per job type",
                      **{**LAYOUT, "legend": {"title": None, "orientation": "h", "y": -0.12}})
    return fig
