-- The landing contract's int64 counts are BIGINT here (an INTEGER column rejected 2**40 turns at insert,
-- after validation had passed).
ALTER TABLE rollouts ALTER COLUMN n_turns TYPE BIGINT;
ALTER TABLE rollouts ALTER COLUMN n_tool_calls TYPE BIGINT;
ALTER TABLE rollouts ALTER COLUMN prompt_tokens TYPE BIGINT;
ALTER TABLE rollouts ALTER COLUMN completion_tokens TYPE BIGINT;

-- The ingestion ledger is keyed by the path relative to the data folder (landing/<campaign>/step=<t>/<file>),
-- so moving the data folder (ENVSCHED_HOME) re-ingests nothing. Absolute paths recorded before are cut there.
UPDATE ingested_files
SET path = regexp_extract(path, '(landing/[^/]+/step=[0-9]+/[^/]+)$', 1)
WHERE path LIKE '/%' AND regexp_matches(path, '(^|/)landing/[^/]+/step=[0-9]+/[^/]+$');

UPDATE rollouts
SET source_file = regexp_extract(source_file, '(landing/[^/]+/step=[0-9]+/[^/]+)$', 1)
WHERE source_file LIKE '/%' AND regexp_matches(source_file, '(^|/)landing/[^/]+/step=[0-9]+/[^/]+$');
