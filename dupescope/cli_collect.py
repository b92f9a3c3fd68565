"""`dupescope collect`: the long-running collector (OTLP/HTTP, OTLP/gRPC, POST, tails,
Celery's event stream)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from dupescope.options import (
    celery_log_options,
    celery_log_settings,
    field_mapping_or_exit,
    input_format_option,
    log_date_option,
    log_date_settings,
    mapping_option,
    open_store_or_exit,
    store_option,
)


@click.command()
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--http-port",
    type=click.IntRange(-1, 65535),
    default=4318,
    show_default=True,
    help="OTLP/HTTP, JSON-lines POST, /healthz and /metrics (0: any free port, -1: off).",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(-1, 65535),
    default=4317,
    show_default=True,
    help="OTLP/gRPC (0: any free port, -1: off).",
)
@click.option(
    "--tail",
    "tail",
    multiple=True,
    help="A log file to follow (repeatable); a quoted pattern ('logs/*.jsonl') also "
    "follows the files that match it later.",
)
@input_format_option
@celery_log_options
@log_date_option
@click.option(
    "--celery-broker",
    "celery_brokers",
    multiple=True,
    metavar="URL",
    help="Consume Celery's event stream from this broker (redis://... or amqp://...; "
    "repeatable). Workers must send events (`celery worker -E`). Needs "
    "`pip install 'dupescope[celery]'`.",
)
@click.option(
    "--celery-exchange",
    default="celeryev",
    show_default=True,
    help="Celery's event exchange (its `event_exchange` setting).",
)
@click.option(
    "--celery-key",
    "celery_keys",
    multiple=True,
    metavar="KWARG",
    help="A task keyword argument that holds the idempotency key (repeatable: the first "
    "present wins), read from the events' kwargs.",
)
@click.option(
    "--bullmq-redis",
    "bullmq_redis",
    multiple=True,
    metavar="URL",
    help="Read BullMQ's events streams on this Redis (redis://host:6379/0; repeatable), "
    "as QueueEvents does. Needs `pip install 'dupescope[bullmq]'`. See docs/queues-bullmq.md.",
)
@click.option(
    "--bullmq-prefix",
    default="bull",
    show_default=True,
    help="The queues' key prefix (BullMQ's `prefix` option).",
)
@click.option(
    "--bullmq-queue",
    "bullmq_queues",
    multiple=True,
    metavar="QUEUE",
    help="A BullMQ queue to read (repeatable). Default: every queue found under the prefix.",
)
@click.option(
    "--rq-redis",
    "rq_redis",
    multiple=True,
    metavar="URL",
    help="Poll RQ's state in this Redis database (redis://host:6379/0; repeatable), "
    "read-only: its started registries, job hashes and results streams. Needs "
    "`pip install 'dupescope[rq]'`. See docs/queues-rq-arq.md.",
)
@click.option(
    "--rq-interval",
    type=click.FloatRange(min=0.01),
    default=0.1,
    show_default=True,
    help="Seconds between two looks at RQ's state (--rq-redis).",
)
@click.option(
    "--rabbitmq-firehose",
    "rabbitmq_firehoses",
    multiple=True,
    metavar="AMQP_URL",
    help="Consume RabbitMQ's Firehose tracer of this URL's vhost (repeatable): every "
    "publish and delivery, Dramatiq's and Celery's. Needs `rabbitmqctl trace_on -p VHOST` "
    "and `pip install 'dupescope[firehose]'`.",
)
@click.option(
    "--state",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Tail offsets file. Default: in the embedded store's folder.",
)
@click.option(
    "--token",
    envvar="DUPESCOPE_COLLECT_TOKEN",
    default=None,
    help="Require `Authorization: Bearer TOKEN` (or $DUPESCOPE_COLLECT_TOKEN).",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1024),
    default=16 * 1024 * 1024,
    show_default=True,
    help="Largest request body, also once decompressed (413 above).",
)
@click.option(
    "--queue-size",
    type=click.IntRange(min=1),
    default=200_000,
    show_default=True,
    help="Events waiting for the writer before senders get 429 / RESOURCE_EXHAUSTED.",
)
@click.option(
    "--body-budget-bytes",
    type=click.IntRange(min=1024),
    default=32 * 1024 * 1024,
    show_default=True,
    help="Bytes of request bodies held at once, from before one is read until its rows "
    "are queued (compressed ones as they are decompressed; at least --max-body-bytes). An "
    "HTTP body without room waits up to 1 s, unread, then gets 429; a gRPC export gets "
    "RESOURCE_EXHAUSTED at once.",
)
@click.option(
    "--recent-uids",
    type=click.IntRange(min=2),
    default=1_000_000,
    show_default=True,
    help="Event uids remembered to skip resent batches (32-64 bytes of memory each); "
    "/healthz shows how many seconds that reaches back (dedupe_window_s).",
)
@click.option(
    "--decode-workers",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Processes that decode bodies (0: decode in the receiving threads).",
)
@mapping_option
@click.option(
    "--compact-every",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds between background compactions of the embedded store (0: off).",
)
@click.option(
    "--compact-min-segments",
    type=click.IntRange(min=2),
    default=16,
    show_default=True,
    help="Merge a day once it has gathered this many segments.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain): both receivers then speak TLS only. Needs --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key of --tls-cert.",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
)
def collect(
    store_url: str | None,
    host: str,
    http_port: int,
    grpc_port: int,
    tail: tuple[str, ...],
    input_format: str,
    celery_hostname: str | None,
    celery_timezone: str | None,
    celery_log_format: str | None,
    log_date: str | None,
    celery_brokers: tuple[str, ...],
    celery_exchange: str,
    celery_keys: tuple[str, ...],
    bullmq_redis: tuple[str, ...],
    bullmq_prefix: str,
    bullmq_queues: tuple[str, ...],
    rq_redis: tuple[str, ...],
    rq_interval: float,
    rabbitmq_firehoses: tuple[str, ...],
    state: Path | None,
    token: str | None,
    max_body_bytes: int,
    queue_size: int,
    body_budget_bytes: int,
    recent_uids: int,
    decode_workers: int,
    mapping: str | None,
    compact_every: float,
    compact_min_segments: int,
    tls_cert: Path | None,
    tls_key: Path | None,
    log_level: str,
) -> None:
    """Run the collector. It answers a sender only once its batch is durable."""
    from collectors.service.run import CollectConfig, serve

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    from collectors.service.tls import TlsFiles
    if celery_brokers:
        from collectors.service.celery_source import (
            BrokerUrlError,
            CeleryMissing,
            check_broker_url,
            require_celery,
        )
        try:
            require_celery()
            for url in celery_brokers:
                check_broker_url(url)
        except (CeleryMissing, BrokerUrlError) as exc:
            raise click.ClickException(str(exc)) from exc
    if bullmq_redis:
        from collectors.service.bullmq_source import RedisMissing, require_redis
        try:
            require_redis()
        except RedisMissing as exc:
            raise click.ClickException(str(exc)) from exc
    if rq_redis:
        from collectors.service.rq_source import RedisMissing, check_redis_url, require_redis

        try:
            require_redis()
            for url in rq_redis:
                check_redis_url(url)
        except (RedisMissing, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    if rabbitmq_firehoses:
        from collectors.service.firehose_source import (
            FirehoseMissing,
            check_firehose_url,
            require_kombu,
        )
        try:
            require_kombu()
            for url in rabbitmq_firehoses:
                check_firehose_url(url)
        except (FirehoseMissing, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    field_mapping = field_mapping_or_exit(mapping)
    celery = celery_log_settings(celery_hostname, celery_timezone, celery_log_format)
    day = log_date_settings(log_date)
    store = open_store_or_exit(store_url, writable=True)
    config = CollectConfig(
        host=host,
        http_port=None if http_port < 0 else http_port,
        grpc_port=None if grpc_port < 0 else grpc_port,
        tail=list(tail),
        tail_format=input_format,
        celery=celery,
        day=day,
        celery_brokers=list(celery_brokers),
        celery_exchange=celery_exchange,
        celery_key_kwargs=tuple(celery_keys),
        bullmq_redis=list(bullmq_redis),
        bullmq_prefix=bullmq_prefix,
        bullmq_queues=list(bullmq_queues),
        rq_redis=list(rq_redis),
        rq_interval=rq_interval,
        rabbitmq_firehoses=list(rabbitmq_firehoses),
        state=state,
        token=token,
        max_body_bytes=max_body_bytes,
        queue_rows=queue_size,
        body_budget_bytes=body_budget_bytes,
        recent_uids=recent_uids,
        decode_workers=decode_workers,
        mapping=field_mapping,
        compact_every=compact_every,
        compact_min_segments=compact_min_segments,
        tls=TlsFiles(tls_cert, tls_key) if tls_cert and tls_key else None,
    )
    try:
        serve(store, config, store_url)
    except OSError as exc:  # a port in use, an unreadable tail state folder
        raise click.ClickException(f"cannot start the collector: {exc}") from exc
    finally:
        store.close()
