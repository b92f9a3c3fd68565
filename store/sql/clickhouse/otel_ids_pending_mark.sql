-- A bulk insert into `events` that its id index view does not see is about to begin.
INSERT INTO {own:Identifier}.otel_ids_pending (at) SELECT now64(6)
