"""The key timeline as a swimlane chart: one lane per execution, a marker per event.

Under each execution's bar runs the lock it held (acquire or renew + TTL) and over it the
delivery's visibility-timeout window, so "the lock ran out before the work did" and "the
queue gave the job away while it still ran" are visible at a glance; where two executions
ran at once the background turns red.
"""

from __future__ import annotations

import json

import pandas as pd
import plotly.graph_objects as go

from dashboard.escape import html
from queries.key_executions import attrs_of, overlaps
from store.contract import PRODUCER_KINDS

#: Event kind -> (marker symbol, colour). Effects and endings stand out; plumbing is grey.
MARKERS: dict[str, tuple[str, str]] = {
    "outbox_write": ("square", "#7f7f7f"),
    "enqueue": ("square", "#1f77b4"),
    "enqueue_deduped": ("square-x", "#9467bd"),
    "deliver": ("triangle-right", "#1f77b4"),
    "lock_acquire": ("diamond", "#2ca02c"),
    "lock_renew": ("diamond-open", "#2ca02c"),
    "lock_contended": ("diamond-x", "#ff7f0e"),
    "lock_release": ("diamond-tall", "#7f7f7f"),
    "lock_expired": ("x", "#d62728"),
    "idempotency_hit": ("circle-open", "#17becf"),
    "side_effect": ("star", "#d62728"),
    "occ_conflict": ("x-open", "#ff7f0e"),
    "commit": ("circle", "#2ca02c"),
    "ack": ("circle", "#2ca02c"),
    "nack": ("circle-x", "#ff7f0e"),
    "fail": ("x-thin-open", "#d62728"),
    "worker_start": ("line-ns", "#7f7f7f"),
    "worker_stop": ("line-ns", "#7f7f7f"),
}
LOCK_OFFSET = 0.3
WINDOW_OFFSET = -0.3


def _naive(moment: pd.Timestamp) -> pd.Timestamp:
    """UTC without a zone: Plotly draws zone-aware times in the browser's zone otherwise."""
    return moment.tz_convert("UTC").tz_localize(None) if moment.tzinfo else moment


def lane_label(row: pd.Series) -> str:
    attempt = row.get("delivery_attempt")
    attempt_text = f"attempt {int(attempt)}" if pd.notna(attempt) else "attempt ?"
    worker = html(row.get("worker_id"), 60) if pd.notna(row.get("worker_id")) else "worker ?"
    return f"#{int(row['execution'])} {worker} · {attempt_text}"


def _hover(row: pd.Series) -> str:
    fields = ["event", "job_id", "delivery_attempt", "worker_id", "lock_key", "lock_owner",
              "lock_ttl_ms", "visibility_timeout_ms"]
    lines = [f"<b>{html(row['event'])}</b> {_naive(row['ts']):%H:%M:%S.%f}"[:-3]]
    lines += [f"{f}: {html(row[f], 200)}" for f in fields[1:] if f in row and pd.notna(row[f])]
    extra = attrs_of(row.get("attrs"))
    if extra:
        lines.append(html(json.dumps(extra)[:200]))
    return "<br>".join(lines)


def _span(fig: go.Figure, start, end, y: float, name: str, color: str, width: int,
          dash: str = "solid", hover: str = "") -> None:
    first = not any(t.name == name for t in fig.data)
    fig.add_trace(
        go.Scatter(
            x=[_naive(start), _naive(end)],
            y=[y, y],
            mode="lines",
            line={"color": color, "width": width, "dash": dash},
            name=name,
            legendgroup=name,
            showlegend=first,
            hovertext=hover,
            hoverinfo="text",
        )
    )


def swimlane_figure(timeline: pd.DataFrame, executions: pd.DataFrame) -> go.Figure:
    """The figure for one key (`timeline` from queries.timeline, `executions` summarised)."""
    fig = go.Figure()
    lanes: dict[int, float] = {}
    labels: list[str] = []
    producer = timeline[timeline["event"].isin(PRODUCER_KINDS)]
    if not producer.empty:
        labels.append("producer")
    for _, row in executions.iterrows():
        lanes[int(row["execution"])] = float(len(labels))
        labels.append(lane_label(row))

    for begin, finish, one, other in overlaps(executions):
        fig.add_vrect(
            x0=_naive(begin), x1=_naive(finish), fillcolor="#d62728", opacity=0.12,
            line_width=0, layer="below",
            annotation_text=f"#{one} and #{other} overlap", annotation_position="top left",
            annotation_font_color="#d62728",
        )

    for _, row in executions.iterrows():
        y = lanes[int(row["execution"])]
        _span(fig, row["start"], row["end"], y, "execution", "#4c78a8", 14,
              hover=f"execution #{row['execution']}: {row['duration_ms']:.0f} ms, "
              f"{html(row['outcome'])}")
        vt = row["visibility_timeout_ms"]
        if pd.notna(vt):
            until = row["start"] + pd.to_timedelta(int(vt), unit="ms")
            _span(fig, row["start"], until, y + WINDOW_OFFSET, "visibility timeout", "#ff7f0e",
                  4, "dot", hover=f"visible again at {_naive(until):%H:%M:%S}")
        own = timeline["execution"].eq(row["execution"]).fillna(False).astype(bool)
        _lock_bars(fig, timeline[own], y, row["end"])

    for kind, rows in timeline.groupby("event", sort=False):
        symbol, color = MARKERS.get(str(kind), ("circle", "#333333"))
        ys = [
            lanes.get(int(e), 0.0) if pd.notna(e) else 0.0 for e in rows["execution"]
        ]
        fig.add_trace(
            go.Scatter(
                x=[_naive(t) for t in rows["ts"]],
                y=ys,
                mode="markers",
                marker={"symbol": symbol, "color": color, "size": 13,
                        "line": {"width": 1, "color": "#222"}},
                name=html(kind),
                hovertext=[_hover(r) for _, r in rows.iterrows()],
                hoverinfo="text",
            )
        )

    fig.update_yaxes(
        tickmode="array", tickvals=list(range(len(labels))), ticktext=labels,
        autorange="reversed", range=None, zeroline=False, showgrid=False,
    )
    fig.update_xaxes(title_text="time (UTC)", showgrid=True)
    fig.update_layout(
        height=max(220, 90 * len(labels) + 120),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        legend={"orientation": "h", "y": -0.25},
        hovermode="closest",
    )
    return fig


def _lock_bars(fig: go.Figure, rows: pd.DataFrame, y: float, end: pd.Timestamp) -> None:
    """Each grant of the lock as a green bar; a red one where the run outlived its lock."""
    grants = rows[rows["event"].isin(["lock_acquire", "lock_renew"]) & rows["lock_ttl_ms"].notna()]
    valid_until = None
    for _, grant in grants.iterrows():
        valid_until = grant["ts"] + pd.to_timedelta(int(grant["lock_ttl_ms"]), unit="ms")
        _span(fig, grant["ts"], valid_until, y + LOCK_OFFSET, "lock validity", "#2ca02c", 6,
              hover=f"{html(grant['lock_key'], 200)} held by {html(grant['lock_owner'], 200)} "
              f"until {_naive(valid_until):%H:%M:%S.%f}"[:-3])
    if valid_until is not None and valid_until < end:
        _span(fig, valid_until, end, y + LOCK_OFFSET, "ran without its lock", "#d62728", 6,
              hover=f"lock expired {(end - valid_until).total_seconds():.1f} s before the end")
