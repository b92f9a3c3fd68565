-- Bulk inserts whose rows the id index may not hold yet (a read killed between the two).
SELECT count() AS n FROM {own:Identifier}.otel_ids_pending
