-- Fold one step into a campaign's task_stats: the tasks it observed get their new rows, every row is
-- stamped with the step it is now valid for (n is stored as of last_step and decays on read).
INSERT INTO task_stats (campaign_id, task_id, step, n, m, mu, trend, last_step)
SELECT campaign_id, task_id, step, n, m, mu, trend, last_step FROM _task_stats_rows
ON CONFLICT (campaign_id, task_id) DO UPDATE SET
    step = excluded.step, n = excluded.n, m = excluded.m, mu = excluded.mu, trend = excluded.trend,
    last_step = excluded.last_step
