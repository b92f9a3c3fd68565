-- A day retention dropped from the exporter's tables, dropped from `events` too.
ALTER TABLE {own:Identifier}.events DROP PARTITION ID {partition:String}
