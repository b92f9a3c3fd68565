-- A batch's work table of a derived table, down to the rows of the units it touches.
DELETE FROM {table:Identifier}
WHERE {unit:Identifier} IS NULL
   OR {unit:Identifier} NOT IN (SELECT unit FROM {units:Identifier})
