-- The traces a refresh reads again beside the new parts: those of spans read earlier that
-- a new step child span makes executions (otel_revisit_fill.sql). Usually empty.
CREATE TABLE IF NOT EXISTS {own:Identifier}.{traces:Identifier} (trace_id String)
ENGINE = MergeTree ORDER BY tuple()
