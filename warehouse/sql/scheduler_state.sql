-- One saved scheduler state (its manifest, or a pickle saved before migration 030): campaign_id, step, phase.
SELECT state FROM scheduler_states WHERE campaign_id = ? AND step = ? AND phase = ?
