-- Which of these alert ids are recorded already.
SELECT id FROM alerts WHERE id IN {ids:Array(String)}
