-- The newest event time evaluated so far.
SELECT value FROM meta WHERE name = 'watermark'
