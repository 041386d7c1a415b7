-- Views with verifier kinds, for catalogues that mix sources (BFCL, tau-bench, ACEBench, synthetic).
CREATE OR REPLACE VIEW source_summary AS
SELECT e.source,
       count(DISTINCT e.env_id)                                                                AS environments,
       (SELECT count(*) FROM tasks t WHERE t.source = e.source AND t.active)                   AS tasks,
       (SELECT count(*) FROM tools o WHERE o.source = e.source AND o.active)                   AS tools,
       (SELECT count(DISTINCT o.tool_name) FROM tools o WHERE o.source = e.source AND o.active) AS distinct_tool_names,
       (SELECT string_agg(DISTINCT t.verifier, ', ' ORDER BY t.verifier) FROM tasks t
         WHERE t.source = e.source AND t.active)                                               AS verifiers
FROM environments e
WHERE e.active
GROUP BY e.source;

CREATE OR REPLACE VIEW environment_summary AS
SELECT e.source, e.env_id, e.n_tools,
       count(t.task_id)                                                  AS tasks,
       coalesce(sum(t.gold_calls), 0)                                    AS gold_calls,
       round(avg(t.turns), 2)                                            AS mean_turns,
       (SELECT count(*) FROM tools o WHERE o.env_id = e.env_id AND o.effect = 'write' AND o.active) AS write_tools,
       string_agg(DISTINCT t.verifier, ', ' ORDER BY t.verifier)         AS verifiers,
       string_agg(DISTINCT t.split, ', ' ORDER BY t.split)               AS splits
FROM environments e
LEFT JOIN tasks t ON t.env_id = e.env_id AND t.active
WHERE e.active
GROUP BY e.source, e.env_id, e.n_tools;

-- Tasks per source, split and verifier kind.
CREATE OR REPLACE VIEW task_summary AS
SELECT source, split, verifier, count(*) AS tasks, round(avg(gold_calls), 2) AS mean_gold_calls,
       round(avg(turns), 2) AS mean_turns, count(DISTINCT env_id) AS environments
FROM tasks
WHERE active
GROUP BY source, split, verifier;
