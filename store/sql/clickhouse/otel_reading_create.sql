-- The parts of one of the exporter's tables a refresh reads (its source view reads
-- only those).
CREATE TABLE IF NOT EXISTS {own:Identifier}.{parts:Identifier} (part String)
ENGINE = MergeTree ORDER BY tuple()
