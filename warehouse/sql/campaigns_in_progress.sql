-- Campaigns the daemon still advances (created or running), with how far each has got.
SELECT
    c.campaign_id,
    c.config,
    c.status,
    c.updated_at,
    coalesce((SELECT max(step) FROM batches b WHERE b.campaign_id = c.campaign_id), 0) AS scheduled,
    coalesce((SELECT max(step) FROM ingested_files f
              WHERE f.campaign_id = c.campaign_id AND f.status = 'loaded'), 0) AS loaded,
    coalesce((SELECT max(step) FROM scheduler_states s
              WHERE s.campaign_id = c.campaign_id AND s.phase = 'observed'), 0) AS observed
FROM campaigns c
WHERE c.status IN ('created', 'running')
ORDER BY c.created_at, c.campaign_id
