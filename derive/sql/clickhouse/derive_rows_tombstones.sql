-- A tombstone for each row number a listed unit no longer fills (it has fewer rows now).
-- param version: UInt64
INSERT INTO {rows:Identifier} ({unit:Identifier}, _row, _version, _deleted)
SELECT kept.unit, kept._row, :version, 1
FROM (
    SELECT {unit:Identifier} AS unit, _row
    FROM {rows:Identifier} FINAL
    WHERE {unit:Identifier} IN (SELECT unit FROM {units:Identifier}) AND _deleted = 0
) AS kept
LEFT JOIN (
    SELECT {unit:Identifier} AS unit, count() AS n
    FROM {work:Identifier}
    WHERE {unit:Identifier} IN (SELECT unit FROM {units:Identifier})
    GROUP BY {unit:Identifier}
) AS fresh ON kept.unit = fresh.unit
WHERE kept._row > fresh.n
