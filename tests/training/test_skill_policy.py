"""The skill policy in the real BFCL environment: real calls, the verifier's reward, GRPO learning, resume."""

import numpy as np
import pandas as pd
import pytest
import torch

from environments.base import CallRecord, Trajectory, TurnRecord
from training.engines.skill import SkillEngine
from training.executors import built_worker
from training.policies.skill import (
    MISTAKES,
    RIGHT,
    Episode,
    SkillConfig,
    SkillPolicy,
    SkillWorkerSpec,
    neighbour_arguments,
    rollout_seed,
)

BFCL = "bfcl_v3_multi_turn"
SPEC = SkillWorkerSpec(sources=(BFCL,))


@pytest.fixture(scope="module")
def actor():
    return built_worker(SPEC)


@pytest.fixture(scope="module")
def world(actor):
    return actor.world


def _task_ids(world, split="base"):
    return [t for t in world.resolver.task_ids() if world.resolver.task(t).split == split]


def _frame(world, task_ids):
    return pd.DataFrame(
        {"task_id": task_ids, "env_id": [world.resolver.task(t).env_id for t in task_ids], "source": BFCL}
    )


def _rollout(actor, theta, task_id, seed, keep=True):
    task = actor.world.resolver.task(task_id)
    env = actor.world.resolver.environment(task_id)
    rng = np.random.default_rng(np.random.SeedSequence(list(rollout_seed(seed, 0, 1, task_id, 0))))
    return actor.act(task, env, theta, rng, keep_trajectory=keep)


def test_skill_policy_reward_is_the_verifiers_on_real_calls(actor, world):
    task_ids = _task_ids(world)[:12]
    policy = SkillPolicy(
        world, SkillConfig(), world.initial_theta(SkillConfig(initial_success=0.3), 0, task_ids)
    )
    rewards, kinds = [], set()
    for task_id in task_ids:
        for seed in range(4):
            episode = _rollout(actor, policy.theta, task_id, seed)
            task = world.resolver.task(task_id)
            # Replaying the recorded calls on a fresh environment gives the same results: they were real.
            fresh = world.resolver.environment(task_id)
            fresh.reset(task)
            replayed = Trajectory(task_id)
            for turn in episode.trajectory.turns:
                replayed.turns.append(
                    TurnRecord(
                        [CallRecord(r.call, fresh.call(r.call.name, r.call.arguments)) for r in turn.calls]
                    )
                )
                for original, again in zip(turn.calls, replayed.turns[-1].calls, strict=True):
                    assert original.result == again.result
            judge = world.resolver.environment(task_id)
            judge.reset(task)
            verdict = judge.verify(episode.trajectory)
            assert episode.reward == verdict.reward and episode.reason == verdict.reason[:300]
            assert episode.n_tool_calls == sum(len(t.calls) for t in episode.trajectory.turns)
            assert len(episode.trajectory.turns) == len(task.gold)
            rewards.append(episode.reward)
            kinds.update(int(k) for k in episode.kinds)
    assert 0.0 < np.mean(rewards) < 1.0  # both verdicts occur
    assert {RIGHT, MISTAKES.index("skip"), MISTAKES.index("perturb_arg")} <= kinds


def test_skill_policy_all_right_passes_and_all_wrong_fails(actor, world):
    task_ids = _task_ids(world)[:10]
    always = np.zeros(world.n_params)
    always[0] = 60.0
    assert all(_rollout(actor, always, t, 0).reward == 1.0 for t in task_ids)  # the gold solution, for real
    never = -always
    episodes = [_rollout(actor, never, t, 0) for t in task_ids]
    assert all(e.reward == 0.0 and (e.kinds != RIGHT).all() for e in episodes)


def test_skill_policy_same_seed_same_episode_and_different_seed_differs(actor, world):
    task_id = _task_ids(world)[3]
    theta = world.initial_theta(SkillConfig(initial_success=0.3), 0, [task_id])
    a, b = _rollout(actor, theta, task_id, 5, keep=False), _rollout(actor, theta, task_id, 5, keep=False)
    assert (a.reward, a.reason, a.tools_used) == (b.reward, b.reason, b.tools_used)
    np.testing.assert_array_equal(a.kinds, b.kinds)
    others = [_rollout(actor, theta, task_id, s, keep=False).kinds.tolist() for s in range(6, 12)]
    assert any(k != a.kinds.tolist() for k in others)


def test_skill_policy_neighbour_arguments_by_name_then_type_then_default():
    from environments.base import ToolCall, ToolSpec

    spec = ToolSpec(
        "cp",
        "copy",
        {
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "destination": {"type": "string"},
                "n": {"type": "integer"},
            },
            "required": ["source", "destination", "n"],
        },
        "write",
    )
    gold = ToolCall("mv", {"source": "a.txt", "target": "dir"})
    assert neighbour_arguments(spec, gold) == {"source": "a.txt", "destination": "dir", "n": 1}


def _episode(task_id, idx, reward, decisions, kinds):
    return Episode(task_id, idx, reward, "", 1, 0, [], np.array(decisions), np.array(kinds, dtype=np.int8))


def test_skill_policy_update_equals_torch_autograd_sgd_with_momentum(world):
    """Two GRPO steps by hand-built episodes: theta equals torch.optim.SGD on the written-out loss."""
    task_a, task_b = _task_ids(world)[:2]
    config = SkillConfig(lr=0.5, momentum=0.9, learn_bias=True)
    theta0 = world.initial_theta(config, 0, [task_a, task_b])
    policy = SkillPolicy(world, config, theta0)
    skip = MISTAKES.index("skip")
    groups = [
        [  # a mixed group of task a: rollout 0 passes (all right), 1 fails at step 1, 2 fails at step 0
            _episode(task_a, 0, 1.0, [0, 1, 2], [RIGHT, RIGHT, RIGHT]),
            _episode(task_a, 1, 0.0, [0, 1, 2], [RIGHT, skip, RIGHT]),
            _episode(task_a, 2, 0.0, [0], [MISTAKES.index("stop_turn")]),
        ],
        [  # a zero-variance group: no signal
            _episode(task_b, 0, 0.0, [0], [skip]),
            _episode(task_b, 1, 0.0, [0], [skip]),
            _episode(task_b, 2, 0.0, [0], [skip]),
        ],
    ]
    theta = torch.tensor(theta0, requires_grad=True)
    optimiser = torch.optim.SGD([theta], lr=0.5, momentum=0.9)
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)  # (n_groups, G)
    advantages = (rewards - rewards.mean(1, keepdim=True)) / (
        rewards.std(1, unbiased=False, keepdim=True) + 1e-6
    )
    plan = world.plans[task_a]
    for _ in range(2):
        policy.update(groups, n_primary=2)
        optimiser.zero_grad()
        loss = torch.zeros((), dtype=torch.float64)
        for j, episode in enumerate(groups[0]):
            z = theta[torch.as_tensor(plan.features[episode.decisions])].sum(-1) + torch.as_tensor(
                plan.offsets[episode.decisions]
            )  # (D,)
            log_prob = torch.where(
                torch.as_tensor(episode.kinds == RIGHT),
                torch.nn.functional.logsigmoid(z),
                torch.nn.functional.logsigmoid(-z),
            )
            loss = loss - advantages[0, j] * log_prob.sum()
        (loss / (2 * 3)).backward()  # B x G = 2 x 3
        optimiser.step()
    torch.testing.assert_close(torch.as_tensor(policy.theta), theta.detach())


def test_skill_policy_p_right_rises_after_grpo_updates_on_a_mixed_group(actor, world):
    """Real rollouts of one task under the initial policy; a mixed group; GRPO raises P(right)."""
    config = SkillConfig(initial_success=0.3, lr=0.2)
    task_ids = _task_ids(world)[:40]
    policy = SkillPolicy(world, config, world.initial_theta(config, 0, task_ids))
    group = None
    for task_id in task_ids:
        candidate = [_rollout(actor, policy.theta, task_id, seed, keep=False) for seed in range(8)]
        rewards = {e.reward for e in candidate}
        if rewards == {0.0, 1.0}:
            group = [Episode(**{**e.__dict__, "rollout_idx": j}) for j, e in enumerate(candidate)]
            break
    assert group is not None, "no mixed group among 40 base tasks at initial_success=0.3"
    before = policy.p_right(group[0].task_id).mean()
    for _ in range(3):
        result = policy.update([group], n_primary=1)
        assert result.trained_groups == 1
    assert policy.p_right(group[0].task_id).mean() > before + 0.01
    dead = [Episode(**{**e.__dict__, "reward": 0.0}) for e in group]
    fresh = SkillPolicy(world, SkillConfig(momentum=0.0), policy.theta)
    assert fresh.update([dead], n_primary=1).trained_groups == 0
    np.testing.assert_array_equal(fresh.theta, policy.theta)  # an all-fail group teaches nothing


def _drop_timing(rows):
    return rows.drop(columns=["wall_time_s"])


def _deterministic(metrics):
    return {k: v for k, v in metrics.items() if not k.endswith(("seconds", "per_second"))}


def test_skill_engine_save_load_resumes_exactly(world, tmp_path):
    train, heldout = _task_ids(world)[:60], _task_ids(world)[60:72]
    batches = [
        _frame(world, train[i : i + 8]).assign(role="coverage") for i in range(0, 32, 8)
    ]  # 4 steps of B = 8

    def engine():
        return SkillEngine(_frame(world, train), 4, seed=3, heldout=_frame(world, heldout), eval_every=2)

    straight = engine()
    expected = [straight.run_step(b, step) for step, b in enumerate(batches, start=1)]
    first = engine()
    for step, b in enumerate(batches[:2], start=1):
        first.run_step(b, step)
    first.save(tmp_path / "ckpt")
    resumed = engine()
    resumed.load(tmp_path / "ckpt")
    for step, b in enumerate(batches[2:], start=3):
        rows, metrics = resumed.run_step(b, step)
        want_rows, want_metrics = expected[step - 1]
        pd.testing.assert_frame_equal(_drop_timing(rows), _drop_timing(want_rows))
        assert _deterministic(metrics) == _deterministic(want_metrics)
    np.testing.assert_array_equal(resumed.policy.theta, straight.policy.theta)
    np.testing.assert_array_equal(resumed.policy.velocity, straight.policy.velocity)
    assert {"eval/heldout_score", "eval/initial_heldout_score"} <= set(expected[0][1])
    assert "eval/heldout_score" not in expected[2][1] and "eval/heldout_score" in expected[3][1]
    with pytest.raises(ValueError, match="seed"):
        SkillEngine(_frame(world, train), 4, seed=4).load(tmp_path / "ckpt")


def test_skill_engine_rejects_unknown_options_and_overlapping_heldout(world):
    train = _task_ids(world)[:10]
    with pytest.raises(ValueError, match="unknown skill policy option"):
        SkillEngine(_frame(world, train), 4, seed=0, learning_rate=0.1)
    with pytest.raises(ValueError, match="both in training and held-out"):
        SkillEngine(_frame(world, train), 4, seed=0, heldout=_frame(world, train[:2]))


def test_skill_engine_step_with_refill_trains_once_on_every_round(world):
    train = _task_ids(world)[:40]
    first = _frame(world, train[:8]).assign(role="coverage")
    extra = _frame(world, train[8:16]).assign(role="oversample")
    rounds = []

    def refill(rows):
        rounds.append(sorted(set(rows["task_id"])))
        return extra if len(rounds) == 1 else extra.iloc[:0]

    engine = SkillEngine(_frame(world, train), 4, seed=3)
    rows, metrics = engine.run_step(first, 1, refill=refill)
    assert rounds == [sorted(train[:8]), sorted(train[8:16])]  # the rule saw both rounds' rewards
    assert rows["task_id"].tolist() == [t for t in train[:16] for _ in range(4)]
    # the same as rolling out both rounds by hand and one update on the first B = 8 informative groups
    by_hand = SkillEngine(_frame(world, train), 4, seed=3)
    groups = by_hand.rollout(first, 1) + by_hand.rollout(extra, 1)
    want = by_hand.train(groups, 8)
    assert metrics["train/trained_groups"] == want["train/trained_groups"]
    np.testing.assert_array_equal(engine.policy.theta, by_hand.policy.theta)


def test_skill_policy_checkpoint_of_other_sources_loads_by_parameter_name(world):
    # the sources changed since the checkpoint: tau-bench retail added its tools and environment
    wider = built_worker(SkillWorkerSpec(sources=(BFCL, "tau_bench_retail"))).world
    config = SkillConfig()
    trained = SkillPolicy(world, config, world.initial_theta(config, 0, _task_ids(world)[:20]))
    trained.theta += np.linspace(0.1, 1.0, world.n_params)  # stands for training
    trained.velocity[:] = 0.5
    fresh = SkillPolicy(wider, config, wider.initial_theta(config, 0, _task_ids(world)[:20]))
    start = fresh.theta.copy()
    fresh.load_state_dict(trained.state_dict())
    old = dict(zip(world.parameter_names(), trained.theta, strict=True))
    names = wider.parameter_names()
    assert set(old) < set(names) and any(n.startswith("env:") and n not in old for n in names)
    for name, value, initial, momentum in zip(names, fresh.theta, start, fresh.velocity, strict=True):
        assert value == old.get(name, initial) and momentum == (0.5 if name in old else 0.0), name
    other_config = SkillPolicy(wider, SkillConfig(call_sd=2.0), start)
    with pytest.raises(ValueError, match="different task world .* or policy config"):
        other_config.load_state_dict(trained.state_dict())
