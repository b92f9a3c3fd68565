"""What a real Celery 5.7 prefork worker on Redis wrote to its log, cut down to one excerpt
a kind of run: the lines the Celery log tests and the decoder corpus read."""

from __future__ import annotations

BANNER = b"""\
 -------------- dupescope-test@vm v5.7.0 (collider)
--- ***** -----
-- ******* ---- Linux-6.18.44-fc-v1045-x86_64-with-glibc2.36 2026-12-01 20:26:38
- ** ---------- .> transport:   redis://:**@127.0.0.1:6379/9
 -------------- [queues]

[tasks]
  . celery_log_app.add

[2026-12-01 20:26:38,996: INFO/MainProcess] Connected to redis://:**@127.0.0.1:6379/9
[2026-12-01 20:26:39,142: INFO/MainProcess] dupescope-test@vm ready.
"""
ADD = b"""\
[2026-12-01 20:26:39,561: INFO/MainProcess] Task celery_log_app.add[e752fc26-8130-426c-ba61-db3b4aee25d8] received
[2026-12-01 20:26:39,572: INFO/ForkPoolWorker-1] Task celery_log_app.add[e752fc26-8130-426c-ba61-db3b4aee25d8] succeeded in 0.0009977910001452983s: 3
"""  # noqa: E501
FLAKY = b"""\
[2026-12-01 20:26:39,651: INFO/MainProcess] Task celery_log_app.flaky[02c60c39-035e-4872-844c-979a12590d03] received
[2026-12-01 20:26:39,918: INFO/ForkPoolWorker-1] Task celery_log_app.flaky[02c60c39-035e-4872-844c-979a12590d03] retry: Retry in 0.5s: ConnectionError('upstream down')
[2026-12-01 20:26:39,951: INFO/MainProcess] Task celery_log_app.flaky[02c60c39-035e-4872-844c-979a12590d03] received
[2026-12-01 20:26:40,212: INFO/ForkPoolWorker-1] Task celery_log_app.flaky[02c60c39-035e-4872-844c-979a12590d03] succeeded in 0.00029142699986550724s: 'done'
"""  # noqa: E501
BROKEN = b"""\
[2026-12-01 20:26:39,593: INFO/MainProcess] Task celery_log_app.broken[de55fcad-c449-4d3b-a30b-8f96f3c5c4d1] received
[2026-12-01 20:26:39,660: ERROR/ForkPoolWorker-2] Task celery_log_app.broken[de55fcad-c449-4d3b-a30b-8f96f3c5c4d1] raised unexpected: ValueError('bad input')
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/celery/app/trace.py", line 564, in trace_task
    R = retval = fun(*args, **kwargs)
                 ^^^^^^^^^^^^^^^^^^^^
  File "/work/tests/celery_log_app.py", line 59, in broken
    raise ValueError("bad input")
ValueError: bad input
"""  # noqa: E501
# The pool process running `crash` killed itself (SIGKILL); `flaky`, open at the time in
# ForkPoolWorker-1, logs its retry afterwards. The crashed task is then received again.
CRASH = b"""\
[2026-12-01 20:16:32,463: INFO/MainProcess] Task cltasks.flaky[f7190caf-78b8-4442-8a29-033149d7d519] received
[2026-12-01 20:16:32,573: INFO/MainProcess] Task cltasks.crash[8dc57862-bcda-4bc8-be09-1953ad01680a] received
[2026-12-01 20:16:32,629: ERROR/MainProcess] Process 'ForkPoolWorker-2' pid:10853 exited with 'signal 9 (SIGKILL)'
[2026-12-01 20:16:32,655: ERROR/MainProcess] Task handler raised error: WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL) Job: 3.')
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/billiard/pool.py", line 1367, in mark_as_worker_lost
    raise WorkerLostError(
billiard.einfo.ExceptionWithTraceback:
\"\"\"
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/billiard/pool.py", line 1367, in mark_as_worker_lost
    raise WorkerLostError(
billiard.exceptions.WorkerLostError: Worker exited prematurely: signal 9 (SIGKILL) Job: 3.
\"\"\"
[2026-12-01 20:16:32,648: INFO/ForkPoolWorker-1] Task cltasks.flaky[f7190caf-78b8-4442-8a29-033149d7d519] retry: Retry in 1s: ConnectionError('upstream down')
[2026-12-01 20:16:32,911: INFO/MainProcess] Task cltasks.crash[8dc57862-bcda-4bc8-be09-1953ad01680a] received
[2026-12-01 20:16:32,913: INFO/ForkPoolWorker-1] Task cltasks.crash[8dc57862-bcda-4bc8-be09-1953ad01680a] succeeded in 0.00033115099995484343s: 4
"""  # noqa: E501
# Handed out again by the visibility timeout (2 s) while its first run sleeps 4 s: the
# second run ends first.
SLOW = b"""\
[2026-12-01 20:26:42,154: INFO/MainProcess] Task celery_log_app.slow[e27357db-7b20-4c35-a15d-83cc27c7092e] received
[2026-12-01 20:26:44,601: INFO/MainProcess] Task celery_log_app.slow[e27357db-7b20-4c35-a15d-83cc27c7092e] received
[2026-12-01 20:26:44,611: INFO/ForkPoolWorker-3] Task celery_log_app.slow[e27357db-7b20-4c35-a15d-83cc27c7092e] succeeded in 0.0009337100000266219s: 'slept'
[2026-12-01 20:26:46,167: INFO/ForkPoolWorker-1] Task celery_log_app.slow[e27357db-7b20-4c35-a15d-83cc27c7092e] succeeded in 4.003429528999959s: 'slept'
"""  # noqa: E501
# Succeeded, then the whole worker was SIGKILLed before its ack; the restarted worker is
# handed the message again.
UNACKED = b"""\
[2026-12-01 20:26:46,235: INFO/MainProcess] Task celery_log_app.unacked[9a8a596f-6c12-4e6d-8500-d83485e202a7] received
[2026-12-01 20:26:46,240: INFO/ForkPoolWorker-3] Task celery_log_app.unacked[9a8a596f-6c12-4e6d-8500-d83485e202a7] succeeded in 0.004528310999830865s: 'charged'
[2026-12-01 20:26:50,324: INFO/MainProcess] dupescope-test@vm ready.
[2026-12-01 20:26:50,351: INFO/MainProcess] Task celery_log_app.unacked[9a8a596f-6c12-4e6d-8500-d83485e202a7] received
[2026-12-01 20:26:50,358: INFO/ForkPoolWorker-1] Task celery_log_app.unacked[9a8a596f-6c12-4e6d-8500-d83485e202a7] succeeded in 0.0008147980001922406s: 'charged'
"""  # noqa: E501
