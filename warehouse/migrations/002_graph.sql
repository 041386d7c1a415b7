-- Task embeddings and the two relation graphs of the variance predictor.
CREATE TABLE task_embeddings (
    task_id       VARCHAR PRIMARY KEY,
    model_name    VARCHAR NOT NULL,
    dim           INTEGER NOT NULL,
    text_hash     VARCHAR NOT NULL,
    embedding     FLOAT[] NOT NULL,
    computed_at   TIMESTAMP NOT NULL
);

-- Within-environment kNN edges (a rebuild replaces all rows; graph_version says which build).
CREATE TABLE edges_within (
    src           VARCHAR NOT NULL,
    dst           VARCHAR NOT NULL,
    similarity    DOUBLE NOT NULL,
    graph_version VARCHAR NOT NULL,
    PRIMARY KEY (src, dst)
);

-- Cross-environment kNN edges over the execution / reward-topology signature. The signature
-- includes observed rewards, so edges are per campaign ('' = before any rollouts).
CREATE TABLE edges_cross (
    campaign_id   VARCHAR NOT NULL DEFAULT '',
    src           VARCHAR NOT NULL,
    dst           VARCHAR NOT NULL,
    similarity    DOUBLE NOT NULL,
    graph_version VARCHAR NOT NULL,
    PRIMARY KEY (campaign_id, src, dst)
);
