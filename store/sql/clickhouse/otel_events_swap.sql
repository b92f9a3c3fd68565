-- Swap the refilled `events` in whole: readers see the old rows or the new, never a mix.
EXCHANGE TABLES {own:Identifier}.events AND {own:Identifier}.events_next
