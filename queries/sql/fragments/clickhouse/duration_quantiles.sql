-- ClickHouse spelling of fragments/duration_quantiles.sql (quantile syntax).
quantileExactInclusive(0.5)(duration_ms) AS p50_ms,
quantileExactInclusive(0.95)(duration_ms) AS p95_ms,
quantileExactInclusive(0.99)(duration_ms) AS p99_ms,
