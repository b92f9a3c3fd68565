-- One of the exporter's tables under a fixed name in dupescope's own database: the rows
-- of the parts a refresh reads (from `otel_window` on, where one is set).
CREATE OR REPLACE VIEW {own:Identifier}.{view:Identifier} AS
SELECT *
FROM {source_db:Identifier}.{table:Identifier}
WHERE (_part IN (SELECT part FROM {own:Identifier}.{parts:Identifier})
       AND Timestamp >= (SELECT if(count() = 0, toDateTime64(0, 9, 'UTC'), min(read_from))
                         FROM {own:Identifier}.otel_window))
