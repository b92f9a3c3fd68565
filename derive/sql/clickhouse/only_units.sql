-- The units a watch round narrows its questions to (queries.derived.only), as a table.
-- param units: Array(String)
CREATE OR REPLACE TABLE {table:Identifier} ENGINE = Memory AS
SELECT arrayJoin(:units) AS unit
