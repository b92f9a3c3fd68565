-- Empty a stage before refilling it.
TRUNCATE TABLE {own:Identifier}.{stage:Identifier}
