-- The refill lock's holder says it is alive: where it runs, and when it last read a chunk.
INSERT INTO {own:Identifier}.otel_refilling (at, host, pid)
VALUES (now(), {host:String}, {pid:UInt32})
