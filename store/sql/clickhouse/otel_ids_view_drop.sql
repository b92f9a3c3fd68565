-- The id index's view off for a read's bulk inserts (store/otel_index.py); opening the
-- store or the end of the read makes it again (store/clickhouse.py ids_ddl).
DROP VIEW IF EXISTS {own:Identifier}.events_ids_mv
