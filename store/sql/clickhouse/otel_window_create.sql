-- Where a refresh that answers the recent rows first reads from (no row: every row of the
-- parts it reads). The source views read it; every refresh sets it before it reads.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_window (read_from DateTime64(9, 'UTC'))
ENGINE = MergeTree ORDER BY tuple()
