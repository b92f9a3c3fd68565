"""Deep links to a key's timeline, and the longest key a link can carry.

A URL is one line of an HTTP request, and servers refuse long ones (Streamlit's answers
"invalid HTTP request" well before a 100 KB key), so a key longer than MAX_KEY_IN_URL is
never put in a link: its link searches by the key's first characters instead, and the
page lists the key to pick. No Streamlit here: the CLI builds the same links.
"""

from __future__ import annotations

from urllib.parse import quote

#: Characters of a key, once percent-encoded, that a link may hold (browsers, proxies and
#: servers all take URLs of 2,000 characters).
MAX_KEY_IN_URL = 1800


def quoted(key: object) -> str:
    return quote(str(key), safe="")


def fits_in_url(key: object) -> bool:
    return len(quoted(key)) <= MAX_KEY_IN_URL


def link_prefix(key: object) -> str:
    """The longest start of `key` whose encoded form fits in a link."""
    text, size = str(key), 0
    for end, char in enumerate(text):
        size += len(quoted(char))
        if size > MAX_KEY_IN_URL:
            return text[:end]
    return text


def timeline_link(key: object, base: str = "") -> str:
    """`<base>/timeline?key=KEY`, relative without `base`; a too-long key: its prefix."""
    shown = key if fits_in_url(key) else link_prefix(key)
    path = f"timeline?key={quoted(shown)}"
    return f"{base.rstrip('/')}/{path}" if base else path
