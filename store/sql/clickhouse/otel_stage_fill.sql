-- Refill a stage from its view.
INSERT INTO {own:Identifier}.{stage:Identifier}
SELECT * FROM {own:Identifier}.{view:Identifier}
