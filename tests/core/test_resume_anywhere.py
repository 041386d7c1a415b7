"""A state saved at any point of a step (before or after its selection, between refill rounds), with the optional
trackers on, resumes exactly: a scheduler of another seed that loads it hands out the same batches and refills and
predicts the same as the run that never stopped."""

import copy

import pandas as pd
import pytest

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.worlds import regime_named

STEPS = 5
CUT_STEP = 3  # every point of this step is a cut

CASES = {
    # groups that never come back or come back short; refill rounds, flaky-verifier prior, trainer's dispersion
    "graded+lost+partial": {
        "refill_rounds": 2,
        "learnability_prior_sd": 0.3,
        "training_dispersion": True,
        "silence_backoff": 3,
    },
    # a reward ceiling and dropped groups; an over-sampled first round, calibration, learning progress
    "default+ceiling+dropped": {
        "oversample_factor": 0.5,
        "env_calibration": 0.5,
        "learning_progress": True,
        "transfer_per_environment": True,
    },
    # a reward floor and slow tasks under the paper's fused predictor
    "graded+floor+slow-tasks": {"predictor": "variance", "refill_rounds": 1, "horizon_discount": 0.5},
}


def campaign(sched: EnvSched, sim, batch_size: int) -> tuple[list, list]:
    """STEPS steps of select, then observe and refill until a refill is empty; the policy trains after each.
    Returns every action as (kind, step, frame: the batch / refill handed out or the rollouts observed) and the
    state saved just before each."""
    log, states = [], []

    def act(kind: str, step: int, call):
        states.append(copy.deepcopy(sched.state_dict()))
        frame = call()
        log.append((kind, step, frame))
        return frame

    for step in range(1, STEPS + 1):
        handed, rounds = act("select", step, lambda s=step: sched.select(s)), []
        while not handed.empty:
            rollouts = sim.rollout(handed, step)
            rounds.append(rollouts)
            act("observe", step, lambda r=rollouts: sched.observe(r) or r)
            handed = act("refill", step, lambda s=step: sched.refill(s))
        sim.train(pd.concat(rounds, ignore_index=True), batch_size)
        sim.drift()
    return log, states


@pytest.mark.parametrize("regime", list(CASES))
def test_a_state_saved_at_any_point_of_a_step_resumes_exactly(regime):
    world = regime_named(regime)
    sim = world.world(0, quick=True).reset(0)
    catalog = TaskCatalog.from_frame(sim.catalog_frame())
    cfg = SchedulerConfig(batch_size=world.batch_size, group_size=sim.config.group_size, **CASES[regime])
    original = EnvSched(catalog, cfg, seed=0)
    log, states = campaign(original, sim, world.batch_size)
    cuts = [i for i, (_, step, _) in enumerate(log) if step == CUT_STEP]
    # refill rounds or the over-sampled round ran (both hand out role 'oversample')
    assert any(kind != "observe" and (frame["role"] == "oversample").any() for kind, _, frame in log)
    for cut in cuts:
        resumed = EnvSched(catalog, cfg, seed=99)  # everything must come from the state
        resumed.load_state_dict(copy.deepcopy(states[cut]))
        for kind, step, frame in log[cut:]:
            if kind == "observe":
                resumed.observe(frame)
            else:
                handed = resumed.select(step) if kind == "select" else resumed.refill(step)
                pd.testing.assert_frame_equal(handed, frame, obj=f"{kind} of step {step} after cut {cut}")
        pd.testing.assert_frame_equal(resumed.predict(), original.predict())
