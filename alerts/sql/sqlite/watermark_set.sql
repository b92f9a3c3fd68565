-- Move the watermark on (one row, replaced).
INSERT INTO meta (name, value) VALUES ('watermark', :value)
ON CONFLICT (name) DO UPDATE SET value = excluded.value
