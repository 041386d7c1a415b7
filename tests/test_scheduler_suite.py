"""The suite's campaign on a world whose environments join late: started over the first pool, rebuilt at the
join step from the campaign's history; what it reports of each batch in attack worlds (bench/scheduler_suite.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.scheduler_oracle import TransferOracleEnvSched, true_transfer
from bench.scheduler_suite import (
    counted_steps,
    make_world,
    paper_regime,
    regime_error,
    regime_group,
    repeats,
    run_scheduler,
    run_world,
    share_in,
)
from envsched_core import SchedulerConfig
from envsched_core.scheduler import relative_transfer
from envsched_core.worlds import ALL_REGIMES, DRAWN, regime_named

LATE = replace(
    ALL_REGIMES["late-envs"],
    config=replace(ALL_REGIMES["late-envs"].config, n_envs=12, tasks_per_env=8, heldout_per_env=2),
    late_step=4,
    batch_size=8,
)


def test_a_late_world_starts_over_the_first_pool_and_picks_the_new_environments_from_the_join_step():
    world = make_world(LATE, seed=1, quick=True)
    late_ids = set(np.asarray(world.sim.task_ids)[world.sim.late_tasks])
    assert len(world.first_catalog) == len(world.catalog) - len(late_ids) > 0
    for name in ("random", "dps", "envsched"):
        metrics, picks = run_scheduler(world, name, 8, 0, 0, {"late": share_in(late_ids)})
        assert picks["late"][:3] == [0.0, 0.0, 0.0]  # steps 1-3: not in the pool
        assert sum(picks["late"][3:]) > 0 and len(metrics) == 8  # rebuilt over the whole catalogue at step 4
    per_world = run_world(world, ["random", "envsched"], horizon=8, target_step=6)
    assert 0 < per_world["envsched"]["late"] <= 1  # the share from the join step on is reported


def small(name: str, **changes):
    regime = ALL_REGIMES[name]
    config = replace(regime.config, n_envs=12, tasks_per_env=8, heldout_per_env=2)
    return replace(regime, config=config, batch_size=8, **changes)


def test_outage_picks_count_while_down_and_once_back_and_not_where_every_environment_is_down():
    world = make_world(small("outage", outage_steps=2), seed=1, quick=True)
    assert counted_steps(world.sim, "outage_step") == slice(10, 20)  # steps 11-20
    assert counted_steps(world.sim, "outage_end") == slice(12, 22)  # steps 13-22: back after 11 and 12
    assert counted_steps(world.sim, None) == slice(None)
    per_world = run_world(world, ["random", "envsched"], horizon=14, target_step=7)
    down_ids = set(np.asarray(world.sim.task_ids)[world.sim.outage_tasks])
    for name in ("random", "envsched"):
        # the same campaign again, its per-step share of the down environments recorded
        _, picks = run_scheduler(world, name, 14, 0, 0, {"down": share_in(down_ids)})
        assert per_world[name]["down"] == np.mean(picks["down"][10:14])  # steps 11-14 of the 14 run
        assert per_world[name]["back"] == np.mean(picks["down"][12:14])
        assert np.isnan(per_world[name]["broken"])  # a world without the mask reports none
    everything = run_world(make_world(small("outage-all"), 1, True), ["random"], horizon=14, target_step=7)
    assert np.isnan(everything["random"]["down"])  # every task down: a share of 1 says nothing


def test_repeat_picks_count_the_tasks_whose_original_is_already_in_the_batch():
    world = make_world(small("duplicates"), seed=2, quick=True)
    ids, templates = np.asarray(world.sim.task_ids), world.sim.templates
    copy = np.flatnonzero(templates != np.arange(len(ids)))[:3]
    measure = repeats(world.sim, ids)
    batch = pd.DataFrame({"task_id": [*ids[copy], *ids[templates[copy]]]})  # three copies and their originals
    assert measure(batch) == 1.0 - len(set(templates[copy])) / 6
    assert measure(batch.head(3)) == 1.0 - len(set(templates[copy])) / 3
    assert repeats(make_world(small("default"), 2, True).sim, ids) is None  # no copies: not reported
    per_world = run_world(world, ["random", "envsched"], horizon=8, target_step=4)
    assert 0 <= per_world["envsched"]["repeats"] <= 1 and np.isnan(per_world["envsched"]["down"])


def test_the_summary_takes_the_paper_regime_or_the_first_variation_of_it_that_ran():
    assert paper_regime(["default", "paper-g4", "paper"]) == "paper"
    assert paper_regime(["latent", "latent-paper", "paper-shift"]) == "latent-paper"
    assert paper_regime(["easy", "paper-b64"]) == "paper-b64"
    assert paper_regime(["latent", "papery", "default"]) is None
    assert paper_regime(["default+flaky", "paper+settled+inverted"]) == "paper+settled+inverted"
    for kind in DRAWN:
        drawn = [f"{kind}-1-{i}" for i in range(24)]
        on_paper = [n for n in drawn if regime_named(n).description.startswith("paper + ")]
        assert on_paper and paper_regime(drawn) == on_paper[0]


def test_a_required_columns_catalogue_shows_the_schedulers_task_env_text_and_tools_only():
    full = make_world(small("paper"), seed=1, quick=True)
    cut = make_world(small("paper"), seed=1, quick=True, catalogue="required")
    assert list(cut.catalog.task_ids) == list(full.catalog.task_ids)
    assert cut.catalog.verifier_kind is None and full.catalog.verifier_kind is not None
    assert not cut.catalog.gold_calls.any() and full.catalog.gold_calls.any()
    # the embedding is the shipped model's reading of the text, not the world's own
    assert cut.catalog.embeddings.shape[1] == 384 != full.catalog.embeddings.shape[1]
    per_world = run_world(cut, ["random", "envsched"], horizon=8, target_step=4)
    assert per_world["envsched"]["steps"] >= 1


def test_regime_groups_name_the_stress_latent_compound_and_wild_regimes():
    assert regime_group("compound") == [f"compound-1-{i}" for i in range(24)]  # the report draw
    assert regime_group("compound-0")[:2] == ["compound-0-0", "compound-0-1"]
    assert regime_group("compound-0-5") == ["compound-0-5"] and regime_group("paper") == ["paper"]
    assert regime_group("wild") == [f"wild-1-{i}" for i in range(24)]  # the report draw
    assert regime_group("wild-0")[:2] == ["wild-0-0", "wild-0-1"] and regime_group("wild-0-5") == ["wild-0-5"]
    assert regime_error("wild-9-23") is None and regime_error("wild-9")
    assert "inverted" in regime_group("stress") and "latent-paper" in regime_group("latent")
    assert (
        regime_error("compound-7-3") is None and regime_error("paper") is None and regime_error("compound-7")
    )
    assert regime_error("graded+flaky-envs") is None and regime_error("graded+flaky-envs+flaky-envs")
    # a mechanism at a strength of one's own: the error says which part is wrong
    assert regime_error("default+flaky=0.5") is None
    assert "flaky must be a number" in regime_error("default+flaky=lots")
    assert "must be in [0, 1)" in regime_error("default+flaky=1.5")


def test_the_benches_refuse_a_regime_name_saying_why():
    root = Path(__file__).resolve().parents[1]
    for bench in ("scheduler_suite.py", "scheduler_oracle.py", "scheduler_calibration.py"):
        done = subprocess.run(
            [sys.executable, f"bench/{bench}", "--regimes", "paper+flaky=2"],
            capture_output=True,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            timeout=120,
        )
        assert done.returncode == 2, (bench, done.stderr[-500:])
        assert "paper+flaky=2: WorldSimulator: flaky=2.0 must be in [0, 1)" in done.stderr.splitlines()[-1]


def test_the_transfer_oracle_weighs_tasks_by_the_skills_they_share_with_the_frontier():
    world = make_world(regime_named("paper"), 0, quick=True)
    config = SchedulerConfig(batch_size=world.regime.batch_size, group_size=world.sim.config.group_size)
    env = world.catalog.env
    frontier = np.where(env == 3, 0.25, 0.0)  # only environment 3's tasks are at the frontier
    kernel = TransferOracleEnvSched(world.catalog, config, sim=world.sim.reset(0), mode="transfer-kernel")
    factor = kernel._transfer(frontier)
    # relative to the catalogue's mean, and highest where the frontier's environment skill is loaded
    assert np.isclose(factor.mean(), 1.0) and factor[env == 3].min() > factor[env != 3].max()
    truth = TransferOracleEnvSched(world.catalog, config, sim=world.sim.reset(0), mode="transfer")
    assert np.allclose(truth._transfer(frontier), relative_transfer(true_transfer(world.sim), 1.0))
    latent = make_world(regime_named("latent-paper"), 0, quick=True)
    with pytest.raises(ValueError, match="reads the base simulator's skills"):
        TransferOracleEnvSched(latent.catalog, config, sim=latent.sim, mode="transfer")
