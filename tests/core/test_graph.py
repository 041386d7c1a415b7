import numpy as np
import pytest
from task_frames import make_tasks

from envsched_core import SchedulerConfig, TaskCatalog, build_cross_edges, build_within_edges
from envsched_core.graph import (
    build_cross_candidates,
    candidate_matrix,
    cross_candidates,
    cross_signature,
    propagation_matrix,
    rank_cross_edges,
    rows_to_rerank,
    top_k_per_source,
)


def test_within_edges_stay_inside_environment_with_k_per_task():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=4, per_env=10))
    edges = build_within_edges(catalog, SchedulerConfig(k_within=3))
    env = dict(zip(catalog.task_ids, catalog.env, strict=True))
    assert (edges["src"] != edges["dst"]).all()
    assert all(env[s] == env[d] for s, d in zip(edges["src"], edges["dst"], strict=True))
    assert edges.groupby("src").size().eq(3).all() and edges["src"].nunique() == 40


def test_within_edges_rank_by_tool_overlap_when_text_is_equal():
    tasks = make_tasks(n_envs=1, per_env=4)
    tasks["embedding"] = [np.ones(8)] * 4
    tasks["tools"] = [["a", "b"], ["a", "b"], ["c"], ["d"]]
    tasks["state_fields"] = [[]] * 4
    edges = build_within_edges(TaskCatalog.from_frame(tasks), SchedulerConfig(k_within=1))
    best = dict(zip(edges["src"], edges["dst"], strict=True))
    assert best["e0-t0"] == "e0-t1" and best["e0-t1"] == "e0-t0"
    top = edges.set_index("src").loc["e0-t0", "similarity"]
    assert top == pytest.approx(0.5 * 1.0 + 0.3 * 1.0 + 0.2 * 0.0)


@pytest.mark.slow
def test_within_edges_pynndescent_path_finds_the_exact_neighbours_of_clear_clusters():
    rng = np.random.default_rng(0)
    tasks = make_tasks(n_envs=1, per_env=60)
    centres = rng.normal(size=(6, 8))
    tasks["embedding"] = [centres[j % 6] + 0.01 * rng.normal(size=8) for j in range(60)]
    catalog = TaskCatalog.from_frame(tasks)
    approx = build_within_edges(catalog, SchedulerConfig(k_within=3, exact_knn_max=10))
    cluster = {t: j % 6 for j, t in enumerate(tasks["task_id"])}
    assert len(approx) == 180
    assert all(cluster[s] == cluster[d] for s, d in zip(approx["src"], approx["dst"], strict=True))


def test_cross_edges_only_link_other_environments():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=5, per_env=8))
    edges = build_cross_edges(catalog, None, SchedulerConfig(k_cross=4))
    env = dict(zip(catalog.task_ids, catalog.env, strict=True))
    assert len(edges) == 40 * 4
    assert all(env[s] != env[d] for s, d in zip(edges["src"], edges["dst"], strict=True))


def test_cross_candidates_have_no_duplicate_pairs_when_signatures_repeat():
    tasks = make_tasks(n_envs=3, per_env=10)
    tasks["tools"] = [["a"]] * len(tasks)  # few distinct signatures: neighbour lists need padding
    tasks["tool_effects"] = [["read"]] * len(tasks)
    tasks["turns"], tasks["gold_calls"], tasks["verifier"] = (
        [1 + j % 3 for j in range(len(tasks))],
        1,
        "state_match",
    )
    candidates = build_cross_candidates(TaskCatalog.from_frame(tasks), SchedulerConfig(k_cross=8))
    assert len(candidates) > 0
    assert not candidates.duplicated(["src", "dst"]).any()


def test_cross_edges_link_tasks_with_matching_signature():
    tasks = make_tasks(n_envs=2, per_env=4)
    tasks["tool_effects"] = [["read"], ["write", "delete", "write"]] * 4
    tasks["turns"] = [1, 7] * 4
    edges = build_cross_edges(TaskCatalog.from_frame(tasks), None, SchedulerConfig(k_cross=1))
    kind = {t: j % 2 for j, t in enumerate(tasks["task_id"])}
    assert all(kind[s] == kind[d] for s, d in zip(edges["src"], edges["dst"], strict=True))


def test_propagation_matrix_rows_are_softmax_of_similarity_over_temperature():
    W = propagation_matrix(np.array([0, 0, 1]), np.array([1, 2, 0]), np.array([0.9, 0.8, 0.5]), 3, 0.1)
    expected = np.exp(0.9 / 0.1) / (np.exp(0.9 / 0.1) + np.exp(0.8 / 0.1))
    assert W[0, 1] == pytest.approx(expected)
    np.testing.assert_allclose(np.asarray(W.sum(axis=1)).ravel(), [1.0, 1.0, 0.0])


def test_top_k_per_source_keeps_best_distinct_destinations():
    src, dst, sim = top_k_per_source(
        np.array([0, 0, 0, 0, 1]), np.array([1, 1, 2, 3, 0]), np.array([0.2, 0.9, 0.5, 0.1, 0.3]), 2
    )
    assert list(zip(src, dst, strict=True)) == [(0, 1), (0, 2), (1, 0)]
    np.testing.assert_allclose(sim, [0.9, 0.5, 0.3])


def test_edge_changes_finds_new_changed_and_gone_pairs():
    from envsched_core.graph import edge_changes

    old = (np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([0.5, 0.4, 0.3]))
    new = (np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([0.5, 0.35, 0.2]))
    changed, gone_src, gone_dst = edge_changes(old, new, n_tasks=3)
    assert changed.tolist() == [1, 2]  # (1, 2) re-weighted, (2, 0) new; (0, 1) unchanged
    assert list(zip(gone_src.tolist(), gone_dst.tolist(), strict=True)) == [(0, 2)]


def test_rows_to_rerank_are_changed_rows_and_sources_with_a_changed_candidate():
    candidates = np.array([[1, 2], [0, -1], [3, -1], [0, 1]])
    old = np.eye(4, dtype=np.float32)
    new = old.copy()
    assert len(rows_to_rerank(candidates, old, new)) == 0  # nothing changed: nothing to re-rank
    new[2, 0] = 0.5  # task 2's signature moves: itself and task 0 (its candidate list has 2)
    assert list(rows_to_rerank(candidates, old, new)) == [0, 2]


def test_rank_cross_edges_of_some_rows_equal_those_rows_of_a_full_rank():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=5, per_env=8))
    cfg = SchedulerConfig(k_cross=3)
    signature = cross_signature(catalog, cfg)
    candidates = candidate_matrix(*cross_candidates(catalog, cfg, signature), len(catalog))
    full = rank_cross_edges(candidates, signature, 3)
    rows = np.array([1, 7, 30])
    part = rank_cross_edges(candidates, signature, 3, rows)
    keep = np.isin(full[0], rows)
    for whole, some in zip(full, part, strict=True):
        np.testing.assert_array_equal(whole[keep], some)
