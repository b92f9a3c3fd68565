-- The kept holders whose span meets a touched execution's: their incidents may change.
CREATE OR REPLACE TABLE derive_work_lock_reached ENGINE = Memory AS
SELECT DISTINCT candidate.execution_uid AS unit, candidate.key AS key
FROM derive_work_lock_candidates AS candidate
INNER JOIN derive_work_lock_spans AS touched
    ON touched.lock_key = assumeNotNull(candidate.lock_key)
WHERE candidate.lo <= touched.hi AND touched.lo <= candidate.hi
