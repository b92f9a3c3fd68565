-- The counts of merged segment `:segment`, added up from its inputs' (`:names`) kept
-- counts: per field and value, their events summed and their first and last times.
-- Asked only where merged_segment_inputs.sql found the merge dropped no repeat.
SELECT
    :segment AS segment,
    field,
    value,
    CAST(sum(events) AS BIGINT) AS events,
    min(first_ts) AS first_ts,
    max(last_ts) AS last_ts
FROM derived_segment_counts
WHERE segment IN (SELECT unnest(:names))
GROUP BY field, value
