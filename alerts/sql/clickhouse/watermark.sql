-- The newest event time evaluated so far.
SELECT value FROM alert_meta FINAL WHERE name = 'watermark'
