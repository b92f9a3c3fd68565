"""Benchmarks for the figures the issues ask for; each harness measures its baseline in
the same run, so a ratio never compares numbers from different machines or moments."""

HARNESSES = {
    "ingest": "dupescope ingest vs polars, per log shape (--workload: vs DuckDB, pyarrow, polars)",
    "timeline": "timeline KEY latency, warm and cold, at N and 10N events, vs grep -F",
    "forensics_speed": "duplicates and lock overruns at N events, warm and cold, vs pandas",
    "collector": "OTLP/HTTP spans/s end to end vs the ParseFromString rate; RSS under overload",
    "alert_latency": "from a durable batch to the webhook delivery",
    "dashboard_pages": "the loaders behind each dashboard page, cold and warm, at N events",
    "freshness": "a new batch at N events: its derivation cost, and until duplicates shows it",
    "otel_tables": "timeline and duplicates on the Collector's ClickHouse tables vs own schema",
    "otel_last_hour": "the Collector's tables never read: the last hour's first answer vs whole",
    "otel_read_statements": "a first read of the Collector's tables, statement by statement",
    "queue_labs": "the Sidekiq and SQS labs at --scale N, each source scored against its ledger",
    "bullmq_lab": "the BullMQ lab at a larger size: score, scenario time, replay entries/s",
    "rq_worker_lost": "RQ: a whole worker SIGKILLed; its job run again once abandoned, scored",
    "store_budget": "load, full build and compaction of N events under --memory: time, peak RSS",
    "whatif": "whatif predicted vs the model run again at the proposed settings; whatif timed",
    "index_writes": "what the id index costs a write on chDB, per event and per batch",
    "ingest_fresh": "bulk ingest, no manual compact, then collector batches: freshness, timeline",
}
