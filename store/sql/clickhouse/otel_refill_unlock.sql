-- Give the refill lock back.
DROP TABLE IF EXISTS {own:Identifier}.otel_refilling
