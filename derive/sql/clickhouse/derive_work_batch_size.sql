-- The rows to derive: a batch larger than the executions kept twice over
-- (derived_executions_count) is cheaper to build from nothing.
SELECT count() AS batch_rows FROM derive_work_batch
