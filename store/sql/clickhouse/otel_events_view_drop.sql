-- `events` as a view, from an earlier version of the mapping: it becomes a table.
DROP VIEW {own:Identifier}.events
