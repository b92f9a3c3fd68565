-- Give the derivation lock back.
DROP TABLE IF EXISTS {db:Identifier}.derived_deriving
