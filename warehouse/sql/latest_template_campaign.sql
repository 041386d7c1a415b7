-- The newest campaign of a template (other than the one starting) that has a checkpoint.
SELECT c.campaign_id
FROM campaigns c
WHERE json_extract_string(c.config, '$.template') = ?
  AND c.campaign_id <> ?
  AND EXISTS (SELECT 1 FROM checkpoints k WHERE k.campaign_id = c.campaign_id)
ORDER BY c.created_at DESC, c.campaign_id DESC
LIMIT 1
