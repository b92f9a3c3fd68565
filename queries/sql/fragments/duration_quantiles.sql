-- The p50/p95/p99 of duration_ms, as select-list items (ClickHouse spells the quantile
-- differently: fragments/clickhouse/duration_quantiles.sql).
quantile_cont(duration_ms, 0.5) AS p50_ms,
quantile_cont(duration_ms, 0.95) AS p95_ms,
quantile_cont(duration_ms, 0.99) AS p99_ms,
