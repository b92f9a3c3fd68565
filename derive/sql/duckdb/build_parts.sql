-- The events of a build split by key, written out once so that each part of the keys is
-- derived from its own rows (derive/embedded/partitioned.py).
-- `build_event`: an event, in the part of its job's key (the job's idempotency key, found
-- on any event of the job_id, else the job_id: event_facts.sql's key), so every event of
-- a key's jobs lands in one part, and every repeat of an event with it; an event of no job
-- goes by its own idempotency key, and worker lifecycle events, which name neither, share
-- one part. The enqueues come again with `build_event` false, in the part of the key they
-- name themselves: what derive_executions.sql counts as a key's enqueued jobs.
WITH job_keys AS (
    SELECT job_id, max(idempotency_key) AS job_key
    FROM events
    WHERE job_id IS NOT NULL
    GROUP BY job_id
)
SELECT
    e.*,
    true AS build_event,
    hash(coalesce(k.job_key, e.job_id, e.idempotency_key, '')) % $parts AS build_part
FROM events AS e
LEFT JOIN job_keys AS k ON k.job_id = e.job_id
UNION ALL BY NAME
SELECT
    event,
    job_id,
    idempotency_key,
    false AS build_event,
    hash(coalesce(idempotency_key, job_id)) % $parts AS build_part
FROM events
WHERE event = 'enqueue' AND job_id IS NOT NULL
