-- The lock incidents a batch keeps of those derived over the holders it reached
-- (`lock_incidents`: derive_lock_incidents.sql over them, put in as a subquery by
-- derive/rename.py `inlined`): those of the holders listed in `holders`, the executions
-- whose incidents it derives again. The other holders are read only as what those
-- incidents are made of; their own incidents stay as kept.
SELECT *
FROM lock_incidents
WHERE execution_uid IN (SELECT unit FROM {holders:Identifier})
