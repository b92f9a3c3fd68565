-- The later layers' rows of the duplicates listing still shown, in the listing's order
-- (that of the kept answer: derive/catalogue.py by_key).
SELECT first_us, key, layer, start, length
FROM listing_later
ORDER BY first_us, key
