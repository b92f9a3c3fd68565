-- A derived table attached as a view over its file, dropped by name.
DROP VIEW IF EXISTS {table:Identifier}
