-- Whether a segment holds each event_uid once.
SELECT count(*) = count(DISTINCT event_uid) FROM read_parquet($file)
