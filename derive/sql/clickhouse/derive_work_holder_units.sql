-- The executions whose lock incidents are derived again: the touched keys' new ones and
-- the kept holders their spans reach.
CREATE OR REPLACE TABLE derive_work_holder_units ENGINE = Memory AS
SELECT DISTINCT unit FROM (
    SELECT execution_uid AS unit FROM derive_work_derived_executions
    WHERE key IN (SELECT unit FROM derive_work_keys)
    UNION ALL
    SELECT unit FROM derive_work_lock_reached
)
