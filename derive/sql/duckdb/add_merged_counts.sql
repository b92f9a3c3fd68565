-- The counts of the merged segments summed from their inputs (merged_counts) join those
-- counted from their rows, as a batch's counts of the segments it adds or grows.
INSERT INTO derived_segment_counts
SELECT * FROM merged_counts
