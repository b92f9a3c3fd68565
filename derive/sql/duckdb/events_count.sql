-- How many events a full build reads (before repeats are collapsed), to size its parts.
SELECT count(*) FROM events
