-- Who holds the refill lock and how long ago it last marked it (no row: not marked yet).
SELECT host, pid, dateDiff('second', max(at), now()) AS age
FROM {own:Identifier}.otel_refilling
GROUP BY host, pid
ORDER BY age
LIMIT 1
