-- How many rows one of a refresh's bookkeeping tables holds.
SELECT count() AS n FROM {own:Identifier}.{table:Identifier}
