-- Catalogue: environments, their tools, and tasks. Upserted by content hash; rows that vanish from
-- a source are kept (rollouts reference them) and marked active = false.
CREATE TABLE environments (
    env_id        VARCHAR PRIMARY KEY,
    source        VARCHAR NOT NULL,
    name          VARCHAR NOT NULL,
    description   VARCHAR,
    n_tools       INTEGER NOT NULL,
    metadata      JSON,
    content_hash  VARCHAR NOT NULL,
    active        BOOLEAN NOT NULL DEFAULT TRUE,
    loaded_at     TIMESTAMP NOT NULL
);

CREATE TABLE tools (
    env_id        VARCHAR NOT NULL,
    tool_name     VARCHAR NOT NULL,
    source        VARCHAR NOT NULL,
    effect        VARCHAR NOT NULL CHECK (effect IN ('read', 'write')),
    description   VARCHAR,
    parameters    JSON NOT NULL,
    content_hash  VARCHAR NOT NULL,
    active        BOOLEAN NOT NULL DEFAULT TRUE,
    loaded_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (env_id, tool_name)
);

CREATE TABLE tasks (
    task_id       VARCHAR PRIMARY KEY,
    env_id        VARCHAR NOT NULL,
    source        VARCHAR NOT NULL,
    split         VARCHAR NOT NULL,
    text          VARCHAR NOT NULL,
    user_turns    VARCHAR[] NOT NULL,
    tools         VARCHAR[] NOT NULL,     -- tools the gold solution uses
    tool_effects  VARCHAR[] NOT NULL,     -- effect of each entry of `tools`
    state_fields  VARCHAR[] NOT NULL,     -- state the task touches / the verifier checks
    turns         INTEGER NOT NULL,
    gold_calls    INTEGER NOT NULL,
    verifier      VARCHAR NOT NULL,
    gold          JSON NOT NULL,          -- list (turns) of lists of {name, arguments}
    metadata      JSON,
    text_hash     VARCHAR NOT NULL,       -- embeddings are recomputed only when this changes
    content_hash  VARCHAR NOT NULL,
    active        BOOLEAN NOT NULL DEFAULT TRUE,
    loaded_at     TIMESTAMP NOT NULL
);
