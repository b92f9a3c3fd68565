-- The keys whose row of the duplicates answer a derivation writes again: the touched
-- keys, and the keys of the other holders whose lock incidents it derived again (a key
-- that takes a lock inside the gap of another key's expired lock makes that overrun
-- overlapped).
CREATE OR REPLACE TABLE derive_work_answer_keys ENGINE = Memory AS
SELECT DISTINCT unit FROM (
    SELECT unit FROM derive_work_keys
    UNION ALL
    SELECT assumeNotNull(key) AS unit FROM derive_work_lock_reached WHERE key IS NOT NULL
)
