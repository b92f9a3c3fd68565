-- Take the derivation lock: creating a table fails where it exists.
CREATE TABLE {db:Identifier}.derived_deriving (at DateTime) ENGINE = Memory
