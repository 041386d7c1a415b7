-- One transition's scheduler state: `state` is the manifest (JSON text; its arrays are in
-- scheduler_state_arrays), a few kB however large the catalogue.
INSERT INTO scheduler_states (campaign_id, step, phase, state, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (campaign_id, step, phase) DO UPDATE SET state = excluded.state, created_at = excluded.created_at
