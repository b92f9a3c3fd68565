-- Forget the last refresh's step parents.
TRUNCATE TABLE {own:Identifier}.otel_step_parents
