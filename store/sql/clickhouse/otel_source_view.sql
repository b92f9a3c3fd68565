-- One of the exporter's tables under a fixed name in dupescope's own database.
CREATE OR REPLACE VIEW {own:Identifier}.{view:Identifier} AS
SELECT * FROM {source_db:Identifier}.{table:Identifier}
