-- A kept answer's rows numbered as `answer_row`, their place in the order its query
-- gives them (`answer`: the query with its parameters written in, put in as a subquery
-- by derive/rename.py `inlined`), so the kept answer comes back in that order on every
-- engine.
SELECT row_number() OVER () AS answer_row, *
FROM answer
