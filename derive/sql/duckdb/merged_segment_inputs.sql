-- What the kept counts of a merged segment's inputs (`:names`) hold: their events, and
-- how many of the inputs are counted at all. A merge that dropped no repeat holds its
-- inputs' rows, so where every input is counted and their events add up to the merge's
-- rows, its counts are the sum of theirs (merged_segment_counts.sql) instead of a count
-- of its rows again (derive/embedded/incremental.py `_sum_merged_counts`).
SELECT
    coalesce(sum(events), 0) AS events,
    count(DISTINCT segment) AS segments
FROM derived_segment_counts
WHERE field = '' AND segment IN (SELECT unnest(:names))
