-- A kept answer (answer_<query>, built with the derived tables), in its query's own order.
SELECT * FROM {table:Identifier} ORDER BY answer_row
