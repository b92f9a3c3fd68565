-- An execution's span on its lock_key (`lo`, `hi`): from the lock's acquisition (or its
-- expiry, were it earlier) to the later of the expiry and the end; an unknown start
-- reaches back forever, an unknown end (still running) forever on.
coalesce(least(lock_acquired_us, lock_valid_until_us), -9223372036854775807) AS lo,
CASE WHEN end_us IS NULL THEN 9223372036854775807
     ELSE greatest(end_us, coalesce(lock_valid_until_us, end_us)) END AS hi
