-- One of the exporter's tables under a fixed name in dupescope's own database: the rows
-- of the parts a refresh reads.
CREATE OR REPLACE VIEW {own:Identifier}.{view:Identifier} AS
SELECT *
FROM {source_db:Identifier}.{table:Identifier}
WHERE _part IN (SELECT part FROM {own:Identifier}.{parts:Identifier})
