-- Take the refill lock: creating a table fails where it exists.
CREATE TABLE {own:Identifier}.otel_refilling (at DateTime) ENGINE = Memory
