-- Active tasks whose embedding is missing or was computed from other text.
SELECT count(*)
FROM tasks t
LEFT JOIN task_embeddings e USING (task_id)
WHERE t.active AND (e.text_hash IS NULL OR e.text_hash <> t.text_hash)
