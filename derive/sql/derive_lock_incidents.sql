-- Lock incidents, one row per execution involved: `lock_expired_while_running` (its lock
-- validity ended before it did; `other_*` name the first other owner that acquired the
-- lock_key inside that gap, when one did) and `split_brain` (another owner held an
-- unexpired lock on the same lock_key at the same time; one row per side).
-- Two holds are compared on two hosts' clocks, so an overlap shorter than the skew hosts
-- commonly have (500 ms) is no evidence of split brain and is left out.
-- Materialised once per store snapshot as `derived_lock_incidents`.
WITH holds AS (
    SELECT
        execution_uid,
        lock_key,
        lock_owner,
        lock_acquired_us AS hold_start_us,
        least(lock_valid_until_us, coalesce(lock_released_us, lock_valid_until_us))
            AS hold_end_us,
        lock_valid_until_us,
        end_us
    FROM derived_executions
    WHERE lock_key IS NOT NULL AND lock_acquired_us IS NOT NULL
      AND lock_valid_until_us IS NOT NULL
),
ordered AS (
    -- A hold that starts before an earlier hold of the same lock_key ended overlaps it.
    SELECT
        *,
        max(hold_end_us) OVER (
            PARTITION BY lock_key ORDER BY hold_start_us, execution_uid
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS earlier_end_us
    FROM holds
),
overlapping AS (
    SELECT
        later.execution_uid AS later_uid,
        later.lock_owner AS later_owner,
        earlier.execution_uid AS earlier_uid,
        earlier.lock_owner AS earlier_owner,
        later.hold_start_us AS from_us,
        least(earlier.hold_end_us, later.hold_end_us) AS until_us
    FROM ordered AS later
    JOIN holds AS earlier ON earlier.lock_key = later.lock_key
    WHERE later.earlier_end_us > later.hold_start_us
      AND earlier.execution_uid <> later.execution_uid
      AND coalesce(earlier.lock_owner, '') <> coalesce(later.lock_owner, '')
      AND (earlier.hold_start_us < later.hold_start_us
           OR (earlier.hold_start_us = later.hold_start_us
               AND earlier.execution_uid < later.execution_uid))
      AND earlier.hold_end_us > later.hold_start_us
      AND least(earlier.hold_end_us, later.hold_end_us) - later.hold_start_us > 500000
),
overruns AS (
    SELECT
        running.execution_uid AS execution_uid,
        min_by(other.lock_owner, other.hold_start_us)
            FILTER (WHERE other.execution_uid IS NOT NULL) AS other_owner,
        min_by(other.execution_uid, other.hold_start_us)
            FILTER (WHERE other.execution_uid IS NOT NULL) AS other_uid,
        min(running.lock_valid_until_us) AS from_us,
        min(running.end_us) AS until_us
    FROM derived_executions AS running
    LEFT JOIN holds AS other
        ON other.lock_key = running.lock_key
        AND other.hold_start_us > running.lock_valid_until_us
        AND other.hold_start_us <= running.end_us
        AND coalesce(other.lock_owner, '') <> coalesce(running.lock_owner, '')
    WHERE running.lock_expired_while_running
    GROUP BY running.execution_uid
)
SELECT 'lock_expired_while_running' AS rule, execution_uid, other_uid, other_owner,
       from_us, until_us
FROM overruns
UNION ALL
SELECT 'split_brain' AS rule, later_uid AS execution_uid, earlier_uid AS other_uid,
       earlier_owner AS other_owner, from_us, until_us
FROM overlapping
UNION ALL
SELECT 'split_brain' AS rule, earlier_uid AS execution_uid, later_uid AS other_uid,
       later_owner AS other_owner, from_us, until_us
FROM overlapping
