-- Views for SQL users.
CREATE OR REPLACE VIEW source_summary AS
SELECT e.source,
       count(DISTINCT e.env_id)                                           AS environments,
       (SELECT count(*) FROM tasks t WHERE t.source = e.source AND t.active) AS tasks,
       (SELECT count(*) FROM tools o WHERE o.source = e.source AND o.active) AS tools,
       (SELECT count(DISTINCT o.tool_name) FROM tools o WHERE o.source = e.source AND o.active) AS distinct_tool_names
FROM environments e
WHERE e.active
GROUP BY e.source;

CREATE OR REPLACE VIEW environment_summary AS
SELECT e.source, e.env_id, e.n_tools,
       count(t.task_id)                          AS tasks,
       coalesce(sum(t.gold_calls), 0)            AS gold_calls,
       round(avg(t.turns), 2)                    AS mean_turns,
       (SELECT count(*) FROM tools o WHERE o.env_id = e.env_id AND o.effect = 'write') AS write_tools
FROM environments e
LEFT JOIN tasks t ON t.env_id = e.env_id AND t.active
WHERE e.active
GROUP BY e.source, e.env_id, e.n_tools;

-- One row per (task, tool it needs), joined to the tool's effect.
CREATE OR REPLACE VIEW task_tools AS
WITH needed AS (
    SELECT task_id, env_id, source, unnest(tools) AS tool_name FROM tasks WHERE active
)
SELECT n.task_id, n.env_id, n.source, n.tool_name, o.effect
FROM needed n
LEFT JOIN tools o ON o.env_id = n.env_id AND o.tool_name = n.tool_name;

-- Per campaign and step: rollouts, mean reward and the share of zero-variance groups.
CREATE OR REPLACE VIEW campaign_steps AS
WITH groups AS (
    SELECT campaign_id, step, task_id, avg(reward) AS mean_reward, var_pop(reward) AS reward_variance
    FROM rollouts GROUP BY campaign_id, step, task_id
)
SELECT campaign_id, step, count(*) AS tasks, avg(mean_reward) AS mean_reward,
       avg(reward_variance) AS mean_group_variance,
       avg(CASE WHEN reward_variance = 0 THEN 1 ELSE 0 END) AS zero_variance_share
FROM groups GROUP BY campaign_id, step;
