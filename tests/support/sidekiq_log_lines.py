"""What a real Sidekiq 6.4.1 process wrote to its log (tests/sidekiq_lab), in its default
and JSON formats: the lines the Sidekiq log tests and the decoder corpus read."""

from __future__ import annotations

import orjson

JOB = '{"retry":3,"queue":"billing","class":"ChargeJob","args":["order-7",2],"jid":"9c00d0"'
RETRIED = (
    b"2026-12-05T08:00:43.189Z pid=20902 tid=gvy INFO: Booting Sidekiq 6.4.1 with redis\n"
    b"2026-12-05T08:00:45.240Z pid=20902 tid=gs6 class=ChargeJob jid=9c00d0 INFO: start\n"
    b"2026-12-05T08:00:45.245Z pid=20902 tid=gs6 class=ChargeJob jid=9c00d0 elapsed=0.005 "
    b"INFO: fail\n"
    b'2026-12-05T08:00:45.245Z pid=20902 tid=gs6 WARN: {"context":"Job raised exception",'
    b'"job":' + JOB.encode() + b',"enqueued_at":1796457645.24},"jobstr":"{}"}\n'
    b"2026-12-05T08:00:45.245Z pid=20902 tid=gs6 WARN: RuntimeError: card declined\n"
    b"2026-12-05T08:00:45.245Z pid=20902 tid=gs6 WARN: /app/jobs.rb:36:in `perform'\n"
    b"/usr/share/sidekiq/processor.rb:196:in `execute_job'\n"
    b"2026-12-05T08:00:46.307Z pid=20902 tid=gmi class=ChargeJob jid=9c00d0 INFO: start\n"
    b"2026-12-05T08:00:46.358Z pid=20902 tid=gmi class=ChargeJob jid=9c00d0 elapsed=0.05 "
    b"INFO: done\n"
)


def json_line(ts: str, tid: str, msg: str, **ctx: object) -> bytes:
    """A line of Sidekiq's JSON log format."""
    record: dict[str, object] = {"ts": ts, "pid": 20903, "tid": tid, "lvl": "INFO", "msg": msg}
    if ctx:
        record["ctx"] = ctx
    return orjson.dumps(record) + b"\n"


UNIT = (
    '#<struct Sidekiq::BasicFetch::UnitOfWork queue="queue:billing", job="{\\"retry\\":3,'
    '\\"queue\\":\\"billing\\",\\"class\\":\\"ChargeJob\\",\\"args\\":[\\"order-9\\"],'
    '\\"jid\\":\\"b4e2ac\\"}">'
)
# A job running when its process was stopped (TERM, `-t 1`): pushed back, run elsewhere.
PUSHED_BACK = (
    json_line("2026-12-05T08:00:45.244Z", "gpn", "start", **{"class": "ChargeJob", "jid": "b4e2ac"})
    + json_line("2026-12-05T08:00:57.282Z", "gvz", f"Work still in progress [{UNIT}]")
    + json_line("2026-12-05T08:00:57.284Z", "gvz", "Pushed 1 jobs back to Redis")
    + json_line("2026-12-05T08:00:57.284Z", "gpn", "fail",
            **{"class": "ChargeJob", "jid": "b4e2ac", "elapsed": 12.04})
)
RERUN = (
    b"2026-12-05T08:00:58.001Z pid=30001 tid=abc class=ChargeJob jid=b4e2ac INFO: start\n"
    b"2026-12-05T08:00:58.060Z pid=30001 tid=abc class=ChargeJob jid=b4e2ac elapsed=0.059 "
    b"INFO: done\n"
)
