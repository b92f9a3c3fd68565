-- The lock incidents of those runs: as derived again for every holder of a touched
-- lock_key (all the touched keys' executions among them), as kept for the rest.
CREATE OR REPLACE TABLE derive_work_answer_incidents ENGINE = Memory AS
SELECT * FROM derive_work_derived_lock_incidents
UNION ALL
SELECT * FROM derived_lock_incidents
WHERE execution_uid IN (SELECT execution_uid FROM derive_work_answer_runs)
  AND execution_uid NOT IN (SELECT unit FROM derive_work_holder_units)
