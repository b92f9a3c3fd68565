-- Every derived row of a build from nothing, numbered within its unit.
-- param version: UInt64
INSERT INTO {rows:Identifier}
SELECT *, toUInt32(row_number() OVER (PARTITION BY {unit:Identifier})), :version, 0
FROM {work:Identifier}
