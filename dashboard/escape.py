"""Values from the store or the URL, made safe to draw: shown as text, never as markup.

Keys, worker ids, job types and error reasons come from whoever can write an event or send
a link. Streamlit renders Markdown (with images and links) in st.markdown, captions,
alerts and widget labels, and Plotly renders a subset of HTML (`<a href>`, `<b>`, `<br>`)
in every label, legend and hover text. So every such value passes through `md` (for
Streamlit) or `html` / `plain_frame` (for Plotly) where it is drawn, and a worker_id of
`![w](http://host/x.png)` is shown as those characters instead of fetched.
"""

from __future__ import annotations

import html as _html
import re
import string
from typing import Any

import pandas as pd

#: CommonMark lets any ASCII punctuation be escaped with a backslash; escaping all of it
#: also defuses what Streamlit and GFM add on top (`:red[...]`, `:material/...:`, `$math$`,
#: `~~`).
_MARKDOWN_SPECIAL = re.compile("([" + re.escape(string.punctuation) + "])")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")
#: GFM turns bare URLs and e-mail addresses into links after escapes are resolved, so a
#: backslash cannot stop it; an invisible WORD JOINER inside the trigger (http⁠://, www⁠.,
#: a@⁠b) does.
_AUTOLINK_TRIGGERS = re.compile(
    r"(?<=http)(?=s?:)|(?<=mailto)(?=:)|(?<=xmpp)(?=:)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE
)
WORD_JOINER = "\u2060"


def shorten(value: Any, limit: int | None) -> str:
    text = "" if value is None else str(value)
    if limit is not None and len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text


def md(value: Any, limit: int | None = None) -> str:
    """`value` as literal text inside Streamlit Markdown (one line, at most `limit` chars)."""
    text = _LINE_BREAKS.sub(" ", shorten(value, limit))
    text = _AUTOLINK_TRIGGERS.sub(WORD_JOINER, text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def html(value: Any, limit: int | None = None) -> str:
    """`value` as literal text inside Plotly's HTML-like labels and hover texts."""
    return _html.escape(shorten(value, limit), quote=True)


def plain_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose text cells are `html`-escaped, for Plotly Express: category
    axes, legends and hover data all draw cell values."""
    escaped = frame.copy()
    for column in escaped.columns:
        series = escaped[column]
        if series.dtype == object or isinstance(series.dtype, pd.StringDtype):
            escaped[column] = pd.Series(
                [html(v) if isinstance(v, str) else v for v in series],
                index=series.index,
                dtype=series.dtype,
            )
    return escaped
