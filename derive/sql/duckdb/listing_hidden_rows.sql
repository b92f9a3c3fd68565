-- The base layer's rows of the duplicates listing that later layers hide (they replaced
-- those keys' rows), by place in the base's index (derive/embedded/listing.py).
SELECT file_row_number
FROM listing_base
WHERE key IN (SELECT unit FROM listing_replaced)
