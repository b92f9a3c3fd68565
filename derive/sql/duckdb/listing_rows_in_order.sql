-- A layer's rows of the kept duplicates answer in the listing's order (that of the kept
-- answer: derive/catalogue.py by_key), without their number: what the listing renders.
-- DuckDB sorts them within its memory budget; the caller renders them a batch at a time.
SELECT * EXCLUDE (answer_row)
FROM read_parquet(:path)
ORDER BY first_us, key
