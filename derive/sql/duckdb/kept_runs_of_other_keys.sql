-- The kept duplicate runs of the keys a batch did not touch but whose lock incidents it
-- derived again (`other_keys`): their answers of one key a row are written again, over
-- these runs as kept (derive/embedded/incremental.py `_answers_of`).
SELECT *
FROM derived_duplicate_runs
WHERE key IN (SELECT unit FROM other_keys)
