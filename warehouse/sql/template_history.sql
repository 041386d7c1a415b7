-- Rollouts of a template's campaigns created up to the given one, oldest campaign first: the history
-- a continuing campaign warm-starts its scheduler from.
SELECT r.campaign_id, r.step, r.task_id, r.reward, c.created_at
FROM rollouts r
JOIN campaigns c USING (campaign_id)
WHERE json_extract_string(c.config, '$.template') = ?
  AND c.created_at <= (SELECT created_at FROM campaigns WHERE campaign_id = ?)
ORDER BY c.created_at, r.campaign_id, r.step, r.task_id, r.rollout_idx
