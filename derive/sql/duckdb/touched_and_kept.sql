-- A derived table as the answers of one key a row read it in a batch: the rows the batch
-- derived (`touched`) and the kept rows of the other keys it reaches (`kept`), matched by
-- column name.
SELECT * FROM {touched:Identifier}
UNION ALL BY NAME
SELECT * FROM {kept:Identifier}
