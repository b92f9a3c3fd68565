-- When the bulk inserts of a read not yet in the id index began (store/otel_index.py):
-- kept until the index holds their rows, so a read killed between the two resumes with
-- the index filled from the earliest of them.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_ids_pending (at DateTime64(6))
ENGINE = MergeTree ORDER BY tuple()
