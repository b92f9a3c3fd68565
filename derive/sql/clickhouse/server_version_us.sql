-- The server's clock in microseconds: row versions that order the derived tables' writes
-- across processes and restarts.
SELECT toUnixTimestamp64Micro(now64(6)) AS now_us
