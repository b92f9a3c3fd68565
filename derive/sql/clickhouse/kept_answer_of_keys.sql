-- The rows a kept answer of one key a row (derive/catalogue.py by_key) holds now for the
-- keys listed, unnumbered: what a reader holding the answer from before needs once a
-- derivation replaced those keys' rows.
-- param keys: Array(String)
SELECT * EXCEPT (_row, _version, _deleted)
FROM {table:Identifier} FINAL
WHERE _deleted = 0 AND key IN :keys
