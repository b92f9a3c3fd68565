-- A derived table built or held in memory, dropped by name.
DROP TABLE IF EXISTS {table:Identifier}
