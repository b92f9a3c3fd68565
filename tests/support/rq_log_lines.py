"""What real `rq worker` 3.0 processes wrote to their logs at INFO, one excerpt a kind of
run: the lines the RQ log tests and the decoder corpus read."""

from __future__ import annotations

W = "694f2969ceb342c1b73421ee4efbb6c8"
STARTED = f"07:57:14 Worker {W}: started with PID 14941, version 3.0.0\n".encode()
OK = (
    f"07:57:16 Worker {W}: q1: billing.charge('o-1') (1444b288-07e1-4a7e-a893-3ca47f4f1763)\n"
    f"07:57:16 Successfully completed billing.charge('o-1') job in 0:00:00.001164s on worker {W}\n"
    f"07:57:16 Worker {W}: q1: Job OK (1444b288-07e1-4a7e-a893-3ca47f4f1763)\n"
    f"07:57:16 Worker {W}: job 1444b288-07e1-4a7e-a893-3ca47f4f1763 result is kept for 500 "
    "seconds\n"
).encode()
FAILED = (
    f"07:57:18 Worker {W}: q1: billing.charge('o-2', retries=1) "
    "(52176f28-3b0c-4a30-8884-4f07020e89a0)\n"
    f"07:57:18 Worker {W}: job 52176f28-3b0c-4a30-8884-4f07020e89a0: exception raised while "
    "executing (billing.charge)\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/billing.py", line 6, in charge\n'
    "    raise ValueError('card declined')\n"
    "ValueError: card declined\n"
    "\n"
).encode()
KILLED = (
    f"07:57:20 Worker {W}: q1: billing.charge('o-3') (b05893de-191a-4b43-a65c-8fb734a8a168)\n"
    f"07:57:22 Worker {W}: job b05893de-191a-4b43-a65c-8fb734a8a168 failed (Work-horse "
    "terminated unexpectedly; waitpid returned 9 (signal 9); )\n"
    "07:57:22 Work horse killed for job b05893de-191a-4b43-a65c-8fb734a8a168: retpid=15024, "
    "ret_val=9\n"
    f"07:57:22 Worker {W}: q1: billing.charge('o-3') (b05893de-191a-4b43-a65c-8fb734a8a168)\n"
    f"07:57:27 Worker {W}: q1: Job OK (b05893de-191a-4b43-a65c-8fb734a8a168)\n"
).encode()
