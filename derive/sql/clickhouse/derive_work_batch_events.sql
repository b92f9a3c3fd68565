-- The new rows' own events (worker starts and stops carry no job: they are their own unit).
CREATE OR REPLACE TABLE derive_work_batch_events ENGINE = Memory AS
SELECT DISTINCT event_uid AS unit FROM derive_work_batch
