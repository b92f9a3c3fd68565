-- Which derived generation each kept answer was computed at.
SELECT name, argMax(epoch, version) AS epoch, argMax(generation, version) AS generation
FROM {db:Identifier}.derived_answers
GROUP BY name
