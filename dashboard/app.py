"""dupescope's dashboard: routes to the pages and draws the filters they share.

Run with `dupescope dashboard` (or `streamlit run dashboard/app.py`); DUPESCOPE_STORE
names the store.
"""

import sys
from pathlib import Path

# `streamlit run` puts this folder, not the project, on sys.path: make `dashboard`,
# `queries` and `store` import from the checkout this file belongs to.
ROOT = str(Path(__file__).resolve().parents[1])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)

import streamlit as st  # noqa: E402

from dashboard import filters  # noqa: E402

# The icon is a file of ours, which Streamlit inlines: a `:material/...:` page icon makes
# every browser fetch it from fonts.gstatic.com, and the dashboard makes no request
# beyond the host that serves it (tests/test_dashboard_browser.py).
FAVICON = str(Path(__file__).with_name("assets") / "favicon.svg")
st.set_page_config(page_title="dupescope", page_icon=FAVICON, layout="wide")

# The default page is always served at "/", never at its own path; a hidden default that
# forwards to the overview keeps "/overview" a stable link. It forwards the query too,
# before the sidebar's filters bind it: "/?window=1h" opens the overview on the last hour.
OVERVIEW = "app_pages/overview.py"


def _home() -> None:
    st.switch_page(OVERVIEW, query_params=st.query_params.to_dict())


home = st.Page(_home, title="dupescope", default=True, visibility="hidden", url_path="home")
page = st.navigation(
    [
        home,
        st.Page(OVERVIEW, title="Overview", url_path="overview", icon=":material/dashboard:"),
        st.Page("app_pages/timeline.py", title="Key timeline", url_path="timeline",
                icon=":material/timeline:"),
        st.Page("app_pages/durations.py", title="Durations", url_path="durations",
                icon=":material/timer:"),
        st.Page("app_pages/alerts.py", title="Alerts", url_path="alerts",
                icon=":material/notifications:"),
        st.Page("app_pages/checklist.py", title="Checklist", url_path="checklist",
                icon=":material/checklist:"),
        st.Page("app_pages/whatif.py", title="What if", url_path="whatif",
                icon=":material/tune:"),
        st.Page("app_pages/report.py", title="Incident report", url_path="report",
                icon=":material/description:", visibility="hidden"),
    ]
)
if page is not home:  # the root page only forwards to the overview
    filters.sidebar()
page.run()
