-- Take the refill lock: creating a table fails where it exists. Its holder marks it with
-- rows of (at, host, pid) as it reads (otel_refill_mark.sql), kept on disk: an embedded
-- chDB holder killed with its marks in memory would leave a lock nobody can tell is dead.
CREATE TABLE {own:Identifier}.otel_refilling (at DateTime, host String, pid UInt32)
ENGINE = MergeTree ORDER BY tuple()
