"""How the Celery scenario tells a slow step from a stalled one: it waits as long as
something moves, and names what stalled once nothing has for its window."""

from __future__ import annotations

import time

import pytest
from celery_world.harness import wait_until


def test_a_step_that_keeps_moving_is_waited_for_past_the_window() -> None:
    started = time.monotonic()
    wait_until(lambda: time.monotonic() - started > 0.6, "slow step", timeout_s=0.3,
               progress=lambda: int((time.monotonic() - started) * 10))
    assert time.monotonic() - started > 0.6


def test_a_step_with_no_progress_for_the_window_stalls_saying_what_and_why() -> None:
    with pytest.raises(TimeoutError, match=r"stalled: crash tasks, no progress for 0.2 s \(3 of 4"):
        wait_until(lambda: False, "crash tasks", timeout_s=0.2, progress=lambda: 7,
                   detail=lambda: "3 of 4")
