-- Per job type, the runs that fitted the limits they ran under but would not fit a lower
-- proposed one: a visibility timeout shorter than the run (redelivered while it still
-- ran: a new duplicate), a lock TTL shorter than the run's hold of an unrenewed lock (a
-- new lock expiry while running). A heartbeat extends both while the run lives, so with
-- one neither is counted. Also the longest a run of the job type was seen waiting for a
-- held lock before it gave up (`give_up_ms`: the replay's retries give up after as long).
-- Filters select runs, as everywhere.
-- param visibility_timeout_ms: Int64
-- param lock_ttl_ms: Int64
-- param heartbeat_ms: Int64
SELECT
    job_type,
    countIf(:visibility_timeout_ms IS NOT NULL AND :heartbeat_ms IS NULL
            AND visibility_timeout_ms IS NOT NULL
            AND duration_ms <= visibility_timeout_ms
            AND duration_ms > :visibility_timeout_ms) AS new_visibility_overruns,
    countIf(:lock_ttl_ms IS NOT NULL AND :heartbeat_ms IS NULL
            AND lock_acquired_us IS NOT NULL AND lock_renewals = 0
            AND NOT lock_expired_while_running
            AND (end_us - lock_acquired_us) / 1000.0 > :lock_ttl_ms) AS new_lock_overruns,
    max(lock_wait_ms) FILTER (WHERE lock_contended) AS give_up_ms
FROM derived_executions
WHERE
    -- include: execution_filters
GROUP BY job_type
ORDER BY job_type
