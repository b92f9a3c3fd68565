-- One row per key over every execution: its job type, first run, how many runs (with the
-- attempts that left no events) how many ran the effect, and how many said anything of it (`evidenced`). The unfiltered input of
-- duplicates_over_time, kept so the overview's chart groups keys instead of executions.
SELECT
    key,
    max(job_type) AS job_type,
    min(start_us) AS first_us,
    CAST(count(*) + sum(missing_attempts_before) AS BIGINT) AS executions,
    countIf(had_side_effect) AS side_effects,
    countIf(had_effect_evidence) AS evidenced
FROM derived_executions
GROUP BY key
