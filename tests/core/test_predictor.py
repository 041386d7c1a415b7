import numpy as np
import pytest
import scipy.sparse as sp
from task_frames import group, make_tasks

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog, TaskStats, VariancePredictor
from envsched_core.graph import propagation_matrix
from envsched_core.predictor import Components


def chain_predictor(cfg: SchedulerConfig) -> VariancePredictor:
    """Four tasks: 0 -W- 1 (same environment), 2 -X- 3 (across), nothing else."""
    W = propagation_matrix(np.array([0, 1]), np.array([1, 0]), np.array([0.9, 0.9]), 4, cfg.temperature)
    X = propagation_matrix(np.array([2, 3]), np.array([3, 2]), np.array([0.8, 0.8]), 4, cfg.temperature)
    return VariancePredictor(cfg, W, X)


def test_predictor_fusion_matches_hand_computation():
    cfg = SchedulerConfig()
    predictor = chain_predictor(cfg)
    stats = TaskStats(4, gamma=0.8, prior_variance=0.05)
    stats.update(np.array([0, 3]), 1, np.array([0.2, 0.1]), np.array([0.5, 0.3]))  # v_0 = 0.15
    frame = predictor.predict_frame(stats, 1, np.array(["a", "b", "c", "d"]))
    v = frame["predicted_variance"].to_numpy()
    assert v[0] == pytest.approx((1 * 0.2 + 0.15) / (1 + 1))  # own history only
    assert v[1] == pytest.approx((0.5 * 1 * 0.2 + 0.15) / (0.5 * 1 + 1))  # one within neighbour, N_W = 1
    assert v[2] == pytest.approx((0.25 * 1 * 0.1 + 0.15) / (0.25 * 1 + 1))  # one cross neighbour
    assert frame["uncertainty"].iloc[1] == pytest.approx(2**-0.5)
    assert frame["within"].iloc[1] == pytest.approx(0.2) and np.isnan(frame["cross"].iloc[1])
    assert np.isnan(frame["own"].iloc[1]) and frame["own"].iloc[0] == pytest.approx(0.2)


def test_predictor_moves_prediction_toward_observed_neighbours_only():
    tasks = make_tasks(n_envs=3, per_env=6)
    catalog = TaskCatalog.from_frame(tasks)
    cfg = SchedulerConfig(batch_size=4, use_cross_edges=False, predictor="variance")  # the paper's fusion
    sched = EnvSched(catalog, cfg, seed=0)
    sched.observe(
        group("e0-t0", 1, [1, 0, 1, 0, 1, 0, 1, 0])
    )  # variance 0.25 against prior 0.05 -> v_0 = 0.25
    sched.observe(group("e1-t0", 1, [0] * 8))  # variance 0 -> v_0 = 0.125
    pred = sched.predict().set_index("task_id")
    v0 = sched.stats.v0()
    within_e0 = pred.loc[[f"e0-t{j}" for j in range(1, 6)], "predicted_variance"]
    within_e1 = pred.loc[[f"e1-t{j}" for j in range(1, 6)], "predicted_variance"]
    unrelated = pred.loc[[f"e2-t{j}" for j in range(6)], "predicted_variance"]
    assert (within_e0 > v0).all()  # pulled up toward the high-variance neighbour
    assert (within_e1 < v0).all()  # pulled down toward the zero-variance neighbour
    np.testing.assert_allclose(unrelated, v0)  # no edge, no evidence: the prior
    assert pred.loc["e2-t0", "uncertainty"] == 1.0


def test_predictor_refit_kicks_in_after_200_pairs():
    cfg = SchedulerConfig()
    predictor = chain_predictor(cfg)
    rng = np.random.default_rng(0)

    def pairs(k):  # within evidence predicts y exactly, cross evidence is noise
        y = rng.uniform(0, 0.25, k)
        return Components(
            np.zeros(k), np.zeros(k), np.ones(k), y, np.ones(k), rng.uniform(0, 0.25, k), 0.05
        ), y

    predictor.record(*pairs(199))
    assert not predictor.refit() and (predictor.a_W, predictor.a_X) == (0.5, 0.25)
    predictor.record(*pairs(1))
    assert predictor.refit() and predictor.n_refits == 1
    assert predictor.a_W > 0.5 and predictor.a_X < 0.25


def test_predictor_without_relations_uses_own_history_and_prior():
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0)
    predictor = VariancePredictor(cfg, sp.identity(2, format="csr"), sp.identity(2, format="csr"))
    stats = TaskStats(2)
    stats.update(np.array([0]), 1, np.array([0.2]), np.array([0.5]))
    c = predictor.components(stats, 1)
    assert c.N_W.sum() == 0 and c.N_X.sum() == 0
