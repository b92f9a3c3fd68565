-- The executions kept (every kept row read through FINAL: asked only of a large batch).
SELECT count() AS executions FROM derived_executions
