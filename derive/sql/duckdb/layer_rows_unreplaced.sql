-- A layer's rows of a derived table that no later layer replaces: those whose unit
-- (`unit`) is in none of the later layers' units files. `layer_rows` stands for the
-- layer's rows file and `replaced_units` for the later layers' units files, each a
-- read_parquet of its paths (derive/embedded/state.py `layered_select`): the table is
-- attached as a view over its files, and a view holds no parameters.
SELECT r.*
FROM layer_rows AS r
ANTI JOIN replaced_units AS u ON r.{unit:Identifier} = u.unit
