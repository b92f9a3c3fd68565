"""The key's timeline as a static SVG: one lane per execution, drawn by matplotlib with
no browser, as the dashboard's swimlane draws it (run bar, lock validity under it, the
visibility-timeout window over it, a marker per event)."""

from __future__ import annotations

import io

import pandas as pd

#: Event kind -> (marker, colour), the swimlane's palette in matplotlib's markers.
MARKERS: dict[str, tuple[str, str]] = {
    "deliver": (">", "#1f77b4"),
    "lock_acquire": ("D", "#2ca02c"),
    "lock_renew": ("d", "#2ca02c"),
    "lock_contended": ("X", "#ff7f0e"),
    "lock_release": ("|", "#7f7f7f"),
    "lock_expired": ("x", "#d62728"),
    "idempotency_hit": ("o", "#17becf"),
    "side_effect": ("*", "#d62728"),
    "occ_conflict": ("x", "#ff7f0e"),
    "commit": ("o", "#2ca02c"),
    "ack": ("o", "#2ca02c"),
    "nack": ("o", "#ff7f0e"),
    "fail": ("X", "#d62728"),
}


def _naive(moment: pd.Timestamp) -> pd.Timestamp:
    return moment.tz_convert("UTC").tz_localize(None) if moment.tzinfo else moment


def timeline_svg(timeline: pd.DataFrame, executions: pd.DataFrame) -> str:
    """The SVG text of the chart (text drawn as paths: no font, nothing to escape)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    lanes = max(len(executions), 1)
    figure, axes = plt.subplots(figsize=(9, 1.2 + 0.7 * lanes), dpi=96)
    try:
        for lane, run in enumerate(executions.to_dict(orient="records")):
            y = lanes - lane
            start, end = _naive(run["start"]), _naive(run["end"])
            axes.plot([start, end], [y, y], color="#4c72b0", linewidth=6, solid_capstyle="butt")
            valid = run.get("lock_valid_until")
            if valid is not None and not pd.isna(valid):
                axes.plot([start, _naive(valid)], [y - 0.25, y - 0.25], color="#2ca02c",
                          linewidth=2)
            window = run.get("visibility_timeout_ms")
            if window is not None and not pd.isna(window):
                until = start + pd.to_timedelta(float(window), unit="ms")
                axes.plot([start, until], [y + 0.25, y + 0.25], color="#9467bd",
                          linewidth=1, linestyle="--")
            events = timeline[timeline["execution"] == run["execution"]]
            for event in events.to_dict(orient="records"):
                marker, colour = MARKERS.get(str(event["event"]), (".", "#7f7f7f"))
                axes.plot([_naive(event["ts"])], [y], marker=marker, color=colour,
                          markersize=9 if event["event"] == "side_effect" else 6,
                          linestyle="none")
        axes.set_yticks([lanes - i for i in range(len(executions))],
                        [f"#{int(r)}" for r in executions["execution"]] if len(executions)
                        else [])
        axes.set_ylim(0.3, lanes + 0.7)
        axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        axes.set_xlabel("UTC  (bar: run · green: lock valid · dashed: visibility timeout · "
                        "star: side effect)")
        axes.grid(axis="x", color="#dddddd")
        figure.tight_layout()
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None})
        return out.getvalue()
    finally:
        plt.close(figure)
