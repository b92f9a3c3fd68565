-- The executions the batch's lock incidents are derived from: the touched keys' new
-- executions, and every kept holder whose span meets a touched or a reached one (what
-- the reached holders' incidents are made of), read whole by their keys. Holders that
-- meet neither keep their incidents as they are.
CREATE OR REPLACE TABLE derive_work_holders ENGINE = Memory AS
WITH kept AS (
    SELECT candidate.execution_uid AS execution_uid, candidate.key AS key
    FROM derive_work_lock_candidates AS candidate
    INNER JOIN (
        SELECT lock_key, lo, hi FROM derive_work_lock_spans
        UNION ALL
        SELECT assumeNotNull(lock_key) AS lock_key, lo, hi FROM derive_work_lock_candidates
        WHERE execution_uid IN (SELECT unit FROM derive_work_lock_reached)
    ) AS reaching ON reaching.lock_key = assumeNotNull(candidate.lock_key)
    WHERE candidate.lo <= reaching.hi AND reaching.lo <= candidate.hi
)
SELECT * FROM derive_work_derived_executions
WHERE key IN (SELECT unit FROM derive_work_keys)
UNION ALL
SELECT * FROM derived_executions
WHERE key IN (SELECT key FROM kept) AND execution_uid IN (SELECT execution_uid FROM kept)
