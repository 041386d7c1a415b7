-- What the graphs are built from: every active task (its content) with its embedding. Equal values mean
-- an unchanged catalogue, so build_graph can keep the stored edges.
SELECT count(*) || ':' || coalesce(sum(hash(t.task_id, t.content_hash, e.text_hash, e.model_name, e.computed_at)), 0)
FROM tasks t JOIN task_embeddings e USING (task_id)
WHERE t.active
