"""Keys too long for a URL: links search by their start, the page says so, the CLI copes."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import orjson
import pytest
from click.testing import CliRunner
from dashboard_app import frame_with, open_page, texts

from dashboard.links import MAX_KEY_IN_URL, timeline_link
from dupescope.cli import main

#: 100 KB: a request line this long is refused by the dashboard's web server.
LONG_KEY = "order-" + "x" * 100_000


def _events(key: str) -> list[dict]:
    common = {"idempotency_key": key, "job_id": "j-long", "job_type": "billing.charge"}
    return [
        {"ts": "2025-11-30T12:00:00Z", "event": "deliver", "delivery_attempt": 1,
         "worker_id": "w1", **common},
        {"ts": "2025-11-30T12:00:01Z", "event": "side_effect", "delivery_attempt": 1,
         "worker_id": "w1", **common},
        {"ts": "2025-11-30T12:00:40Z", "event": "deliver", "delivery_attempt": 2,
         "worker_id": "w2", **common},
        {"ts": "2025-11-30T12:00:41Z", "event": "side_effect", "delivery_attempt": 2,
         "worker_id": "w2", **common},
    ]


@pytest.fixture
def long_store(tmp_path, monkeypatch, make_table) -> str:
    from store.embedded import EmbeddedStore

    store = EmbeddedStore(tmp_path / "store")
    store.write(make_table(_events(LONG_KEY)))
    monkeypatch.setenv("DUPESCOPE_STORE", str(store.root))
    return str(store.root)


def _linked_key(link: str) -> str:
    [key] = parse_qs(urlparse(link).query)["key"]
    return key


def test_a_short_key_links_to_itself() -> None:
    assert timeline_link("inv 1/2") == "timeline?key=inv%201%2F2"
    assert timeline_link("inv-1", "http://h:8501/") == "http://h:8501/timeline?key=inv-1"


def test_a_key_too_long_for_a_url_links_to_a_search_by_its_start() -> None:
    link = timeline_link(LONG_KEY, "http://127.0.0.1:8501")
    assert len(link) < MAX_KEY_IN_URL + 100
    searched = _linked_key(link)
    assert LONG_KEY.startswith(searched) and len(searched) > 1000


def test_a_long_key_of_many_byte_characters_is_cut_on_a_character() -> None:
    key = "é" * 5000  # six characters each, once percent-encoded
    searched = _linked_key(timeline_link(key))
    assert searched == "é" * (MAX_KEY_IN_URL // 6)


def test_the_cli_timeline_of_a_long_key_still_works(long_store) -> None:
    result = CliRunner().invoke(main, ["timeline", LONG_KEY, "--store", long_store,
                                       "--format", "json"])
    assert result.exit_code == 0, result.output[:500]
    assert [row["event"] for row in orjson.loads(result.output)] == [
        "deliver", "side_effect", "deliver", "side_effect"
    ]


def test_the_worst_keys_link_a_long_key_by_its_start(long_store) -> None:
    app = open_page("timeline")
    assert not app.exception
    link = frame_with(app, "timeline")["timeline"].iloc[0]
    assert len(link) < MAX_KEY_IN_URL + 100
    assert LONG_KEY.startswith(_linked_key(link))


def test_the_page_shows_a_long_key_and_says_it_cannot_be_linked(long_store) -> None:
    app = open_page("timeline", key=LONG_KEY)
    assert not app.exception
    assert "harmful" in texts(app.error)[0]
    assert any("too long for a link" in t for t in texts(app.info))


def test_searching_by_its_start_offers_the_long_key(long_store) -> None:
    app = open_page("timeline", key=_linked_key(timeline_link(LONG_KEY)))
    assert not app.exception
    suggestions = app.selectbox(key="suggestion")
    [label] = suggestions.options
    assert len(label) < 400  # shortened, not 100 KB in a drop-down
    suggestions.select_index(0).run()
    assert not app.exception
    assert app.text_input(key="key").value == LONG_KEY
    assert "harmful" in texts(app.error)[0]


def test_demo_prints_a_long_keys_link_with_a_note() -> None:
    from dupescope.cli_demo import timeline_link as demo_link

    assert demo_link("inv-1", 8501) == "http://127.0.0.1:8501/timeline?key=inv-1"
    assert "too long for a link" in demo_link(LONG_KEY, 8501)
