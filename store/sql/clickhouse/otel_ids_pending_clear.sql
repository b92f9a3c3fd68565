-- The id index holds every row the pending bulk inserts added.
TRUNCATE TABLE {own:Identifier}.otel_ids_pending
