-- One row per key over every execution: its job type, first run, how many runs (with the
-- attempts that left no events) and how many ran the effect. The unfiltered input of
-- duplicates_over_time, kept so the overview's chart groups keys instead of executions.
SELECT
    key,
    max(job_type) AS job_type,
    min(start_us) AS first_us,
    CAST(count(*) + sum(missing_attempts_before) AS BIGINT) AS executions,
    countIf(had_side_effect) AS side_effects
FROM derived_executions
GROUP BY key
