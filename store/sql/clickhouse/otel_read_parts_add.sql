-- Record the parts a chunk of a read has added to `events`.
INSERT INTO {own:Identifier}.otel_read_parts (table, name)
SELECT tupleElement(part, 1), tupleElement(part, 2)
FROM (SELECT arrayJoin(arrayZip({tables:Array(String)}, {names:Array(String)})) AS part)
