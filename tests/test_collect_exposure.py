"""A collector listening beyond loopback says so when it has no token or no TLS."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from collect_support import running

from collectors.service.run import CollectConfig, exposure_warnings
from collectors.service.tls import TlsFiles
from store.embedded import EmbeddedStore


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_needs_no_warning(host: str) -> None:
    assert exposure_warnings(CollectConfig(host=host)) == []


def test_all_interfaces_without_token_or_tls_warn_of_both() -> None:
    warnings = exposure_warnings(CollectConfig(host="0.0.0.0"))
    assert len(warnings) == 2
    assert "--token" in warnings[0] and "--tls-cert" in warnings[1]


def test_a_token_and_tls_leave_nothing_to_warn_of() -> None:
    config = CollectConfig(host="0.0.0.0", token="t", tls=TlsFiles(Path("c"), Path("k")))
    assert exposure_warnings(config) == []


def test_no_receivers_listen_so_nothing_is_exposed() -> None:
    config = CollectConfig(host="0.0.0.0", http_port=None, grpc_port=None, tail=["app.log"])
    assert exposure_warnings(config) == []


def test_the_collector_logs_the_warnings_when_it_starts(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="dupescope.collect")
    with running(EmbeddedStore(tmp_path / "store"), host="0.0.0.0", token="t"):
        pass
    messages = [r.getMessage() for r in caplog.records if r.name == "dupescope.collect"]
    assert [m for m in messages if "listening on 0.0.0.0" in m] == [
        "listening on 0.0.0.0 without --tls-cert: events (and any token) cross the network "
        "in the clear"]
