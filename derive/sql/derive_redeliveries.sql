-- Every redelivery once (a `deliver` with delivery_attempt > 1; repeats of an event_uid
-- collapsed) with its key, job type and time: what the redelivery_storm rule counts per
-- window, read here instead of a pass over every event. Materialised as
-- `derived_redeliveries`.
SELECT event_uid, key, job_type, job_id, ts
FROM event_facts
WHERE event = 'deliver' AND delivery_attempt > 1
