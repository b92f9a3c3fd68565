-- The table a refill builds `events` in, left over or swapped out.
DROP TABLE IF EXISTS {own:Identifier}.events_next
