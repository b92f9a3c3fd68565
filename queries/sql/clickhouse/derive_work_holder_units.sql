-- The executions whose lock incidents are derived again.
CREATE OR REPLACE TABLE derive_work_holder_units ENGINE = MergeTree ORDER BY tuple() AS
SELECT DISTINCT execution_uid AS unit FROM derive_work_holders
