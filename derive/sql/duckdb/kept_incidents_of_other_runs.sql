-- The kept lock incidents of those other keys' runs (`other_runs`) that the batch did
-- not derive again (`holder_units` lists those it did): with the incidents derived again,
-- what the other keys' answers of one key a row read.
SELECT *
FROM derived_lock_incidents
WHERE execution_uid IN (SELECT unit FROM other_runs)
  AND execution_uid NOT IN (SELECT unit FROM holder_units)
