"""World regimes of the benchmark simulator: families of worlds a scheduler is evaluated on.

A *regime* fixes how worlds are drawn (sizes, how much of a task's difficulty is shared, reward
sparsity and kind, learning rate, drift and forgetting, whether the catalogue carries information);
a *world* is one draw of a regime from a world seed (new tasks, skills and catalogue, not only new
rollout noise). `bench/scheduler_suite.py` runs every scheduler on several worlds per regime.

    regime = REGIMES["paper"]
    sim = regime.world(seed=100)            # a Simulator (a WorldSimulator when the regime needs one)
    frame = sim.catalog_frame()             # what a scheduler may see

Mechanisms beyond `SimConfig`, all in `WorldSimulator` so the base simulator's worlds stay unchanged
(it only gained the `_push_direction`, `_group_signal`, `_draw_rewards`, `_group_success` and `_group_variance` hooks):
* forgetting: after each step every shared skill moves a share `forget` of the way back to its
  initial value (on top of the random-walk drift), so skills that are not trained decay;
* a scrambled catalogue: the embedding and every signature column (tools, effects, state fields,
  turns, gold calls, verifier, reward kind) are permuted across tasks, so they carry no information
  about a task's skills or difficulty; only task_id and env_id stay true;
* flaky verifiers (an attack on variance-seeking schedulers): a share `flaky` of the training tasks
  reward a draw with a fixed success rate q_i ~ U(0.3, 0.7) whatever the policy does (a verifier that
  flips a coin, a nondeterministic environment). Their groups look maximally informative and are not:
  the policy gradient of a reward independent of the actions is zero in expectation, so a trained flaky
  group pushes each skill it loads on by its usual size times N(0, 1) noise. The catalogue does not mark
  them and held-out tasks are never flaky. With `flaky_envs`, every training task of that share of the
  environments is flaky too (a broken environment: its level, its neighbours and its frontier all say 'mixed').
* broken tasks (`broken`): a share of the training tasks have a wrong gold answer, so their verifier never passes
  (success rate 0 whatever the policy does; drawn per task from a stream of its own, held-out tasks never broken).
  They look like very hard tasks and never give a mixed group.
* inverted verifiers (`inverted`): a share of the training tasks have a wrong gold answer that the policy *can*
  match: the verifier passes what the true one fails and fails what it passes (each check of a graded one), so
  the task's reward is 1 - its true success rate. Its groups are as mixed as the true task's, and learnable, but
  GRPO on them pushes every skill the task loads on the wrong way (the push's sign flipped): the policy gets better
  at the wrong answer and worse at the held-out tasks, which are never inverted. Drawn per task from a stream of
  its own; nothing in the catalogue marks them.
* environment outages (`outage`): the sandboxes of that share of the environments (at least one) are down over
  steps `outage_step` .. `outage_step + outage_steps - 1` (11-20 by default): every rollout of their training tasks
  scores 0, as a runner that scores a crashed sandbox 0 reports it, then they come back as they were. The policy is
  not touched (held-out scores stay true); all-zero groups teach nothing, so the outage only costs what is rolled
  out in it and what a scheduler believes afterwards.
* judged environments (`judged`): every training task of that share of the environments (at least one) is scored by
  a judge that does not look at what the policy did: a fixed level q_i ~ U(0.3, 0.7) plus N(0, 0.02^2) per rollout,
  clipped to [0, 1] (a reward model or LLM judge that scores every answer about the same). Every group has some
  spread, so a scheduler that reads "mixed" from any spread takes them for the most informative tasks; the policy
  gradient is zero in expectation, so, as for flaky verifiers, a trained group pushes its skills by its (tiny)
  usual size times N(0, 1) noise. They count as flaky tasks (`flaky_tasks`), and as `judged_tasks`.
* copied tasks (`duplicates`): a share of the training tasks are copies of another training task of their environment
  (a template filled in again, a task scraped twice): the same tools, difficulty and skills, the task's own skill
  included, so training either trains both; the embedding a near copy, the text drawn again. A batch that holds a
  task twice holds fewer distinct tasks than it seems.
  `lookalikes`: the copies only look the same (the catalogue shows exactly what `duplicates` shows) but keep their
  own private difficulty and task skill (a template filled in with other values, as hard as those make it).
* lost groups (`lost`, `lost_envs`): a share of the training tasks, or every training task of a share of the
  environments, never gets a group back: each rollout hangs past the runner's timeout or errors, and the trainer
  drops the group instead of scoring it (a runner that skips a crashed sandbox, a trainer's own sample filter).
  The rollouts were generated and count as spent (`run_campaign` counts every group handed out); the scheduler
  observes nothing of them and the policy trains on none. Held-out tasks are never lost. `dropped`: the transient
  kind, each group of any training task dropped with that chance, drawn per (step, task), so a task dropped at one
  step answers at the next.
* partial groups (`partial`, `slow`): single rollouts are lost (each past the runner's timeout, dropped rather
  than scored), so a group comes back with fewer than G rewards, sometimes one. `partial`: each rollout of any
  training task is lost with that chance; `slow`: that share of the training tasks (long-horizon ones) loses each
  of its rollouts with chance `SLOW_LOSS`. Drawn per (step, task, rollout) from a stream of their own; every reward
  that does come back is the plain world's. G rollouts per task handed out count as spent, and the policy trains
  on what came back (a group of one has no advantage and teaches nothing).
* rewards with a floor (`floor_envs`): every training task of that share of the environments scores
  `FLOOR` + (1 - `FLOOR`) x its verifier's score (credit for a well-formed attempt, as a format reward adds), so a
  failed rollout scores 0.2 there and 0 elsewhere. The outcome is the same, on another scale: a group's push is
  the unscaled outcome's spread, and GRPO's normalised advantages do not see the floor at all.
* rewards with a ceiling (`ceiling_envs`): every training task of that share of the environments scores
  `CEILING` x its verifier's score (a cost, step or length penalty every successful trajectory pays, as
  efficiency-shaped rewards do), so a full pass scores 0.8 there and no rollout ever scores 1. As with the floor,
  the outcome is the same on another scale, and a group's push is the unscaled outcome's spread.
* rollouts that share their group's conditions (`group_sd`): every (step, task) group draws one logit shift
  ~ N(0, `group_sd`^2) that all its G rollouts share (one sandbox, one seeded initial state, one slow API per
  group), from a stream of its own; the policy is not touched. Groups come back all-pass or all-fail more often
  than the success rate says, a group carries less evidence about the rate than G independent rollouts, and
  its push is still its rewards' spread.
* settled environments (`settled_envs`): that share of the environments is `SETTLED` logits easier or harder
  (the sign drawn per environment) than drawn, training and held-out tasks alike, from the start: mastered or out
  of reach (a policy that has trained on most of its catalogue before). Drawn from a stream of its own.
* multi-step tasks (`chain`): a rollout makes its task's gold calls in order and stops at the first one that
  fails, each succeeding with q_i = sigmoid(z_i + a_n), a_n = logit(2^(-1/n)) for n gold calls (so that
  the full pass, q^n, is 1/2 where z = 0). A binary verifier scores the full pass; a graded one the share of
  calls passed before the first failure (progress along a sequence, as BFCL's turns and ACEBench's
  milestones, not the base world's independent checks). A group's push is the policy gradient of the per-call
  logit with group-normalised advantages, mean_j A_j d log pi(rollout_j) / n: a group whose rollouts all stop at
  the same call teaches nothing, and neither does one without reward spread.
* noisy verifiers (`noise`): every check's outcome, a binary verifier's pass or each of a graded one's partial
  checks, is read flipped with probability `noise`, both ways (an LLM judge, a flaky test). All-fail tasks then
  show mixed groups, with no signal in them: a group's push is its noise-free push times how much a read check
  says about the outcome, P(pass | read pass) - P(pass | read fail) at the task's success rate.
* environments added mid-campaign (`late_envs`): the training tasks of that share of the environments join the
  pool only at `late_step` (a new benchmark or API added to a running campaign): `available_tasks()` leaves them
  out and `rollout` refuses them before then, while `catalog_frame()` lists every task (a runner builds its first
  scheduler over the rest; `bench/scheduler_suite.py` rebuilds it at `late_step` from the campaign's history,
  `schedulers.fold_history`, as a pipeline does after a pool refresh). Their held-out tasks count from the start.
* coarse environment ids (`env_labels`): the catalogue shows only that many environment ids, each naming a
  contiguous block of environments (one id per benchmark); tools keep their true environment's prefix. The world
  is unchanged: only what the scheduler sees about environments is. `task_env_ids`: the other way, every task
  its own environment id (a sandbox per task).
* environments held out whole (`unseen_envs`): that share of the environments has no task in the catalogue, and
  the held-out score is the mean over all of their tasks and nothing else (train on some benchmarks, evaluate on
  others). Only the tool-type and family skills carry over; an environment's own skill never trains there.
* environment updates (an attack on schedulers that trust their history): after step `shift_step` a share
  `shift` of the environments is updated, and every task in them, training and held-out alike, gets
  `shift_size` logits harder or easier (the sign drawn per environment), once. What was learned about those
  environments' tasks is stale from then on; a scheduler has to notice from the rewards alone.

Regime calibration (`calibrate`) reports random's batch statistics in the form of the EnvSched
paper's Table 2, so a regime can be tuned to a target (the paper's Qwen3-8B regime: random's mean
selected variance 0.032, median 0.0147, median reward 0.595).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .latent_world import LATENT_REGIMES, LatentRegime
from .simulator import SimConfig, Simulator, _position_in_env, structural_difficulty

JUDGE_SD = 0.02  # the spread of a `judged` environment's score between rollouts of one task
SLOW_LOSS = 0.75  # the chance that one rollout of a `slow` task is lost
FLOOR = 0.2  # a `floor_envs` environment's reward for a failed but well-formed attempt
CEILING = 0.8  # a `ceiling_envs` environment's reward for a full pass
SETTLED = 6.0  # logits by which a `settled_envs` environment is easier or harder than drawn

SCRAMBLED_COLUMNS = (
    "text",
    "tools",
    "tool_effects",
    "state_fields",
    "turns",
    "gold_calls",
    "verifier",
    "reward_kind",
    "embedding",
)


def _shifted(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """sigmoid(logit(p) + shift), exact at p = 0 and 1."""
    e = np.exp(shift)
    return p * e / (1.0 - p + p * e)


class WorldSimulator(Simulator):
    """A Simulator with optional forgetting, scrambled catalogue, flaky (policy-blind) or noisy verifiers,
    multi-step tasks and environment updates (module docstring)."""

    def __init__(
        self,
        config: SimConfig,
        seed: int = 0,
        forget: float = 0.0,
        scramble: bool = False,
        flaky: float = 0.0,
        shift: float = 0.0,
        shift_step: int = 30,
        shift_size: float = 2.5,
        chain: bool = False,
        noise: float = 0.0,
        flaky_envs: float = 0.0,
        late_envs: float = 0.0,
        late_step: int = 10,
        env_labels: int = 0,
        task_env_ids: bool = False,
        unseen_envs: float = 0.0,
        broken: float = 0.0,
        outage: float = 0.0,
        outage_step: int = 11,
        outage_steps: int = 10,
        duplicates: float = 0.0,
        lookalikes: float = 0.0,
        judged: float = 0.0,
        lost: float = 0.0,
        lost_envs: float = 0.0,
        dropped: float = 0.0,
        partial: float = 0.0,
        slow: float = 0.0,
        floor_envs: float = 0.0,
        ceiling_envs: float = 0.0,
        settled_envs: float = 0.0,
        group_sd: float = 0.0,
        inverted: float = 0.0,
    ):
        if env_labels and task_env_ids:
            raise ValueError(
                "WorldSimulator: env_labels and task_env_ids are two ways to relabel; choose one."
            )
        if env_labels < 0 or env_labels > config.n_envs:
            raise ValueError(
                f"WorldSimulator: env_labels={env_labels} must be in [0, n_envs={config.n_envs}]."
            )
        if not 0.0 <= forget < 1.0:
            raise ValueError(f"WorldSimulator: forget={forget} must be in [0, 1).")
        if not 0.0 <= flaky < 1.0:
            raise ValueError(f"WorldSimulator: flaky={flaky} must be in [0, 1).")
        if not 0.0 <= flaky_envs < 1.0:
            raise ValueError(f"WorldSimulator: flaky_envs={flaky_envs} must be in [0, 1).")
        if not 0.0 <= broken < 1.0:
            raise ValueError(f"WorldSimulator: broken={broken} must be in [0, 1).")
        if not 0.0 <= inverted < 1.0:
            raise ValueError(f"WorldSimulator: inverted={inverted} must be in [0, 1).")
        if not 0.0 <= outage <= 1.0 or outage_step < 1 or outage_steps < 1:
            raise ValueError(
                f"WorldSimulator: outage={outage} must be in [0, 1], outage_step={outage_step} and "
                f"outage_steps={outage_steps} >= 1."
            )
        if not 0.0 <= judged < 1.0:
            raise ValueError(f"WorldSimulator: judged={judged} must be in [0, 1).")
        if not (0.0 <= lost < 1.0 and 0.0 <= lost_envs < 1.0 and 0.0 <= dropped < 1.0):
            raise ValueError(
                f"WorldSimulator: lost={lost}, lost_envs={lost_envs} and dropped={dropped} must be in [0, 1)."
            )
        if not (0.0 <= partial < 1.0 and 0.0 <= slow <= 1.0):
            raise ValueError(
                f"WorldSimulator: partial={partial} must be in [0, 1) and slow={slow} in [0, 1]."
            )
        if not 0.0 <= duplicates < 1.0:
            raise ValueError(f"WorldSimulator: duplicates={duplicates} must be in [0, 1).")
        if not 0.0 <= unseen_envs < 1.0:
            raise ValueError(f"WorldSimulator: unseen_envs={unseen_envs} must be in [0, 1).")
        if not 0.0 <= late_envs < 1.0 or late_step < 2:
            raise ValueError(
                f"WorldSimulator: late_envs={late_envs} must be in [0, 1), late_step={late_step} >= 2."
            )
        if not 0.0 <= shift <= 1.0 or shift_step < 1:
            raise ValueError(
                f"WorldSimulator: shift={shift} must be in [0, 1], shift_step={shift_step} >= 1."
            )
        if not 0.0 <= noise < 0.5:
            raise ValueError(f"WorldSimulator: noise={noise} must be in [0, 0.5).")
        if not 0.0 <= lookalikes < 1.0:
            raise ValueError(f"WorldSimulator: lookalikes={lookalikes} must be in [0, 1).")
        if (duplicates or lookalikes) and unseen_envs:
            raise ValueError("WorldSimulator: duplicates or lookalikes and unseen_envs do not combine.")
        if duplicates and lookalikes:
            raise ValueError("WorldSimulator: duplicates and lookalikes are two kinds of copy; choose one.")
        rescaled = floor_envs or ceiling_envs
        if chain and (flaky or flaky_envs or noise or broken or outage or judged or rescaled or inverted):
            raise ValueError(
                "WorldSimulator: chain tasks do not combine with flaky, broken, inverted, noisy, judged, floored "
                "or capped verifiers or outages."
            )
        if not (0.0 <= floor_envs <= 1.0 and 0.0 <= ceiling_envs <= 1.0):
            raise ValueError(
                f"WorldSimulator: floor_envs={floor_envs} and ceiling_envs={ceiling_envs} must be in [0, 1]."
            )
        if floor_envs and ceiling_envs:
            raise ValueError("WorldSimulator: floor_envs and ceiling_envs are two rescalings; choose one.")
        if not 0.0 <= settled_envs < 1.0:
            raise ValueError(f"WorldSimulator: settled_envs={settled_envs} must be in [0, 1).")
        if group_sd < 0 or (group_sd and (chain or noise)):
            raise ValueError(
                f"WorldSimulator: group_sd={group_sd} must be >= 0, and does not combine with chain tasks or noise."
            )
        self.forget, self.scramble, self.flaky = float(forget), bool(scramble), float(flaky)
        self.env_labels, self.task_env_ids = int(env_labels), bool(task_env_ids)
        self.flaky_envs, self.broken, self.inverted = float(flaky_envs), float(broken), float(inverted)
        self.judged = float(judged)
        self._has_flaky = self.flaky > 0 or self.flaky_envs > 0 or self.judged > 0
        self.late_envs, self.late_step = float(late_envs), int(late_step)
        self.chain, self.noise = bool(chain), float(noise)
        self.shift, self.shift_step, self.shift_size = float(shift), int(shift_step), float(shift_size)
        self.outage, self.outage_step, self.outage_steps = float(outage), int(outage_step), int(outage_steps)
        self.duplicates, self.lookalikes = float(duplicates), float(lookalikes)
        self.lost, self.lost_envs, self.dropped = float(lost), float(lost_envs), float(dropped)
        self.partial, self.slow = float(partial), float(slow)
        self.floor_envs, self.ceiling_envs = float(floor_envs), float(ceiling_envs)
        self.group_sd = float(group_sd)
        super().__init__(config, seed)
        if unseen_envs > 0:
            self._hold_out_environments(unseen_envs)
        # Drawn from streams of their own, so the rest of the world is the same with or without them.
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 3]))
        n_all = len(self._task_env)
        self._flaky = np.zeros(n_all, dtype=bool)
        self._flaky[self._train_rows] = rng.random(self.n_train) < self.flaky
        self._flaky_rate = rng.uniform(0.3, 0.7, n_all)
        self._flaky[self._train_rows] |= self._whole_environments(self.flaky_envs, stream=5)
        self._judged = np.zeros(n_all, dtype=bool)  # policy-blind too, their spread a judge's jitter
        self._judged[self._train_rows] = self._whole_environments(self.judged, stream=12)
        self._flaky |= self._judged
        self._late = self._whole_environments(self.late_envs, stream=7)  # they join the pool at late_step
        self._broken = np.zeros(n_all, dtype=bool)
        self._broken[self._train_rows] = self._some_tasks(self.broken, stream=9)
        self._inverted = np.zeros(n_all, dtype=bool)
        self._inverted[self._train_rows] = self._some_tasks(self.inverted, stream=20)
        self._down = np.zeros(n_all, dtype=bool)  # training tasks of the environments an outage takes down
        self._down[self._train_rows] = self._whole_environments(self.outage, stream=10)
        self._lost = np.zeros(n_all, dtype=bool)  # training tasks whose groups never come back
        self._lost[self._train_rows] = self._some_tasks(self.lost, stream=13) | self._whole_environments(
            self.lost_envs, stream=14
        )
        # the chance that one rollout of each task is lost (`partial`, `slow`)
        self._floored = np.zeros(n_all, dtype=bool)  # training tasks whose reward has a floor (`floor_envs`)
        self._floored[self._train_rows] = self._whole_environments(self.floor_envs, stream=18)
        # training tasks whose full pass scores CEILING (`ceiling_envs`)
        self._capped = np.zeros(n_all, dtype=bool)
        self._capped[self._train_rows] = self._whole_environments(self.ceiling_envs, stream=21)
        # a floored or capped task scores low + span x its verifier's score: the same outcome on another scale
        self._reward_low = np.where(self._floored, FLOOR, 0.0)
        self._reward_span = np.where(self._floored, 1 - FLOOR, np.where(self._capped, CEILING, 1.0))
        self._slow = np.zeros(n_all, dtype=bool)
        self._slow[self._train_rows] = self._some_tasks(self.slow, stream=16)
        self._rollout_loss = np.zeros(n_all)
        self._rollout_loss[self._train_rows] = np.where(self._slow[self._train_rows], SLOW_LOSS, self.partial)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 4]))
        moved = rng.random(config.n_envs) < self.shift
        sign = rng.choice([-1.0, 1.0], size=config.n_envs)
        self._shift_offset = (moved * sign * self.shift_size)[self._task_env]  # per task, train and held-out
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 19]))
        settled, sign = rng.random(config.n_envs) < settled_envs, rng.choice([-1.0, 1.0], size=config.n_envs)
        # per task: + harder (out of reach), - easier (mastered), 0 untouched
        self._settled = (settled * sign * SETTLED)[self._task_env]
        self._difficulty0 = self._difficulty0 + self._settled
        self._set_steps_done(0)

    @property
    def shifted_envs(self) -> np.ndarray:
        """Mask over environments whose difficulty moves at ``shift_step`` (oracle; for tests)."""
        moved = np.zeros(self.config.n_envs, dtype=bool)
        moved[self._task_env[self._shift_offset != 0]] = True
        return moved

    def _build_world(self, rng: np.random.Generator) -> None:
        super()._build_world(rng)
        if self.duplicates > 0 or self.lookalikes > 0:
            self._copy_tasks()
        self._difficulty0 = self._difficulty  # before any shift; `_difficulty` is replaced, never edited
        self._calls = np.maximum(self._gold_calls, 1)  # the steps of a multi-step (chain) task
        self._call_offset = -np.log(2.0 ** (1.0 / self._calls) - 1.0)  # logit(2^(-1/n)): q^n = 1/2 at z = 0

    def _copy_tasks(self) -> None:
        """Make a share ``duplicates`` of the training tasks copies of another training task of their environment
        (uniform over its originals; the first task of an environment is always an original): the same tools,
        gold calls, turns, difficulty and skills, the task skill included, so training a copy trains its original;
        the embedding a near copy (cosine ~0.995) and the text re-drawn as for any task of those tools. Drawn
        from a stream of their own; held-out tasks are never copies.

        With ``lookalikes`` instead, a copy looks the same (tools, gold calls, turns, near-copy embedding, the same
        environment, tool and family skills) but keeps its own private difficulty draw and its own task skill: a
        template filled in with other values, as hard as its own values make it."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 11]))
        self._template = np.arange(self.n_train)  # per training task, the task it is a copy of (itself)
        rows = self._train_rows
        env = self._task_env[rows]
        share = self.duplicates or self.lookalikes
        copy = (rng.random(self.n_train) < share) & (_position_in_env(env) > 0)
        originals = np.flatnonzero(~copy)
        for e in np.unique(env[copy]):  # a loop over environments: a few thousand at most
            mine = np.flatnonzero(copy & (env == e))
            self._template[mine] = rng.choice(originals[env[originals] == e], size=len(mine))
        src, dst = rows[self._template[copy]], rows[copy]
        # a lookalike's private difficulty: its own draw less the part its length explains
        private = self._difficulty[dst] - structural_difficulty(
            self.config, self._gold_calls[dst], self._turns[dst]
        )
        task_skill = self._load_idx[dst, 9], self._load_w[dst, 9]
        for name in ("_task_types", "_gold_calls", "_turns", "_difficulty", "_load_idx", "_load_w"):
            getattr(self, name)[dst] = getattr(self, name)[src]
        if self.lookalikes > 0:
            self._difficulty[dst] = private + structural_difficulty(
                self.config, self._gold_calls[dst], self._turns[dst]
            )
            self._load_idx[dst, 9], self._load_w[dst, 9] = task_skill
        emb = self._embedding[self._template[copy]]
        emb = emb + 0.1 * rng.normal(size=emb.shape) / np.sqrt(emb.shape[1])
        self._embedding[copy] = emb / np.linalg.norm(emb, axis=1, keepdims=True)

    @property
    def templates(self) -> np.ndarray:
        """Per training task (catalogue order), the position of the task it is a copy of (itself for an
        original; oracle, for metrics and tests)."""
        return self._template if self.duplicates > 0 else np.arange(self.n_train)

    @property
    def lookalike_templates(self) -> np.ndarray:
        """Per training task (catalogue order), the position of the task it looks like (itself for an original;
        oracle, for metrics and tests)."""
        return self._template if self.lookalikes > 0 else np.arange(self.n_train)

    def _set_steps_done(self, steps: int) -> None:
        """Steps completed since reset, and the difficulties they imply (shifted from `shift_step` on)."""
        self.steps_done = steps
        shifted = self.shift > 0 and steps >= self.shift_step
        self._difficulty = self._difficulty0 + self._shift_offset if shifted else self._difficulty0

    def reset(self, run_seed: int = 0) -> WorldSimulator:
        super().reset(run_seed)
        self._set_steps_done(0)
        return self

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "steps_done": self.steps_done}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._set_steps_done(int(state["steps_done"]))

    def _some_tasks(self, share: float, stream: int) -> np.ndarray:
        """Mask over training tasks, each in it with chance ``share``, drawn from a stream of their own so the rest
        of the world is the same with or without them."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, stream])).random(self.n_train) < share

    def _whole_environments(self, share: float, stream: int) -> np.ndarray:
        """Mask over training tasks of round(share x environments) environments (at least one when share > 0),
        drawn from a stream of their own so the rest of the world is the same with or without them."""
        n_envs = self.config.n_envs
        chosen = np.zeros(n_envs, dtype=bool)
        if share > 0:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, stream]))
            chosen[rng.choice(n_envs, size=max(1, round(share * n_envs)), replace=False)] = True
        return chosen[self._task_env[self._train_rows]]

    def _hold_out_environments(self, share: float) -> None:
        """Take round(share x environments) environments (at least one, drawn from a stream of their own) out
        of training: none of their tasks is in the catalogue, and the held-out score is the mean over all of
        their tasks and of nothing else. The skills, difficulties and the other tasks are unchanged."""
        unseen = self._whole_environments(share, stream=8)  # over the training tasks, before they shrink
        if unseen.all():
            raise ValueError(f"WorldSimulator: unseen_envs={share} leaves no environment to train on.")
        chosen = np.isin(self._task_env, np.unique(self._task_env[self._train_rows][unseen]))
        self._embedding = self._embedding[~unseen]
        self._is_train = self._is_train & ~chosen
        self._train_rows, self._heldout_rows = np.flatnonzero(self._is_train), np.flatnonzero(chosen)
        self.n_train = len(self._train_rows)

    @property
    def unseen_envs(self) -> np.ndarray:
        """Mask over environments held out of training whole (oracle; for tests)."""
        unseen = np.ones(self.config.n_envs, dtype=bool)
        unseen[self._task_env[self._train_rows]] = False
        return unseen

    @property
    def late_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those that join the catalogue at ``late_step``; their
        environments' held-out tasks count from the start."""
        return self._late

    def available_tasks(self) -> np.ndarray:
        if self.steps_done + 1 >= self.late_step:  # the coming step is steps_done + 1
            return np.ones(self.n_train, dtype=bool)
        return ~self._late

    def rollout(self, batch: pd.DataFrame, step: int) -> pd.DataFrame:
        held_back = ~self.available_tasks()
        if held_back.any():  # the batch's tasks are looked up only while some are held back
            asked = held_back[self._rows_of(batch["task_id"])]
            if asked.any():
                raise ValueError(
                    f"WorldSimulator: task(s) {batch['task_id'].to_numpy()[asked][:3].tolist()} join the pool at "
                    f"step {self.late_step}, not before (step {self.steps_done + 1})."
                )
        out = super().rollout(batch, step)  # every group drawn, so the reward stream is the same either way
        if not self._lost.any() and not self.dropped and not self._rollout_loss.any():
            return out
        pos = self._rows_of(out["task_id"])
        gone = self._lost[self._train_rows[pos]]
        if self.dropped:  # per (step, task), from a stream of its own: the same in every round of a step
            draw = np.random.default_rng(np.random.SeedSequence([self.seed, 15, int(step)])).random(
                self.n_train
            )
            gone |= draw[pos] < self.dropped
        if self._rollout_loss.any():  # per (step, task, rollout), from a stream of its own
            g = self.config.group_size
            draw = np.random.default_rng(np.random.SeedSequence([self.seed, 17, int(step)])).random(
                (self.n_train, g)
            )
            j = np.arange(len(out)) % g  # the rollout's number within its group
            gone |= draw[pos, j] < self._rollout_loss[self._train_rows[pos]]
        return out.loc[~gone].reset_index(drop=True)

    @property
    def flaky_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of the flaky ones (oracle; for metrics and tests)."""
        return self._flaky[self._train_rows]

    @property
    def inverted_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those whose verifier is inverted (oracle)."""
        return self._inverted[self._train_rows]

    @property
    def broken_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those whose verifier never passes (oracle)."""
        return self._broken[self._train_rows]

    @property
    def lost_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those whose groups never come back (oracle)."""
        return self._lost[self._train_rows]

    @property
    def floored_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those whose reward has a floor (`floor_envs`; oracle)."""
        return self._floored[self._train_rows]

    @property
    def capped_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those whose full pass scores `CEILING` (oracle)."""
        return self._capped[self._train_rows]

    @property
    def slow_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of the `slow` ones, which lose most rollouts (oracle)."""
        return self._slow[self._train_rows]

    @property
    def out_of_reach_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of the environments settled out of reach (oracle)."""
        return self._settled[self._train_rows] > 0

    @property
    def outage_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of the environments the outage takes down (oracle)."""
        return self._down[self._train_rows]

    @property
    def outage_end(self) -> int:
        """The first step after the outage, when every environment is back."""
        return self.outage_step + self.outage_steps

    def in_outage(self) -> bool:
        """Whether the coming step (``steps_done`` + 1) is one of the outage's."""
        return self.outage > 0 and 0 <= self.steps_done + 1 - self.outage_step < self.outage_steps

    def _success(self, rows: np.ndarray) -> np.ndarray:
        """Expected reward of each task under its verifier (for a binary one, the success probability)."""
        if self.chain:
            return self._chain_moments(rows)[0]
        p = super()._success(rows)
        if self.inverted:  # each check passes exactly when the true one fails
            p = np.where(self._inverted[rows], 1.0 - p, p)
        if self._has_flaky:
            p = np.where(self._flaky[rows], self._flaky_rate[rows], p)
        if self.in_outage():
            p = np.where(self._down[rows], 0.0, p)
        return np.where(self._broken[rows], 0.0, p) if self.broken else p

    # ---- multi-step tasks (chain) ------------------------------------------------------------------
    def _call_success(self, rows: np.ndarray) -> np.ndarray:
        """q: the chance that one gold call of the task succeeds."""
        return 1.0 / (1.0 + np.exp(-(self._logit(rows) + self._call_offset[rows])))

    def _chain_moments(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(E[r], Var[r]) of one rollout: k calls pass before the first failure, P(k = j) = q^j (1 - q) for
        j < n and q^n at j = n; r = k / n (graded) or [k = n] (binary)."""
        q, n = self._call_success(rows), self._calls[rows]
        j = np.arange(int(n.max()) + 1)[None, :]
        prob = np.where(j < n[:, None], q[:, None] ** j * (1 - q[:, None]), 0.0)
        prob[np.arange(len(rows)), n] = q**n
        r = np.where(self._graded[rows][:, None], j / n[:, None], (j == n[:, None]).astype(float))
        mean = (prob * r).sum(axis=1)
        return mean, np.maximum((prob * r * r).sum(axis=1) - mean**2, 0.0)

    def expected_variance(self) -> np.ndarray:
        g = self.config.group_size
        if self.chain:
            return self._chain_moments(self._train_rows)[1] * (g - 1) / g
        if self.noise:  # each check reads its flipped value with probability noise
            variance = self._group_variance(
                self.noise + (1 - 2 * self.noise) * self._success(self._train_rows)
            )
        elif self.group_sd:  # over the group's shift, 9-point Gauss-Hermite
            p = self._success(self._train_rows)
            nodes, weights = np.polynomial.hermite_e.hermegauss(9)
            variance = (
                sum(
                    w * self._group_variance(_shifted(p, self.group_sd * x))
                    for x, w in zip(nodes, weights, strict=True)
                )
                / weights.sum()
            )
        else:
            variance = super().expected_variance()
        # a judged task scores its level with the judge's spread (nothing while down or broken)
        if self.judged:
            judging = self._judged[self._train_rows] & (self._success(self._train_rows) > 0)
            variance = np.where(judging, JUDGE_SD**2 * (g - 1) / g, variance)
        return self._reward_span[self._train_rows] ** 2 * variance

    def _group_success(self, rows: np.ndarray) -> np.ndarray:
        p = super()._group_success(rows)
        if not self.group_sd:
            return p
        # one shift per (step, task), from a stream of its own: every round of a step sees the same
        step = np.random.default_rng(np.random.SeedSequence([self.seed, 20, self.steps_done + 1]))
        return _shifted(p, step.normal(0.0, self.group_sd, len(self._task_env))[rows][:, None])

    def _draw_rewards(self, rows: np.ndarray) -> np.ndarray:
        if self.chain:
            return self._chain_rewards(rows)
        reward = super()._draw_rewards(rows)
        reward = self._misread(rows, reward) if self.noise else reward
        if self.floor_envs or self.ceiling_envs:  # FLOOR for a failed attempt, or CEILING for a pass
            reward = self._reward_low[rows][:, None] + self._reward_span[rows][:, None] * reward
        if not self.judged:
            return reward
        level = self._success(rows)  # the judge's level; 0 while down or broken, where no rollout scores
        jitter = level[:, None] + JUDGE_SD * self.rng.normal(size=reward.shape)
        judging = (self._judged[rows] & (level > 0))[:, None]
        return np.where(judging, np.clip(jitter, 0.0, 1.0), reward)

    @property
    def judged_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those scored by the policy-blind judge (oracle)."""
        return self._judged[self._train_rows]

    def _chain_rewards(self, rows: np.ndarray) -> np.ndarray:
        g, q, n = self.config.group_size, self._call_success(rows), self._calls[rows]
        calls = np.arange(int(n.max()))[None, None, :] < n[:, None, None]
        passed = np.cumprod(self.rng.random((len(rows), g, calls.shape[2])) < q[:, None, None], axis=2)
        k = (passed * calls).sum(axis=2)  # calls passed before the first failure
        return np.where(self._graded[rows][:, None], k / n[:, None], (k == n[:, None]).astype(float))

    def _group_signal(self, rows: np.ndarray, reward: np.ndarray, std: np.ndarray) -> np.ndarray:
        if (
            self.floor_envs or self.ceiling_envs
        ):  # the push is the outcome's spread, not the rescaled reward's
            std = std / self._reward_span[rows]
        if self.noise:
            return super()._group_signal(rows, reward, std) * self._reward_information(rows)
        if not self.chain:
            return super()._group_signal(rows, reward, std)
        q, n = self._call_success(rows)[:, None], self._calls[rows][:, None]
        # d log pi / d logit of a rollout that passed k calls, then failed one (or passed all n)
        k_graded = np.rint(reward * n)
        j = np.arange(int(n.max()))[None, :]
        k_failed = (np.where(j < n, j * q**j, 0.0).sum(axis=1, keepdims=True) * (1 - q)) / np.maximum(
            1 - q**n, 1e-12
        )
        k = np.where(self._graded[rows][:, None], k_graded, np.where(reward >= 1, n, k_failed))
        score = k * (1 - q) - q * (k < n)
        # NaN past a short group's end (`Simulator._groups`)
        advantage = (reward - np.nanmean(reward, axis=1, keepdims=True)) / std[:, None]
        return np.nanmean(advantage * score, axis=1) / n[:, 0]

    # ---- noisy verifiers ---------------------------------------------------------------------------
    def _misread(self, rows: np.ndarray, reward: np.ndarray) -> np.ndarray:
        """Flip each check's outcome (the pass of a binary verifier, each partial check of a graded one) with
        probability ``noise``: a verifier that errs both ways, as an LLM judge or a flaky test does."""
        k, eps = self.config.graded_checks, self.noise
        flipped = np.where(self.rng.random(reward.shape) < eps, 1.0 - reward, reward)
        passed = np.rint(reward * k).astype(np.int64)
        checks = (self.rng.binomial(passed, 1 - eps) + self.rng.binomial(k - passed, eps)) / k
        return np.where(self._graded[rows][:, None], checks, flipped)

    def _reward_information(self, rows: np.ndarray) -> np.ndarray:
        """P(pass | read pass) - P(pass | read fail) of one check at the task's success rate p. The policy
        gradient of a group with noisy rewards, given what was read, is its noise-free push (std of what was
        read) times this: a read check is only that informative about what the policy did."""
        p, eps = self._success(rows), self.noise
        read_pass = p * (1 - eps) / (p * (1 - eps) + (1 - p) * eps)
        read_fail = p * eps / (p * eps + (1 - p) * (1 - eps))
        return read_pass - read_fail

    def _push_direction(self, rows: np.ndarray, push: np.ndarray) -> np.ndarray:
        if self.inverted:  # the advantage favours the wrong attempt: every skill moves the wrong way
            push = np.where(self._inverted[rows][:, None], -push, push)
        if not self._has_flaky or not self._flaky[rows].any():
            return push
        noise = self.rng.normal(size=push.shape)
        return np.where(self._flaky[rows][:, None], push * noise, push)

    def drift(self) -> None:
        super().drift()
        if self.forget > 0:  # shared skills decay toward where they started
            n_shared = self._off_task
            self.theta[:n_shared] -= self.forget * (self.theta[:n_shared] - self._theta0[:n_shared])
        self._set_steps_done(self.steps_done + 1)  # at shift_step the environments are updated

    def catalog_frame(self) -> pd.DataFrame:
        frame = super().catalog_frame()
        if self.env_labels:  # contiguous blocks of environments share one id (a benchmark's)
            label = self._task_env[self._train_rows] * self.env_labels // self.config.n_envs
            frame["env_id"] = [f"bench{j:0{len(str(self.env_labels))}d}" for j in label]
        if self.task_env_ids:  # every task its own environment (a sandbox per task)
            frame["env_id"] = frame["task_id"]
        if not self.scramble:
            return frame
        perm = np.random.default_rng(np.random.SeedSequence([self.seed, 2])).permutation(len(frame))
        for column in SCRAMBLED_COLUMNS:
            frame[column] = frame[column].to_numpy()[perm]
        return frame


@dataclass(frozen=True)
class Regime:
    """How worlds are drawn: a simulator config plus batch size, forgetting and catalogue scrambling."""

    name: str
    description: str
    config: SimConfig
    batch_size: int = 32
    forget: float = 0.0
    scramble: bool = False
    flaky: float = 0.0
    """Share of training tasks with a policy-blind (coin-flip) verifier; see `WorldSimulator`."""
    flaky_envs: float = 0.0
    """Share of environments whose every training task has a policy-blind verifier; see `WorldSimulator`."""
    late_envs: float = 0.0
    """Share of environments whose training tasks join the catalogue at ``late_step``; see `WorldSimulator`."""
    late_step: int = 10
    env_labels: int = 0
    """How many environment ids the catalogue shows (0: each environment its own); see `WorldSimulator`."""
    task_env_ids: bool = False
    """The catalogue gives every task an environment id of its own; see `WorldSimulator`."""
    unseen_envs: float = 0.0
    """Share of environments held out of training whole, the held-out score theirs alone; see `WorldSimulator`."""
    broken: float = 0.0
    """Share of training tasks whose verifier never passes (a wrong gold answer); see `WorldSimulator`."""
    outage: float = 0.0
    """Share of environments whose every rollout scores 0 over ``outage_steps`` steps from step 11 (sandboxes down);
    see `WorldSimulator`."""
    outage_steps: int = 10
    """How many steps the outage lasts; see `WorldSimulator`."""
    duplicates: float = 0.0
    """Share of training tasks that are copies of another task of their environment; see `WorldSimulator`."""
    lookalikes: float = 0.0
    """Share of training tasks that look like another task of their environment but are as hard as their own
    draw; see `WorldSimulator`."""
    judged: float = 0.0
    """Share of environments scored by a judge blind to the policy, with a small spread; see `WorldSimulator`."""
    lost: float = 0.0
    """Share of training tasks whose groups never come back (dropped by the trainer); see `WorldSimulator`."""
    lost_envs: float = 0.0
    """Share of environments whose every group never comes back; see `WorldSimulator`."""
    dropped: float = 0.0
    """Chance that any one group is dropped (transient: a timeout at one step only); see `WorldSimulator`."""
    partial: float = 0.0
    """Chance that any one rollout is lost, so its group comes back short; see `WorldSimulator`."""
    slow: float = 0.0
    """Share of training tasks that lose each rollout with chance `SLOW_LOSS`; see `WorldSimulator`."""
    group_sd: float = 0.0
    """sd (logits) of the shift every group's rollouts share; see `WorldSimulator`."""
    inverted: float = 0.0
    """Share of training tasks whose verifier passes what the true one fails; see `WorldSimulator`."""
    settled_envs: float = 0.0
    """Share of environments `SETTLED` logits easier or harder than drawn from the start; see `WorldSimulator`."""
    floor_envs: float = 0.0
    """Share of environments whose reward is `FLOOR` + (1 - `FLOOR`) x the verifier's score; see `WorldSimulator`."""
    ceiling_envs: float = 0.0
    """Share of environments whose reward is `CEILING` x the verifier's score; see `WorldSimulator`."""
    shift: float = 0.0
    """Share of environments whose tasks get harder or easier by 2.5 logits after step 30; see `WorldSimulator`."""
    chain: bool = False
    """Multi-step tasks: a rollout stops at its first failing gold call; see `WorldSimulator`."""
    noise: float = 0.0
    """Chance that a verifier misreads a check (both ways); see `WorldSimulator`."""
    quick_config: SimConfig | None = None
    """A smaller config for quick runs (e.g. the 100k-task regime at 10k); None = the same as `config`."""
    tags: tuple[str, ...] = field(default=())
    """'shared' marks regimes where tasks share structure (the target there is strictly fewer rollouts)."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} must be >= 1")

    def sim_config(self, quick: bool = False) -> SimConfig:
        return self.quick_config if (quick and self.quick_config is not None) else self.config

    def world(self, seed: int, quick: bool = False) -> Simulator:
        """World number ``seed`` of this regime."""
        config = self.sim_config(quick)
        mechanisms = {
            "forget": self.forget,
            "scramble": self.scramble,
            "flaky": self.flaky,
            "flaky_envs": self.flaky_envs,
            "late_envs": self.late_envs,
            "env_labels": self.env_labels,
            "task_env_ids": self.task_env_ids,
            "unseen_envs": self.unseen_envs,
            "broken": self.broken,
            "outage": self.outage,
            "duplicates": self.duplicates,
            "lookalikes": self.lookalikes,
            "judged": self.judged,
            "lost": self.lost,
            "lost_envs": self.lost_envs,
            "dropped": self.dropped,
            "partial": self.partial,
            "slow": self.slow,
            "floor_envs": self.floor_envs,
            "ceiling_envs": self.ceiling_envs,
            "settled_envs": self.settled_envs,
            "group_sd": self.group_sd,
            "inverted": self.inverted,
            "shift": self.shift,
            "chain": self.chain,
            "noise": self.noise,
        }
        if not any(mechanisms.values()):  # none of WorldSimulator's mechanisms: the plain simulator
            return Simulator(config, seed)
        return WorldSimulator(
            config, seed, late_step=self.late_step, outage_steps=self.outage_steps, **mechanisms
        )


def by_name(*regimes: Regime) -> dict[str, Regime]:
    """Regimes keyed by name; a name given twice is an error (a dict would keep the last silently)."""
    out: dict[str, Regime] = {}
    for regime in regimes:
        if regime.name in out:
            raise ValueError(f"regime name {regime.name!r} is given twice")
        out[regime.name] = regime
    return out


# The base world: 60 environments x 24 tasks (1,440 training tasks), 6 skill families, B = 32, G = 8.
BASE = SimConfig(n_envs=60, tasks_per_env=24, heldout_per_env=6, n_families=6, n_tool_types=72)

REGIMES: dict[str, Regime] = by_name(
    Regime("default", "base world: shared and private difficulty mixed, 30% graded", BASE, tags=("shared",)),
    Regime(
        "shared",
        "difficulty mostly shared (environment, tool, family); small private part",
        replace(BASE, w_task=0.1, difficulty_sd=0.3, sd_env=1.4, sd_type=1.2),
        tags=("shared",),
    ),
    Regime(
        "private",
        "difficulty mostly private to the task; weak shared skills",
        replace(BASE, w_env=0.3, w_type=0.15, w_fam=0.1, w_task=0.6, difficulty_sd=2.0, sd_env=0.6),
    ),
    Regime(
        "paper",
        "the paper's Table 2 regime: random's mean selected variance ~0.03, median reward ~0.6 "
        "(85% graded verifiers, wide difficulty spread: most groups all-pass or all-fail)",
        replace(BASE, graded_share=0.85, d0=-1.7, difficulty_sd=3.2, sd_env=2.0, lr=3.0),
        tags=("shared",),
    ),
    Regime(
        "sparse",
        "sparse binary rewards: most groups all-fail, random's mean selected variance ~0.04",
        replace(BASE, d0=2.6, graded_share=0.0),
        tags=("shared",),
    ),
    Regime(
        "graded",
        "every verifier gives partial credit (reward = passed checks / 4)",
        replace(BASE, graded_share=1.0),
        tags=("shared",),
    ),
    Regime(
        "drift",
        "fast learning, strong drift and forgetting of untrained skills",
        replace(BASE, lr=12.0, drift=0.05),
        forget=0.02,
        tags=("shared",),
    ),
    Regime(
        "few-large",
        "8 large environments x 180 tasks",
        replace(BASE, n_envs=8, tasks_per_env=180, heldout_per_env=30),
        tags=("shared",),
    ),
    Regime(
        "many-small",
        "360 small environments x 4 tasks",
        replace(BASE, n_envs=360, tasks_per_env=4, heldout_per_env=2),
        tags=("shared",),
    ),
    Regime(
        "no-info",
        "embedding and signatures scrambled across tasks: they carry no information",
        BASE,
        scramble=True,
    ),
    Regime(
        "flaky",
        "attack: 10% of the training tasks have a coin-flip verifier (reward independent of the "
        "policy, the most variance a group can show, no learning signal)",
        BASE,
        flaky=0.1,
        tags=("shared",),
    ),
    Regime(
        "shift",
        "attack: after step 30, a third of the environments are updated and every task in them gets "
        "2.5 logits harder or easier (training and held-out alike); history about them goes stale at once",
        BASE,
        shift=1 / 3,
        tags=("shared",),
    ),
    Regime(
        "large",
        "500 environments x 200 tasks (100k; 10k = 100 x 100 in quick mode), B = 64",
        replace(BASE, n_envs=500, tasks_per_env=200, heldout_per_env=4, n_tool_types=96, n_families=12),
        batch_size=64,
        quick_config=replace(BASE, n_envs=100, tasks_per_env=100, heldout_per_env=4, n_tool_types=96),
        tags=("shared",),
    ),
)

PAPER = REGIMES["paper"].config

# Held-out variations, never used to tune EnvSched: other group and batch sizes, other reward shapes, and
# attacks combined with each other or with the paper's regime. Not part of the suite's default summary;
# `bench/scheduler_suite.py --regimes stress` runs them.
STRESS_REGIMES: dict[str, Regime] = by_name(
    Regime(
        "easy",
        "easier tasks: initial success ~0.25 (the base world ~0.06)",
        replace(BASE, d0=0.2),
        tags=("shared",),
    ),
    Regime("g4", "base world with G = 4 rollouts per task", replace(BASE, group_size=4), tags=("shared",)),
    Regime("g16", "base world with G = 16", replace(BASE, group_size=16), tags=("shared",)),
    Regime(
        "g2",
        "base world with G = 2: a group is mixed only when its two rollouts differ",
        replace(BASE, group_size=2),
        tags=("shared",),
    ),
    Regime(
        "b128",
        "base world with B = 128 (9% of the catalogue per step)",
        BASE,
        batch_size=128,
        tags=("shared",),
    ),
    Regime(
        "k10",
        "half the verifiers graded with 10 partial checks",
        replace(BASE, graded_share=0.5, graded_checks=10),
        tags=("shared",),
    ),
    Regime("slow", "slow learning (lr = 2)", replace(BASE, lr=2.0), tags=("shared",)),
    Regime("paper-g4", "the paper's regime with G = 4", replace(PAPER, group_size=4), tags=("shared",)),
    Regime("paper-b64", "the paper's regime with B = 64", PAPER, batch_size=64, tags=("shared",)),
    Regime("noinfo-flaky", "scrambled catalogue and 10% coin-flip verifiers", BASE, scramble=True, flaky=0.1),
    Regime(
        "flaky-envs",
        "attack: 6 of the 60 environments are broken (every training task's verifier a coin flip, no "
        "learning signal); their neighbours and their environment's level all say 'mixed'",
        BASE,
        flaky_envs=0.1,
        tags=("shared",),
    ),
    Regime(
        "late-envs",
        "a third of the environments join the catalogue at step 10 (a benchmark added mid-campaign); "
        "every scheduler is rebuilt then from the campaign's history",
        BASE,
        late_envs=1 / 3,
        tags=("shared",),
    ),
    Regime(
        "uneven",
        "uneven environments: sizes ~ k^-1.2, the largest ~400 of the 1,440 training tasks, most under 20",
        replace(BASE, env_size_skew=1.2),
        tags=("shared",),
    ),
    Regime(
        "coarse-envs",
        "the catalogue names 6 benchmarks, not the 60 environments (one env_id per benchmark, as a user "
        "registering BFCL or tau-bench whole); tool names still carry the true environment",
        BASE,
        env_labels=6,
        tags=("shared",),
    ),
    Regime(
        "task-envs",
        "every task has an environment id of its own (a sandbox per task, registered as its environment); "
        "tool names still carry the true environment",
        BASE,
        task_env_ids=True,
        tags=("shared",),
    ),
    Regime(
        "unseen-envs",
        "held-out environments: 12 of the 60 environments are never trained on and the held-out score is "
        "theirs alone (train on some benchmarks, evaluate on others); only tool types and families transfer",
        BASE,
        unseen_envs=0.2,
        tags=("shared",),
    ),
    Regime(
        "broken",
        "a fifth of the training tasks have a wrong gold answer: their verifier never passes, whatever the "
        "policy does (the label errors audits of agent benchmarks report); they look like hard tasks",
        BASE,
        broken=0.2,
        tags=("shared",),
    ),
    Regime(
        "outage",
        "a quarter of the environments' sandboxes are down over steps 11-20: every rollout there scores 0 (a "
        "crashed sandbox scored 0), then they come back as they were",
        BASE,
        outage=0.25,
        tags=("shared",),
    ),
    Regime(
        "outage-all",
        "every environment's sandbox is down over steps 11-13 (the reward service fails): every rollout "
        "scores 0, then all come back as they were",
        BASE,
        outage=1.0,
        outage_steps=3,
        tags=("shared",),
    ),
    Regime(
        "duplicates",
        "half the training tasks are copies of another task of their environment (a template filled in "
        "again): the same skills and difficulty, a near-copy embedding; a batch can hold one task twice",
        BASE,
        duplicates=0.5,
        tags=("shared",),
    ),
    Regime(
        "lookalikes",
        "half the training tasks look like another task of their environment (the same tools, calls and turns, a "
        "near-copy embedding: a template filled in with other values) but are as hard as their own values make "
        "them: the catalogue says 'the same task', the outcomes do not",
        BASE,
        lookalikes=0.5,
        tags=("shared",),
    ),
    Regime(
        "judged",
        "a fifth of the environments are scored by a judge blind to the policy: each task a fixed score "
        "q ~ U(0.3, 0.7) plus N(0, 0.02^2) per rollout, so every group shows a little spread and teaches nothing",
        BASE,
        judged=0.2,
        tags=("shared",),
    ),
    Regime(
        "lost",
        "a tenth of the training tasks never get a group back (each rollout hangs past the timeout and the "
        "trainer drops the group): the scheduler observes nothing of them, the rollouts are spent",
        BASE,
        lost=0.1,
        tags=("shared",),
    ),
    Regime(
        "lost-envs",
        "a tenth of the environments never get a group back (a sandbox image that hangs every rollout; the "
        "trainer drops the groups)",
        BASE,
        lost_envs=0.1,
        tags=("shared",),
    ),
    Regime(
        "dropped",
        "each group is dropped with chance 0.1 (a transient timeout: the task answers at another step); the "
        "cost of a rule against groups that never come back",
        BASE,
        dropped=0.1,
        tags=("shared",),
    ),
    Regime(
        "partial",
        "each rollout is lost with chance 0.25 (past the runner's timeout, dropped rather than scored 0): "
        "groups come back short, their spread read from fewer rewards",
        BASE,
        partial=0.25,
        tags=("shared",),
    ),
    Regime(
        "slow-tasks",
        "a fifth of the training tasks are slow: each of their rollouts is lost with chance 0.75, so their "
        "groups come back with about 2 of 8 rewards, often one, and teach little",
        BASE,
        slow=0.2,
        tags=("shared",),
    ),
    Regime(
        "inverted",
        "a fifth of the training tasks have an inverted verifier: it passes what the true one fails (a wrong gold "
        "answer the policy can match), so their groups are mixed and learnable, and GRPO on them moves every skill "
        "they share the wrong way",
        BASE,
        inverted=0.2,
        tags=("shared",),
    ),
    Regime(
        "floor",
        "half the environments give 0.2 for a failed, well-formed attempt (reward = 0.2 + 0.8 x the verifier's "
        "score, as a format reward adds): an all-fail group scores 0.2 there, 0 elsewhere",
        BASE,
        floor_envs=0.5,
        tags=("shared",),
    ),
    Regime(
        "ceiling",
        "half the environments pay a full pass 0.8 (reward = 0.8 x the verifier's score: a cost or step penalty "
        "every successful trajectory pays): no rollout there ever scores 1",
        BASE,
        ceiling_envs=0.5,
        tags=("shared",),
    ),
    Regime(
        "settled",
        "nine environments in ten are settled from the start, 6 logits easier (mastered) or harder (out of reach) "
        "than drawn: what is left to learn sits in the other six and at the edge of the mastered ones (a policy "
        "that has already trained on most of its catalogue)",
        BASE,
        settled_envs=0.9,
        tags=("shared",),
    ),
    Regime(
        "grouped",
        "a group's rollouts share its conditions (one sandbox, one seeded initial state): every group draws one "
        "logit shift ~ N(0, 1.5^2) for all its G rollouts, so groups come back all-pass or all-fail more often "
        "than the success rate says and say less about it",
        BASE,
        group_sd=1.5,
        tags=("shared",),
    ),
    Regime(
        "three-envs",
        "3 environments x 480 tasks: under the configured quota (7 at B = 32) they cannot fill a batch",
        replace(BASE, n_envs=3, tasks_per_env=480, heldout_per_env=120),
        tags=("shared",),
    ),
    Regime(
        "chain",
        "multi-step tasks: a rollout stops at its first failing gold call; graded verifiers (30%) score the "
        "share of calls passed (progress along a sequence, not independent checks)",
        replace(BASE, d0=1.2),
        chain=True,
        tags=("shared",),
    ),
    Regime(
        "chain-graded",
        "multi-step tasks, every verifier graded by the share of calls passed before the first failure",
        replace(BASE, d0=1.2, graded_share=1.0),
        chain=True,
        tags=("shared",),
    ),
    Regime(
        "noisy",
        "verifiers misread 10% of checks both ways (an LLM judge, a flaky test): all-fail tasks show mixed "
        "groups that carry no signal",
        BASE,
        noise=0.1,
        tags=("shared",),
    ),
    Regime(
        "sparse-noisy",
        "sparse binary rewards read with 10% errors: most mixed groups are misreads of all-fail tasks",
        REGIMES["sparse"].config,
        noise=0.1,
        tags=("shared",),
    ),
    Regime(
        "paper-shift",
        "the paper's regime with a third of the environments updated at step 30",
        PAPER,
        shift=1 / 3,
        tags=("shared",),
    ),
)
ALL_REGIMES: dict[str, Regime | LatentRegime] = by_name(
    *REGIMES.values(), *STRESS_REGIMES.values(), *LATENT_REGIMES.values()
)

# Compound attacks (session 40): a suite world with two or three of the stress regimes' attacks at once, drawn at
# random, so that the evaluation holds worlds no rule was written against. `compound-D-I` is regime I of draw D.
COMPOUND_BASES = (
    "default",
    "shared",
    "private",
    "paper",
    "sparse",
    "graded",
    "drift",
    "few-large",
    "many-small",
)
COMPOUND_ATTACKS = (
    "flaky", "flaky-envs", "broken", "inverted", "judged", "duplicates", "lookalikes", "lost", "lost-envs",
    "dropped", "partial", "slow-tasks", "floor", "ceiling", "settled", "grouped", "noisy", "no-info",
    "coarse-envs", "task-envs", "late-envs", "unseen-envs", "shift", "outage", "chain",
)  # fmt: skip
COMPOUND_PER_DRAW = 24
COMPOUND_REPORT_DRAW = 1
"""`--regimes compound` runs this draw; draw 0 is for tuning."""
_NOT_MECHANISMS = {"name", "description", "config", "batch_size", "quick_config", "tags"}
_CONFIG_FIELDS = tuple(SimConfig.__dataclass_fields__)


def attack_fields(name: str) -> dict[str, Any]:
    """The mechanisms (Regime fields other than the simulator config) in which attack regime ``name`` differs from
    a plain regime."""
    regime, plain = ALL_REGIMES[name], Regime("plain", "", BASE)
    return {
        f: getattr(regime, f)
        for f in regime.__dataclass_fields__
        if f not in _NOT_MECHANISMS and getattr(regime, f) != getattr(plain, f)
    }


def regime_setting(part: str) -> tuple[str, Any]:
    """(field, value) of a regime name's ``field=value`` part, typed as the field's default: a `Regime` mechanism at a
    strength of the caller's (``flaky=0.5``, ``settled_envs=0.98``, ``chain=true``), the batch size
    (``batch_size=64``) or a `SimConfig` field of the world (``group_size=4``, ``lr=3``, ``n_envs=20``). Raises
    ValueError naming the field or the value when either is not one."""
    name, _, text = part.partition("=")
    plain = Regime("plain", "", BASE)
    settable = (set(plain.__dataclass_fields__) - _NOT_MECHANISMS) | {"batch_size"} | set(_CONFIG_FIELDS)
    if name not in settable:
        raise ValueError(
            f"{part!r}: {name!r} is neither a regime mechanism nor a world setting; one of {sorted(settable)}"
        )
    kind = type(getattr(BASE if name in _CONFIG_FIELDS else plain, name))
    try:
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return name, text.lower() == "true"
        return name, kind(text)
    except ValueError:
        wanted = {bool: "true or false", int: "an integer"}.get(kind, "a number")
        raise ValueError(f"{part!r}: {name} must be {wanted}, got {text!r}") from None


def combined_regime(
    name: str, base: str, attacks: list[str], settings: Sequence[tuple[str, Any]] = ()
) -> Regime:
    """Suite regime ``base`` with the mechanisms of the attack regimes ``attacks`` at their stress strength, and
    ``settings`` (`regime_setting`'s (field, value) pairs) as given. Raises ValueError where two parts set one
    field or the simulator refuses the combination."""
    mechanisms: dict[str, Any] = {}
    for attack in attacks:
        fields = attack_fields(attack)
        if not fields or set(fields) & set(mechanisms):
            raise ValueError(f"{attack!r} adds no mechanism of its own")
        mechanisms.update(fields)
    named = [f for f, _ in settings]
    if set(named) & set(mechanisms):
        raise ValueError(f"{sorted(set(named) & set(mechanisms))} set by an attack and again by name")
    if len(set(named)) < len(named):
        raise ValueError(f"{sorted({f for f in named if named.count(f) > 1})} set twice")
    settings = dict(settings)
    world = {k: v for k, v in settings.items() if k in _CONFIG_FIELDS}
    plain = REGIMES[base]
    quick = None if plain.quick_config is None else replace(plain.quick_config, **world)
    parts = [base, *attacks, *(f"{k}={v}" for k, v in settings.items())]
    regime = replace(
        plain,
        name=name,
        description=" + ".join(parts),
        tags=(),
        config=replace(plain.config, **world),
        quick_config=quick,
        **mechanisms,
        **{k: v for k, v in settings.items() if k not in world},
    )
    regime.world(0, quick=True)  # the simulator's own checks
    return regime


def compound_regime(draw: int, index: int) -> Regime:
    """Regime ``index`` of compound draw ``draw``: a base world of `COMPOUND_BASES` with 2 or 3 attacks of
    `COMPOUND_ATTACKS`. A combination the simulator refuses (e.g. chain tasks with noisy checks) is drawn again
    from the next stream, so a name always means the same world."""
    for attempt in range(100):
        rng = np.random.default_rng([40, draw, index, attempt])
        base = COMPOUND_BASES[int(rng.integers(len(COMPOUND_BASES)))]
        attacks = sorted(rng.choice(COMPOUND_ATTACKS, size=int(rng.integers(2, 4)), replace=False))
        try:
            return combined_regime(f"compound-{draw}-{index}", base, attacks)
        except ValueError:
            continue
    raise ValueError(f"compound draw {draw}, regime {index}: no valid combination in 100 tries")


# Wild worlds (session 44): a suite base world with one or two of its settings and one to three attacks, each at a
# value drawn at random over a wide range, so that the evaluation holds worlds whose shape and strengths no rule was
# written against. `wild-D-I` is regime I of draw D; it resolves to an explicit `base+field=value+...` name.
WILD_PER_DRAW = 24
WILD_REPORT_DRAW = 1
"""`--regimes wild` runs this draw; draw 0 is for tuning."""
# A world setting: the values to choose from (the base worlds' G is 8 and B is 32), or a (low, high) float range.
WILD_SETTINGS: dict[str, tuple] = {
    "group_size": (4, 16),
    "batch_size": (16, 64),
    "lr": (1.5, 12.0),
    "difficulty_sd": (0.5, 4.0),
    "graded_share": (0.0, 1.0),
    "d0": (-2.0, 3.0),
    "embed_noise": (0.2, 3.0),
    "w_task": (0.1, 1.2),
    "sd_env": (0.4, 2.0),
    "drift": (0.0, 0.05),
}
# An attack mechanism: its (low, high) strength, from mild to well past its stress regime's.
WILD_ATTACKS: dict[str, tuple] = {
    "flaky": (0.05, 0.5),
    "flaky_envs": (0.05, 0.3),
    "broken": (0.05, 0.6),
    "inverted": (0.05, 0.4),
    "judged": (0.1, 0.6),
    "duplicates": (0.1, 0.9),
    "lookalikes": (0.1, 0.9),
    "lost": (0.05, 0.5),
    "lost_envs": (0.05, 0.3),
    "dropped": (0.05, 0.3),
    "partial": (0.05, 0.7),
    "slow": (0.05, 0.5),
    "group_sd": (0.3, 3.0),
    "settled_envs": (0.2, 0.98),
    "floor_envs": (0.1, 0.6),
    "ceiling_envs": (0.1, 0.6),
    "shift": (0.1, 0.6),
    "noise": (0.02, 0.25),
    "outage": (0.1, 0.6),
    "late_envs": (0.1, 0.5),
    "unseen_envs": (0.1, 0.3),
    "forget": (0.005, 0.03),
}


def _wild_value(rng: np.random.Generator, spec: tuple) -> Any:
    """A value of a `WILD_SETTINGS` / `WILD_ATTACKS` spec: one of its integer choices, or uniform over its float
    range rounded to 3 significant digits (so the explicit name reproduces the world exactly)."""
    if all(isinstance(v, int) for v in spec):
        return spec[int(rng.integers(len(spec)))]
    return float(f"{rng.uniform(*spec):.3g}")


def _wild_drawn(draw: int, index: int) -> Regime:
    """Regime ``index`` of wild draw ``draw``, named by its explicit parts (`base+field=value+...`). A combination
    the simulator refuses is drawn again from the next stream, so ``wild-D-I`` always names the same world."""
    for attempt in range(100):
        rng = np.random.default_rng([44, draw, index, attempt])
        base = COMPOUND_BASES[int(rng.integers(len(COMPOUND_BASES)))]
        settings = rng.choice(sorted(WILD_SETTINGS), size=int(rng.integers(1, 3)), replace=False)
        attacks = rng.choice(sorted(WILD_ATTACKS), size=int(rng.integers(1, 4)), replace=False)
        parts = [f"{f}={_wild_value(rng, WILD_SETTINGS[f])}" for f in sorted(settings)]
        parts += [f"{f}={_wild_value(rng, WILD_ATTACKS[f])}" for f in sorted(attacks)]
        try:
            return regime_named("+".join([base, *parts]))
        except KeyError:
            continue
    raise ValueError(f"wild draw {draw}, regime {index}: no valid combination in 100 tries")


def wild_name(draw: int, index: int) -> str:
    """The explicit name (`base+field=value+...`) of regime ``index`` of wild draw ``draw``."""
    return _wild_drawn(draw, index).name


def wild_regime(draw: int, index: int) -> Regime:
    """Regime ``index`` of wild draw ``draw``, named ``wild-D-I`` (its description lists the explicit parts)."""
    return replace(_wild_drawn(draw, index), name=f"wild-{draw}-{index}")


def wild_names(draw: int = WILD_REPORT_DRAW) -> list[str]:
    """The names of wild draw ``draw``."""
    return [f"wild-{draw}-{i}" for i in range(WILD_PER_DRAW)]


def regime_named(name: str) -> Regime | LatentRegime:
    """A regime of `ALL_REGIMES`, `compound-D-I`, `wild-D-I`, or `base+part+...`: a suite regime with stress attacks
    by name (`sparse+settled+inverted`), mechanisms at any strength (`default+flaky=0.5`, `paper+inverted=0.4+settled`) and
    other world settings (`paper+group_size=4+lr=3`; `regime_setting`).
    Raises KeyError for an unknown name or combination, with the reason where a part is wrong."""
    if name in ALL_REGIMES:
        return ALL_REGIMES[name]
    if is_drawn(name):
        kind, draw, index = name.split("-")
        return DRAWN[kind][0](int(draw), int(index))
    base, *parts = name.split("+")
    attacks = [p for p in parts if "=" not in p]
    if parts and base in REGIMES and all(a in ALL_REGIMES for a in attacks):
        try:
            settings = [regime_setting(p) for p in parts if "=" in p]
            return combined_regime(name, base, attacks, settings)
        except ValueError as error:
            raise KeyError(f"{name}: {error}") from None
    raise KeyError(name)


def compound_names(draw: int = COMPOUND_REPORT_DRAW) -> list[str]:
    """The names of compound draw ``draw``."""
    return [f"compound-{draw}-{i}" for i in range(COMPOUND_PER_DRAW)]


DRAWN: dict[str, tuple[Callable[[int, int], Regime], Callable[[int], list[str]]]] = {
    "compound": (compound_regime, compound_names),
    "wild": (wild_regime, wild_names),
}
"""The kinds of drawn regime, each (regime I of draw D, the names of draw D): `KIND-D-I` names one regime."""


def is_drawn(name: str) -> bool:
    """Whether ``name`` is a drawn regime, `KIND-D-I` for a kind of `DRAWN`."""
    parts = name.split("-")
    return len(parts) == 3 and parts[0] in DRAWN and parts[1].isdigit() and parts[2].isdigit()


def calibrate(regime: Regime, seeds: list[int], steps: int = 60, quick: bool = True) -> pd.DataFrame:
    """Random's Table-2 statistics over ``steps`` steps per world seed (mean over steps of batch stats)."""
    from .baselines import RandomScheduler
    from .simulator import run_campaign

    rows: list[dict[str, Any]] = []
    for seed in seeds:
        sim = regime.world(seed, quick)
        tasks = pd.DataFrame(
            {"task_id": sim.task_ids, "env_id": sim.env_names[sim._task_env[sim._train_rows]]}
        )
        sched = RandomScheduler(tasks, SimBatch(regime.batch_size, sim.config.group_size), seed=seed)
        m = run_campaign(sched, sim.reset(seed), steps)
        rows.append(
            {
                "seed": seed,
                "mean_var": m["mean_var"].mean(),
                "median_var": m["median_var"].mean(),
                "median_reward": m["median_reward"].mean(),
                "trained_share": m["trained_groups"].mean() / regime.batch_size,
                "heldout0": m.attrs["heldout0"],
                "heldout_end": m["heldout"].iloc[-1],
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class SimBatch:
    """The (batch_size, group_size) pair a baseline's config needs."""

    batch_size: int
    group_size: int
