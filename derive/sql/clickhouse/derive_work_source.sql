-- What the query files of a derivation read as `events`: the rows of `source`.
CREATE OR REPLACE VIEW derive_work_events AS SELECT * FROM {source:Identifier}
