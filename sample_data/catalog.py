"""The job types, queues and fleet the sample workload runs on.

The catalogue mixes the protection schemes seen in real systems (idempotency record,
lock + record, optimistic concurrency, nothing at all) so that most duplicates are
absorbed and a few are harmful, as in production.
"""

from __future__ import annotations

from dataclasses import dataclass

# Queue name -> visibility timeout (ms). Celery's Redis transport has a visibility timeout
# too; it is shortened here so that its redeliveries fit in a few hours of traffic.
QUEUES: dict[str, int] = {
    "billing": 60_000,
    "email": 30_000,
    "notifications": 30_000,
    "orders": 45_000,
    "reports": 300_000,
    "search": 120_000,
    "cache": 30_000,
    "celery": 300_000,
}


@dataclass(frozen=True)
class JobType:
    """One task name and how its body protects itself against running twice."""

    name: str
    queue: str
    weight: float  # share of traffic
    median_ms: float  # lognormal duration
    sigma: float
    resource: str  # resource_key namespace, e.g. "account"
    guard: str = "idem"  # "idem" (record), "occ" (conditional update) or "none"
    keyed: bool = True  # has an idempotency_key
    lock_ttl_ms: int = 0  # 0: takes no lock
    heartbeat: bool = False  # renews its lock (and extends visibility) while running
    on_contended: str = "ack"  # "ack": the holder does the work; "nack": retry later
    max_wait_ms: int = 2_000  # how long lock acquisition blocks before giving up
    unique: bool = False  # the producer has a dedupe table (enqueue_deduped)
    outbox: bool = False  # published by the outbox relay
    celery: bool = False  # redelivery keeps job_id and reports no delivery_attempt
    stampede: bool = False  # a cache rebuild many requests can trigger at once
    effect: str = "effect applied"

    @property
    def locked(self) -> bool:
        return self.lock_ttl_ms > 0

    @property
    def visibility_timeout_ms(self) -> int:
        return QUEUES[self.queue]


def _t(name: str, queue: str, weight: float, median_ms: float, sigma: float, resource: str,
       **kw: object) -> JobType:
    return JobType(name, queue, weight, median_ms, sigma, resource, **kw)  # type: ignore[arg-type]


JOB_TYPES: tuple[JobType, ...] = (
    # billing: money moves, so locks and idempotency records everywhere
    _t("billing.charge_card", "billing", 6, 900, 0.6, "account", lock_ttl_ms=15_000,
       unique=True, effect="card charged"),
    _t("billing.refund_payment", "billing", 1.5, 1200, 0.6, "account", lock_ttl_ms=15_000,
       effect="refund issued"),
    _t("billing.create_invoice", "billing", 4, 700, 0.5, "account", lock_ttl_ms=10_000,
       outbox=True, effect="invoice created"),
    _t("billing.apply_credit", "billing", 1, 400, 0.5, "account", guard="occ",
       effect="credit applied"),
    _t("billing.sync_stripe_customer", "billing", 2, 1500, 0.8, "account", guard="occ",
       effect="customer synced"),
    _t("billing.retry_failed_payment", "billing", 1, 1100, 0.7, "account", lock_ttl_ms=15_000,
       on_contended="nack", effect="card charged"),
    _t("billing.close_period", "billing", 0.3, 9000, 0.9, "account", lock_ttl_ms=10_000,
       heartbeat=True, effect="period closed"),
    _t("billing.export_ledger", "reports", 0.4, 20_000, 0.9, "account", lock_ttl_ms=30_000,
       heartbeat=True, effect="ledger exported"),
    # email: idempotency records, no locks
    _t("email.send_receipt", "email", 6, 350, 0.5, "user", outbox=True, effect="mail sent"),
    _t("email.send_welcome", "email", 2, 300, 0.5, "user", unique=True, effect="mail sent"),
    _t("email.send_password_reset", "email", 2, 250, 0.4, "user", effect="mail sent"),
    _t("email.send_invoice", "email", 3, 450, 0.5, "user", outbox=True, effect="mail sent"),
    _t("email.send_digest", "email", 1.5, 800, 0.6, "user", guard="none", keyed=False,
       effect="mail sent"),
    _t("email.send_dunning_notice", "email", 0.8, 400, 0.5, "user", effect="mail sent"),
    # notifications: mostly unguarded, a duplicate means a second push
    _t("notifications.push_mobile", "notifications", 2.5, 150, 0.5, "user", guard="none",
       effect="push sent"),
    _t("notifications.send_sms", "notifications", 1.5, 300, 0.5, "user", effect="sms sent"),
    _t("notifications.webhook_deliver", "notifications", 4, 600, 0.9, "tenant",
       effect="webhook posted"),
    _t("notifications.slack_alert", "notifications", 0.8, 250, 0.4, "tenant", guard="none",
       keyed=False, effect="slack posted"),
    # orders: optimistic concurrency on the order row, a few locked steps
    _t("orders.confirm", "orders", 5, 500, 0.5, "order", guard="occ", outbox=True,
       effect="order confirmed"),
    _t("orders.reserve_inventory", "orders", 4, 700, 0.6, "order", lock_ttl_ms=8_000,
       effect="stock reserved"),
    _t("orders.release_inventory", "orders", 1, 600, 0.6, "order", lock_ttl_ms=8_000,
       effect="stock released"),
    _t("orders.ship", "orders", 2, 1500, 0.7, "order", guard="occ", effect="shipment booked"),
    _t("orders.cancel", "orders", 0.8, 500, 0.5, "order", guard="occ", effect="order cancelled"),
    _t("orders.update_tracking", "orders", 2.5, 300, 0.6, "order", guard="occ",
       effect="tracking updated"),
    _t("orders.fraud_check", "orders", 2, 1800, 0.8, "order", effect="fraud scored"),
    _t("orders.split_shipment", "orders", 0.4, 2500, 0.7, "order", lock_ttl_ms=12_000,
       on_contended="nack", effect="shipment split"),
    # reports: long, heartbeat-renewed locks
    _t("reports.rebuild", "reports", 1, 25_000, 0.9, "report", lock_ttl_ms=30_000,
       heartbeat=True, effect="report rebuilt"),
    _t("reports.generate_monthly", "reports", 0.5, 40_000, 0.8, "tenant", lock_ttl_ms=60_000,
       heartbeat=True, effect="report written"),
    _t("reports.export_csv", "reports", 1, 8000, 0.9, "report", lock_ttl_ms=20_000,
       heartbeat=True, effect="csv exported"),
    _t("reports.refresh_dashboard", "reports", 1.5, 3000, 0.8, "tenant", guard="occ",
       effect="dashboard refreshed"),
    _t("reports.compute_usage", "reports", 1, 6000, 0.7, "account", lock_ttl_ms=20_000,
       heartbeat=True, effect="usage computed"),
    # search and cache: no keys, stampede-prone rebuilds behind a lock
    _t("search.reindex_product", "search", 3, 800, 0.7, "product", guard="occ", keyed=False,
       effect="document indexed"),
    _t("search.reindex_catalog", "search", 0.2, 30_000, 0.8, "tenant", keyed=False,
       guard="none", lock_ttl_ms=45_000, heartbeat=True, effect="catalog indexed"),
    _t("search.delete_document", "search", 1, 200, 0.4, "product", guard="occ", keyed=False,
       effect="document deleted"),
    _t("cache.rebuild_product_page", "cache", 2, 1500, 0.5, "product", guard="none",
       keyed=False, lock_ttl_ms=10_000, stampede=True, effect="page rendered"),
    _t("cache.warm_pricing", "cache", 1, 1200, 0.5, "tenant", guard="none", keyed=False,
       lock_ttl_ms=10_000, stampede=True, effect="prices cached"),
    _t("cache.invalidate_cdn", "cache", 1.5, 400, 0.6, "product", guard="none", keyed=False,
       effect="cdn purged"),
    # accounts / users
    _t("accounts.provision_tenant", "orders", 0.5, 5000, 0.7, "tenant", lock_ttl_ms=20_000,
       unique=True, effect="tenant provisioned"),
    _t("accounts.delete_user", "orders", 0.5, 1500, 0.6, "user", lock_ttl_ms=10_000,
       effect="user deleted"),
    _t("accounts.merge_duplicates", "orders", 0.3, 3000, 0.7, "user", lock_ttl_ms=10_000,
       on_contended="nack", effect="users merged"),
    _t("accounts.rotate_api_key", "orders", 0.6, 300, 0.4, "tenant", guard="occ",
       effect="key rotated"),
    # integrations
    _t("integrations.sync_salesforce", "search", 1, 4000, 0.9, "tenant", guard="occ",
       effect="crm synced"),
    _t("integrations.push_hubspot_contact", "search", 1.5, 900, 0.7, "user",
       effect="contact pushed"),
    _t("integrations.import_csv_row", "search", 2, 150, 0.5, "tenant", effect="row imported"),
    # Celery-style tasks: redelivery keeps the task id, no delivery count is reported
    _t("tasks.process_upload", "celery", 2, 2500, 0.8, "user", celery=True, lock_ttl_ms=20_000,
       effect="upload processed"),
    _t("tasks.generate_thumbnail", "celery", 3, 700, 0.6, "product", celery=True,
       guard="none", keyed=False, effect="thumbnail written"),
    _t("tasks.transcode_video", "celery", 0.4, 30_000, 0.8, "user", celery=True,
       lock_ttl_ms=60_000, heartbeat=True, effect="video transcoded"),
    _t("tasks.send_batch_emails", "celery", 0.8, 5000, 0.7, "tenant", celery=True,
       effect="batch mailed"),
    _t("tasks.cleanup_sessions", "celery", 0.5, 2000, 0.6, "tenant", celery=True,
       guard="occ", keyed=False, effect="sessions purged"),
    _t("tasks.recalculate_scores", "celery", 1, 3000, 0.7, "account", celery=True,
       guard="occ", effect="scores updated"),
)

BY_NAME: dict[str, JobType] = {jt.name: jt for jt in JOB_TYPES}

# Pool sizes keep natural traffic from piling onto one resource by chance.
RESOURCE_POOLS: dict[str, int] = {
    "account": 40_000, "user": 200_000, "order": 500_000, "report": 20_000,
    "tenant": 5_000, "product": 100_000,
}

# Fleet: 25 hosts x 8 worker processes = 200 workers; a few producer processes.
HOSTS = 25
PROCS_PER_HOST = 8
PRODUCERS = ("api-1", "api-2", "api-3", "api-4", "api-5", "api-6")
OUTBOX_RELAY = "outbox-relay-1"

# Releases rolled out during the run, at a share of the traffic horizon. With crashes on,
# a release that crash-loops goes out and is rolled back.
FIRST_VERSION = "2026.11.3"
CRASH_LOOPING_VERSION = "2026.11.4"
DEPLOYS: tuple[tuple[float, str], ...] = ((0.6, "2026.11.5"),)
DEPLOYS_WITH_CRASHES: tuple[tuple[float, str], ...] = ((0.3, "2026.11.4"), (0.45, "2026.11.3"))
