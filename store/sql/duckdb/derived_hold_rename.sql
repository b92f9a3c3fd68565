-- The rows held in memory take the view's name.
ALTER TABLE {held:Identifier} RENAME TO {table:Identifier}
