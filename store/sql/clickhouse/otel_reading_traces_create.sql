-- The traces of the spans a refresh reads: every span of them is read again with them, as
-- a span's meaning can depend on its children (a lifecycle step as a child span).
CREATE TABLE IF NOT EXISTS {own:Identifier}.{traces:Identifier} (trace_id String)
ENGINE = MergeTree ORDER BY tuple()
