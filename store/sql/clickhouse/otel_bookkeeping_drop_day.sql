-- A day retention dropped from the exporter's tables, dropped from a table of spans kept.
ALTER TABLE {own:Identifier}.{table:Identifier} DROP PARTITION ID {partition:String}
