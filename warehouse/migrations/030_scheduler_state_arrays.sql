-- Scheduler state as typed arrays (issue 14). `scheduler_states.state` now holds a manifest: the
-- state_dict's tree as JSON text whose array leaves name a digest in this table. An array is stored once
-- per digest, so what does not change between steps (candidate lists, patterns) is not written again.
-- A state saved before this migration is a pickle (first byte 0x80) and still loads.
CREATE TABLE scheduler_state_arrays (
    digest        VARCHAR PRIMARY KEY,   -- blake2b of dtype, shape and bytes
    dtype         VARCHAR NOT NULL,      -- numpy dtype string ('<f8', '<i8', ...) or 'pickle'
    shape         BIGINT[] NOT NULL,
    data          BLOB NOT NULL,
    created_at    TIMESTAMP NOT NULL
);
