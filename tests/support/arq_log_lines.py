"""What real arq 0.28 workers wrote to their logs at INFO, one excerpt a kind of run: the
lines the arq log tests and the decoder corpus read."""

from __future__ import annotations

STARTING = (
    b"08:01:42: Starting worker for 5 functions: ok, boom, retry_once, hog, slow\n"
    b"08:01:42: redis_version=7.0.15 mem_usage=2.60M clients_connected=5 db_keys=20\n"
)
OK = (
    "08:01:43:   0.12s → d6dafe7afeb74a8ab1d05674647163ce:ok('k1')\n"
    "08:01:43:   0.00s ← d6dafe7afeb74a8ab1d05674647163ce:ok ● 'k1'\n"
).encode()
RETRIED = (
    "08:01:43:   0.11s → f0bf96903c4c49659d684f17f686bf55:retry_once('k3')\n"
    "08:01:43:   0.00s ↻ f0bf96903c4c49659d684f17f686bf55:retry_once retrying job in 0.10s\n"
    "08:01:43:   0.30s → f0bf96903c4c49659d684f17f686bf55:retry_once('k3') try=2\n"
    "08:01:43:   0.00s ← f0bf96903c4c49659d684f17f686bf55:retry_once ● 'k3'\n"
).encode()
TIMED_OUT = (
    "08:01:43:   0.12s → 2b04d2efb1a74253a526299b514a3234:slow('k5', 3)\n"
    "08:01:44:   1.01s ! 2b04d2efb1a74253a526299b514a3234:slow failed, TimeoutError: \n"
    "Traceback (most recent call last):\n"
    "asyncio.exceptions.CancelledError\n"
    "\n"
    "The above exception was the direct cause of the following exception:\n"
    "\n"
    "TimeoutError\n"
).encode()
EXPIRED_TRY = (
    "08:01:54:  11.12s → b1797cee999e4f5eabd0db290fbefbd5:hog('k4', 13) try=2 "
    "delayed=11.12s\n"
).encode()
LONG = (
    "08:01:43:   0.12s → 3035903fdeda455488d610b74054009f:ok('o-7', 'xxxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…)\n"
).encode()
