-- A superset of the rows of a key's timeline, by the sort key and the job_id bloom filter.
SELECT *
FROM events FINAL
WHERE idempotency_key = {key:String}
    OR job_id = {key:String}
    OR job_id IN (
        SELECT job_id FROM events WHERE idempotency_key = {key:String} AND job_id IS NOT NULL
    )
