-- A delivery's current state, as a new row version.
INSERT INTO alert_outbox
SELECT
    {alert_id:String},
    {sink:String},
    {status:String},
    {attempts:UInt32},
    {next_attempt_at:DateTime64(6, 'UTC')},
    {last_error:Nullable(String)},
    {updated_at:DateTime64(6, 'UTC')},
    {document:String},
    {version:UInt64}
