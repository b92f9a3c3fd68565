-- The parts this refresh reads.
INSERT INTO {own:Identifier}.{parts:Identifier} (part)
SELECT arrayJoin({names:Array(String)})
