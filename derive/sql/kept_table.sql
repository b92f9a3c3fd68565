-- A derived table or kept answer of the current derived state, as it is kept.
SELECT * FROM {table:Identifier}
