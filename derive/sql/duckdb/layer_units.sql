-- Every unit of a derived table some layers replace, once: what a fold of those layers
-- replaces. `replaced_units` stands for their units files, a read_parquet of their paths
-- (derive/embedded/state.py `units_select`).
SELECT DISTINCT unit
FROM replaced_units
