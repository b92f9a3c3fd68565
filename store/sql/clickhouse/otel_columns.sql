-- The columns of the exporter's tables, to tell their layout (Map or JSON attributes).
SELECT table, name, type
FROM system.columns
WHERE database = {database:String} AND table IN {tables:Array(String)}
