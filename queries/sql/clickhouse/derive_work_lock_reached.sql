-- The kept holders whose span meets a touched execution's: their incidents may change.
CREATE OR REPLACE TABLE derive_work_lock_reached ENGINE = MergeTree ORDER BY tuple() AS
SELECT DISTINCT candidate.execution_uid AS unit, candidate.key AS key
FROM (
    SELECT
        execution_uid, key, assumeNotNull(lock_key) AS lock_key,
        -- include: lock_span
    FROM derive_work_lock_candidates
) AS candidate
INNER JOIN derive_work_lock_spans AS touched ON touched.lock_key = candidate.lock_key
WHERE candidate.lo <= touched.hi AND touched.lo <= candidate.hi
