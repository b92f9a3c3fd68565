-- Record an alert (after its outbox rows).
INSERT INTO alerts
SELECT
    {id:String},
    {rule:String},
    {severity:String},
    {key:Nullable(String)},
    {job_type:Nullable(String)},
    {incident_ts:Nullable(DateTime64(6, 'UTC'))},
    {detected_at:DateTime64(6, 'UTC')},
    {document:String}
