-- The scheduler's resumable state (its state_dict, pickled) after each transition of a campaign:
-- phase 'selected' = after choosing the batch of `step`; 'observed' = after folding in its rollouts.
-- Written in the same transaction as the rows it explains, so a crash resumes exactly.
CREATE TABLE scheduler_states (
    campaign_id   VARCHAR NOT NULL,
    step          INTEGER NOT NULL,
    phase         VARCHAR NOT NULL CHECK (phase IN ('selected', 'observed')),
    state         BLOB NOT NULL,
    created_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (campaign_id, step, phase)
);
