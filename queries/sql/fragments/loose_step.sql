-- Whether an event is an execution step that names neither its worker nor its attempt
-- (an effect logged apart, keyed by the task id alone): it joins its job's latest deliver
-- on any worker. A condition over `u` (an events row), in both spellings of
-- event_facts.sql.
(u.worker_id IS NULL AND u.delivery_attempt IS NULL AND u.execution_id IS NULL
    AND u.job_id IS NOT NULL
    AND u.event NOT IN ('outbox_write', 'enqueue', 'enqueue_deduped', 'deliver',
                        'worker_start', 'worker_stop'))
