-- Which side effects, commits and acks were made by an owner whose lock had already
-- expired, or had already been acquired by another owner (what a fencing token prevents).
-- The next acquisition of the same lock_key after an owner's own is the one that took it.
-- Writes after the owner released its lock itself are not judged: it no longer claimed it.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
WITH locked AS (
    SELECT
        *,
        lead(lock_acquired_us) OVER (
            PARTITION BY lock_key ORDER BY lock_acquired_us, execution_uid) AS next_acquired_us,
        lead(lock_owner) OVER (
            PARTITION BY lock_key ORDER BY lock_acquired_us, execution_uid) AS next_owner
    FROM derived_executions
    WHERE lock_key IS NOT NULL AND lock_acquired_us IS NOT NULL
),
selected AS (
    SELECT * FROM locked WHERE (:job_type IS NULL OR job_type = :job_type)
      AND (:queue IS NULL OR queue = :queue)
      AND (:since_us IS NULL OR start_us >= :since_us)
      AND (:until_us IS NULL OR start_us < :until_us)
),
writes AS (
    SELECT *, 'side_effect' AS write, last_side_effect_us AS write_us FROM selected
    WHERE last_side_effect_us IS NOT NULL
    UNION ALL
    SELECT *, 'commit' AS write, last_commit_us AS write_us FROM selected
    WHERE last_commit_us IS NOT NULL
    UNION ALL
    SELECT *, 'ack' AS write, last_ack_us AS write_us FROM selected
    WHERE last_ack_us IS NOT NULL
)
SELECT
    'stale_owner_write' AS rule,
    key,
    job_id,
    attempt AS delivery_attempt,
    worker_id,
    job_type,
    lock_key,
    lock_owner,
    write AS event,
    write_us AS ts_us,
    lock_valid_until_us AS expired_at_us,
    CASE WHEN next_acquired_us <= write_us AND coalesce(next_owner, '') <> coalesce(lock_owner, '')
        THEN next_owner END AS taken_by,
    CASE WHEN next_acquired_us <= write_us AND coalesce(next_owner, '') <> coalesce(lock_owner, '')
        THEN next_acquired_us END AS taken_at_us,
    write_us > lock_valid_until_us AS lock_expired
FROM writes
WHERE NOT coalesce(lock_released_us <= write_us, false)
  AND (write_us > lock_valid_until_us
       OR (next_acquired_us <= write_us
           AND coalesce(next_owner, '') <> coalesce(lock_owner, '')))
ORDER BY ts_us, key
