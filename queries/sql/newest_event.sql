-- The newest event time in the store (NULL when it is empty).
SELECT max(ts) AS newest FROM events
