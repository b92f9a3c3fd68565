-- A stage of the mapping kept as a table, empty until a refill, shaped like its view.
CREATE OR REPLACE TABLE {own:Identifier}.{stage:Identifier}
ENGINE = MergeTree ORDER BY tuple()
EMPTY AS SELECT * FROM {own:Identifier}.{view:Identifier}
