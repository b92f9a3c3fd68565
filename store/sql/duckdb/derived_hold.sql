-- An attached table's rows read into memory, beside the view it replaces.
CREATE TEMP TABLE {held:Identifier} AS SELECT * FROM {table:Identifier}
