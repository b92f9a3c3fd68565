-- Move the watermark on (a new row version).
INSERT INTO alert_meta SELECT 'watermark', {value:String}, {version:UInt64}
