-- A derivation's work table (or view) dropped once the derivation wrote its rows.
DROP TABLE IF EXISTS {table:Identifier}
