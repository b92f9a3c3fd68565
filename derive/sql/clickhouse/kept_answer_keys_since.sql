-- The keys whose rows of a kept answer of one key a row (derive/catalogue.py by_key)
-- derivations wrote since row version `version`, tombstones included: what a reader
-- holding the answer from then reads again (queries.derived.answer_changes).
-- param version: UInt64
SELECT DISTINCT key AS unit
FROM {table:Identifier}
WHERE _version > :version
