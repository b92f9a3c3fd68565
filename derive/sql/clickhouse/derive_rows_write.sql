-- The derived rows of the units listed, under a new version, numbered within their unit.
-- param version: UInt64
INSERT INTO {rows:Identifier}
SELECT *, toUInt32(row_number() OVER (PARTITION BY {unit:Identifier})), :version, 0
FROM {work:Identifier}
WHERE {unit:Identifier} IN (SELECT unit FROM {units:Identifier})
