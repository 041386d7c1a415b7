import numpy as np
import pytest
from task_frames import make_tasks

from envsched_core import SchedulerConfig, TaskCatalog, build_within_edges


def test_catalog_from_frame_normalises_embeddings_and_indexes_tasks():
    tasks = make_tasks(n_envs=3, per_env=4)
    catalog = TaskCatalog.from_frame(tasks)
    assert len(catalog) == 12 and catalog.n_envs == 3
    np.testing.assert_allclose(np.linalg.norm(catalog.embeddings, axis=1), 1.0, rtol=1e-5)
    assert list(catalog.indices_of(["e2-t3", "e0-t0"])) == [11, 0]
    assert list(catalog.tools.getnnz(axis=1)) == [len(set(t)) for t in tasks["tools"]]
    assert set(catalog.tool_names[catalog.tools[5].indices]) == set(tasks["tools"][5])


@pytest.mark.parametrize("column", ["task_id", "env_id", "text", "tools"])
def test_catalog_missing_column_raises_naming_it(column):
    with pytest.raises(ValueError, match=f"missing column.*'{column}'"):
        TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=3).drop(columns=column))


def test_catalog_duplicate_task_id_raises():
    tasks = make_tasks(n_envs=2, per_env=3)
    tasks.loc[1, "task_id"] = tasks.loc[0, "task_id"]
    with pytest.raises(ValueError, match="duplicate task_id.*e0-t0"):
        TaskCatalog.from_frame(tasks)


def test_catalog_unknown_task_id_raises_naming_it():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=3))
    with pytest.raises(ValueError, match="nope"):
        catalog.indices_of(["e0-t0", "nope"])


def test_catalog_signature_separates_short_reads_from_long_writes():
    tasks = make_tasks(n_envs=2, per_env=4)
    tasks["tool_effects"] = [["read"]] * 4 + [["write", "write", "delete"]] * 4
    tasks["turns"] = [1] * 4 + [6] * 4
    signature = TaskCatalog.from_frame(tasks).signature
    same = signature[0] @ signature[1]
    different = signature[0] @ signature[5]
    assert same > different


def test_within_edges_use_shipped_model_without_embedding_column():
    """Loads the shipped sentence-transformers model offline; the only test that does."""
    texts = [
        "Book a flight from Paris to Rome for tomorrow morning.",
        "Reserve an airline ticket from Berlin to Madrid next week.",
        "Find a plane seat from London to Lisbon on Friday.",
        "Delete the temporary files in the downloads directory.",
        "Remove all log files from the var folder.",
        "Erase the cache directory and its files.",
    ]
    tasks = make_tasks(n_envs=1, per_env=6).drop(columns="embedding")
    tasks["text"] = texts
    tasks["tools"] = [["shared.tool"]] * 6  # equal tool and state overlap: the embedding decides
    tasks["state_fields"] = [["f"]] * 6
    catalog = TaskCatalog.from_frame(tasks)
    assert catalog.embeddings.shape == (6, 384)
    edges = build_within_edges(catalog, SchedulerConfig(k_within=2))
    topic = {t: i // 3 for i, t in enumerate(tasks["task_id"])}
    assert len(edges) == 12
    assert all(topic[s] == topic[d] for s, d in zip(edges["src"], edges["dst"], strict=True))
