-- The rows to derive beside the executions kept: a batch larger than them twice over is
-- cheaper to build from nothing.
SELECT
    (SELECT count() FROM derive_work_batch) AS batch_rows,
    (SELECT count() FROM derived_executions) AS executions
