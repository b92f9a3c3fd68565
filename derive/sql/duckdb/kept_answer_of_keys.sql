-- The rows a kept answer of one key a row (derive/catalogue.py by_key) holds now for the
-- keys listed, unnumbered: what a reader holding the answer from before needs once a
-- batch replaced those keys' rows.
SELECT * EXCLUDE (answer_row)
FROM {table:Identifier}
WHERE key IN (SELECT unnest(:keys))
