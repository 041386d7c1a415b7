-- One row per campaign: status, steps observed of the configured total, and when it last changed.
SELECT
    c.campaign_id,
    c.scheduler,
    c.status,
    coalesce((SELECT max(step) FROM scheduler_states s
              WHERE s.campaign_id = c.campaign_id AND s.phase = 'observed'), 0) AS step,
    CAST(json_extract(c.config, '$.steps') AS INTEGER) AS steps,
    json_extract_string(c.config, '$.template') AS template,
    c.status_reason,
    c.created_at,
    c.updated_at
FROM campaigns c
WHERE (? IS NULL OR c.campaign_id = ?)
ORDER BY c.created_at DESC, c.campaign_id
