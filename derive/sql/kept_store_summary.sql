-- store_summary.sql's answer added up from the embedded store's per-segment counts
-- (derived_segment_counts), which a new segment adds to without a pass over the rest.
SELECT
    CAST(coalesce(sum(events), 0) AS BIGINT) AS events,
    min(first_ts) AS first_ts,
    max(last_ts) AS last_ts
FROM derived_segment_counts
WHERE field = ''
