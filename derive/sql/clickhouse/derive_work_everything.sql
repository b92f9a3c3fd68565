-- A build from nothing reads every event once.
CREATE OR REPLACE VIEW derive_work_everything AS SELECT * FROM events FINAL
