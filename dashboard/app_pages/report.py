"""Report: the incident report of a key (`/report?key=KEY`) or of an alert
(`/report?incident=ALERT_ID`, the link webhooks carry), shown and offered for download
as the one self-contained HTML file `dupescope report` writes."""

from __future__ import annotations

import streamlit as st
import streamlit.components.v1 as components

from dashboard import loaders, ui
from dashboard.escape import md
from dashboard.source import snapshot, store_url

st.title("Incident report")
url = store_url()
snap = snapshot(url)
incident = st.query_params.get("incident")
key = st.query_params.get("key")
if incident:
    page = ui.answer("incident report", lambda: loaders.incident_report_html(url, snap, incident))
    missing = f"No alert **{md(incident)}** in this store: `watch` did not record it and " \
        "the rules do not find it now."
elif key:
    page = ui.answer("key report", lambda: loaders.key_report_html(url, snap, key))
    missing = f"No events for key **{md(key)}**."
else:
    page, missing = None, "Open a report from a key's timeline, or from an alert's link."
if page is None:
    ui.nothing(missing)
else:
    st.download_button("Download report", page, file_name="dupescope-report.html",
                       mime="text/html", icon=":material/download:")
    components.html(page, height=1400, scrolling=True)
