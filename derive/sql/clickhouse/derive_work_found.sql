-- The rows found, each once: what the touched units are derived from.
CREATE OR REPLACE TABLE derive_work_found ENGINE = Memory AS
SELECT *
FROM (
    SELECT * FROM derive_work_own
    UNION ALL SELECT * FROM derive_work_keyed
    UNION ALL SELECT * FROM derive_work_rest
)
LIMIT 1 BY ifNull(idempotency_key, ''), ifNull(job_id, ''), ts, event_uid
