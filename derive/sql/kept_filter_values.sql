-- filter_values.sql's answer added up from the embedded store's per-segment counts
-- (derived_segment_counts), which a new segment adds to without a pass over the rest.
SELECT field, value, CAST(sum(events) AS BIGINT) AS events
FROM derived_segment_counts
WHERE field <> ''
GROUP BY field, value
ORDER BY field, events DESC, value
