-- Campaigns, their scheduled batches, rollout results and what the scheduler derived from them.
CREATE TABLE campaigns (
    campaign_id   VARCHAR PRIMARY KEY,
    config        JSON NOT NULL,
    scheduler     VARCHAR NOT NULL,
    status        VARCHAR NOT NULL CHECK (status IN ('created', 'running', 'completed', 'failed', 'stopped')),
    status_reason VARCHAR,
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);

CREATE TABLE batches (
    campaign_id        VARCHAR NOT NULL,
    step               INTEGER NOT NULL,
    task_id            VARCHAR NOT NULL,
    env_id             VARCHAR NOT NULL,
    role               VARCHAR NOT NULL CHECK (role IN ('exploit', 'coverage', 'oversample')),
    predicted_variance DOUBLE,
    position           INTEGER NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    PRIMARY KEY (campaign_id, step, task_id)
);

-- One row per rollout, loaded exactly once from a landing file.
CREATE TABLE rollouts (
    campaign_id       VARCHAR NOT NULL,
    step              INTEGER NOT NULL,
    task_id           VARCHAR NOT NULL,
    rollout_idx       INTEGER NOT NULL,
    reward            DOUBLE NOT NULL CHECK (reward BETWEEN 0 AND 1),
    n_turns           INTEGER,
    n_tool_calls      INTEGER,
    tools_used        VARCHAR[],
    status            VARCHAR NOT NULL,
    error             VARCHAR,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    wall_time_s       DOUBLE,
    source_file       VARCHAR,
    PRIMARY KEY (campaign_id, step, task_id, rollout_idx)
);

CREATE TABLE ingested_files (
    path          VARCHAR NOT NULL,
    content_hash  VARCHAR NOT NULL,
    campaign_id   VARCHAR,
    step          INTEGER,
    status        VARCHAR NOT NULL CHECK (status IN ('loaded', 'quarantined')),
    reason        VARCHAR,
    n_rows        INTEGER NOT NULL DEFAULT 0,
    ingested_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (path, content_hash)
);

-- Discounted per-task statistics (DESIGN.md "Own history") as of `step`.
CREATE TABLE task_stats (
    campaign_id   VARCHAR NOT NULL,
    task_id       VARCHAR NOT NULL,
    step          INTEGER NOT NULL,
    n             DOUBLE NOT NULL,   -- discounted visit weight
    m             DOUBLE NOT NULL,   -- discounted mean observed variance
    mu            DOUBLE NOT NULL,   -- discounted mean reward
    trend         DOUBLE,            -- recent change of the task's mean reward
    last_step     INTEGER NOT NULL,
    PRIMARY KEY (campaign_id, task_id)
);

CREATE TABLE predictions (
    campaign_id        VARCHAR NOT NULL,
    step               INTEGER NOT NULL,   -- predictions made after ingesting this step
    task_id            VARCHAR NOT NULL,
    predicted_variance DOUBLE NOT NULL,
    uncertainty        DOUBLE NOT NULL,
    own_estimate       DOUBLE,           -- the task's own history term
    within_estimate    DOUBLE,           -- propagated over within-environment edges
    cross_estimate     DOUBLE,           -- propagated over cross-environment edges
    PRIMARY KEY (campaign_id, step, task_id)
);

CREATE TABLE checkpoints (
    campaign_id   VARCHAR NOT NULL,
    step          INTEGER NOT NULL,
    uri           VARCHAR NOT NULL,
    mlflow_run_id VARCHAR,
    created_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (campaign_id, step)
);

-- Namespaced metrics (rollout/..., schedule/..., train/..., eval/...), the same names as in MLflow.
CREATE TABLE step_metrics (
    campaign_id   VARCHAR NOT NULL,
    step          INTEGER NOT NULL,
    name          VARCHAR NOT NULL,
    value         DOUBLE,
    PRIMARY KEY (campaign_id, step, name)
);
