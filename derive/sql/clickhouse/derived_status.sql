-- Where the derived tables stand (queries/incremental_clickhouse.py): the newest row
-- version wins, merged or not.
SELECT format, epoch, generation, version, high, recent, partitions
FROM {db:Identifier}.derived_status
ORDER BY version DESC
LIMIT 1
