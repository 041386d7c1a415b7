-- Dynamic sampling in the pipeline (DAPO, GRESO): a training step rolls out its batch, observes it and
-- refills until the scheduler's rule stops. The refill rounds are rows of `batches` with round >= 1
-- (round 0 = the batch `scheduled_batch` chose), and the scheduler state after the last round is
-- phase 'refilled' (it has observed every round; `variance_predictions` continues from it).
ALTER TABLE batches ADD COLUMN round INTEGER DEFAULT 0;

CREATE TABLE scheduler_states_refill (
    campaign_id   VARCHAR NOT NULL,
    step          INTEGER NOT NULL,
    phase         VARCHAR NOT NULL CHECK (phase IN ('selected', 'refilled', 'observed')),
    state         BLOB NOT NULL,
    created_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (campaign_id, step, phase)
);
INSERT INTO scheduler_states_refill SELECT campaign_id, step, phase, state, created_at FROM scheduler_states;
DROP TABLE scheduler_states;
ALTER TABLE scheduler_states_refill RENAME TO scheduler_states;
