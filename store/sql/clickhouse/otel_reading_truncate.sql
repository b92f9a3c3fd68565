-- Forget the parts the last refresh read.
TRUNCATE TABLE {own:Identifier}.{parts:Identifier}
