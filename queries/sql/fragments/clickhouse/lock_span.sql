-- An execution's span on its lock_key (`lo`, `hi`): from the lock's acquisition (or its
-- expiry, were it earlier) to the later of the expiry and the end; an unknown start
-- reaches back forever, an unknown end (still running) forever on.
coalesce(least(lock_acquired_us, lock_valid_until_us), toInt64(-9223372036854775807)) AS lo,
if(end_us IS NULL, toInt64(9223372036854775807),
   assumeNotNull(greatest(end_us, coalesce(lock_valid_until_us, end_us)))) AS hi
