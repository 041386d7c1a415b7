"""EnvSched: online environment-aware batch selection (EnvSched, Yang et al., 2026, "Scheduler").

    sched = EnvSched(catalog, SchedulerConfig(batch_size=64, group_size=8), seed=0)
    batch = sched.select(step)   # task_id, env_id, role ('exploit' | 'coverage'), predicted_variance
    sched.observe(rollouts)      # task_id, step, reward: one row per rollout
    sched.observe(group, more=True)  # a step's groups as each finishes: folded in once, at the call without it
    sched.predict()              # task_id, predicted_variance, uncertainty, own, within, cross, value, moves
    sched.warm_start(history)    # (a fresh scheduler) continue an earlier run's rollouts, on any catalogue

A batch of B tasks has (1 - rho_t) B exploitation slots, filled greedily by
    value_i / v_max - eta * max_{j chosen} sim(i, j)          (only tasks with evidence)
with value_i = v_hat_i times the frontier transfer factor (T_i / mean T)^transfer_weight (``frontier_transfer_factor``),
and coverage slots filled greedily by under-observation plus (informed coverage) optimistic predicted variance
    1/sqrt(1 + N_env) + 1/sqrt(1 + n_i) + 1/sqrt(1 + N_pattern) + bonus(environment / tools new to the batch)
    + coverage_informativeness * v_opt_i / max v_opt        (v_opt weighted by the same transfer factor).
v_hat comes from the outcome model (`outcome.OutcomeModel`: global feature model + own residual + residuals
propagated along W and X; docs/scheduler.md) or, with predictor='variance', the paper's fusion
(`predictor.VariancePredictor`). With adaptive rho, rho_t shrinks from rho toward rho_min as the top
predictions get confident. At most env_quota tasks of one environment (raised where few environments could
not fill B), no task twice, step 1 (no history) all coverage, no pilot rollouts. Both greedy passes run over a
pruned pool (top pool_factor * B by score, per-environment capped) so selection costs O(N) numpy work plus
O(B * pool) however large the catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .blind_environments import BlindEnvironments, sandboxes
from .catalog import TaskCatalog
from .check_correlation import CheckCorrelation
from .config import SchedulerConfig
from .delivered import DELIVERED_COLUMNS, DeliveredGroups
from .dispersion import TaskDispersion
from .env_calibration import EnvironmentCalibration
from .graph import (
    candidate_matrix,
    concatenated_ranges,
    cross_candidates,
    cross_signature,
    edges_from_frame,
    edges_to_frame,
    propagation_matrix,
    rank_cross_edges,
    rows_to_rerank,
    signature_patterns,
    similarity_matrix,
    within_edge_arrays,
)
from .held import HeldCalls
from .learnability import TaskLearnability
from .outcome import OutcomeModel, sigmoid
from .oversample import InformativeShare
from .predictor import VariancePredictor
from .progress import LearningProgress
from .refill import StepRounds
from .reward_range import RewardRange
from .short_groups import ShortGroups
from .silence import SilentTasks
from .solvability import TaskSolvability
from .state_fit import StateMismatch, check_catalog
from .stats import CORRECT_REWARD, TaskStats, group_outcomes, validate_rollouts

STATE_VERSION = 2
TIE_JITTER = 1e-9  # breaks exact score ties at random (seeded), never reorders distinct scores


@dataclass
class Predicted:
    """Selection inputs at one step: predicted variance, which tasks have evidence, own visit weight n_i,
    optimistic variance for informed coverage (None with the paper's predictor) and relative uncertainty."""

    v_hat: np.ndarray
    has_evidence: np.ndarray
    n: np.ndarray
    v_opt: np.ndarray | None
    uncertainty: np.ndarray
    blocked: np.ndarray  # tasks in a back-off after a silent selection (``silence_backoff``)
    variance: np.ndarray | None = None  # the predicted variance where v_hat is horizon-discounted
    transfer: np.ndarray | float = 1.0  # frontier transfer factor; informed coverage weighs v_opt by it


def filling_quota(env_sizes: np.ndarray, batch_size: int) -> int:
    """The smallest per-environment quota q with sum_e min(n_e, q) >= B (every task, when the catalogue holds
    fewer than B): the most even spread that still fills a batch from few or uneven environments."""
    sizes = np.asarray(env_sizes, dtype=np.int64)
    need = min(int(batch_size), int(sizes.sum()))
    lo, hi = 1, max(int(sizes.max(initial=1)), 1)
    while lo < hi:  # sum_e min(n_e, q) grows with q: bisect
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if np.minimum(sizes, mid).sum() >= need else (mid + 1, hi)
    return lo


def _prune(
    score: np.ndarray, candidates: np.ndarray, env: np.ndarray, room: np.ndarray, size: int, need: int = 0
) -> np.ndarray:
    """The top ``size`` candidates by score, at most room[e] per environment, best first; at least ``need`` of
    them when the candidates and the rooms allow it."""
    if len(candidates) > 4 * size:
        top = candidates[np.argpartition(-score[candidates], 4 * size - 1)[: 4 * size]]
        pool = _prune(score, top, env, room, size)
        # the cut is for speed; when a few environments hold all the top scores their rooms can leave the pool
        # short of the slots to fill, and only then are all the candidates ranked (exploitation reaching past
        # them, rather than leaving the slots to coverage, saved 3.4 steps in three-envs, tuning worlds 0-9)
        if len(pool) >= need:
            return pool
    candidates = candidates[np.argsort(-score[candidates], kind="stable")]
    e = env[candidates]
    by_env = np.argsort(e, kind="stable")
    sorted_env = e[by_env]
    starts = np.flatnonzero(np.r_[True, sorted_env[1:] != sorted_env[:-1]])
    rank = np.empty(len(candidates), dtype=np.int64)
    rank[by_env] = np.arange(len(candidates)) - np.repeat(starts, np.diff(np.r_[starts, len(candidates)]))
    return candidates[rank < room[e]][:size]


def horizon_discounted(value: np.ndarray, gold_calls: np.ndarray | None, discount: float) -> np.ndarray:
    """value_i / (1 + gold calls_i)^discount (``SchedulerConfig.horizon_discount``; identity at 0 or when the
    catalogue has no gold-call counts). A GRPO group's advantage is shared by every decision of a rollout, so
    the longer the task, the less its reward difference says about any one decision: on tau-bench the
    variance of long tasks comes mostly from read calls whose mistakes change nothing, and their groups
    taught the skill policy 3-10x less per group than one- or two-call tasks (bench/learning_signal_real.py)."""
    if discount <= 0 or gold_calls is None:
        return value
    return value * (1.0 + gold_calls) ** -discount


def frontier_transfer_factor(
    outcome: OutcomeModel, frontier: np.ndarray, weight: float
) -> np.ndarray | float:
    """The exploitation weight (T_i / mean T)^weight, T = ``OutcomeModel.frontier_transfer`` of the predicted
    E[p (1 - p)] (``SchedulerConfig.transfer_weight``; 1.0 at weight 0). A trained group pushes every skill its
    task loads on by a step proportional to its reward std, and the held-out gain of that push is the sum over
    those skills of how many tasks at the frontier load on them: a group from a crowded environment and common
    tools teaches more than an equally mixed one whose structure few other tasks share."""
    if weight <= 0:
        return 1.0
    return relative_transfer(outcome.frontier_transfer(frontier), weight)


def relative_transfer(transfer: np.ndarray, weight: float) -> np.ndarray:
    """(T_i / mean T)^weight, at least 1e-6^weight: what a task's transfer weighs against the catalogue's."""
    return np.maximum(transfer / max(float(transfer.mean()), 1e-12), 1e-6) ** weight


def _renamed_fields(config: dict) -> dict:
    """A saved config in today's field names: ``observe_accuracy`` (before full_pass_weight) read rewards at
    weight 1 when on and 0 when off, and a state saved without either read them at 0; a state saved before
    ``training_dispersion``, ``unsolvable_prior`` or ``reward_ceiling`` ran without them."""
    config = dict(config)
    accuracy = config.pop("observe_accuracy", False)
    config.setdefault("full_pass_weight", 1.0 if accuracy else 0.0)
    config.setdefault("training_dispersion", False)  # before it, the dispersions read the blended variance
    config.setdefault("unsolvable_prior", 0.0)  # before it, no task was suspected of never passing
    # before reward_ceiling, a full pass was a reward of 1 in every environment
    config.setdefault("reward_ceiling", False)
    return config


class EnvSched:
    """The EnvSched scheduler over one task catalogue: graph, statistics, predictor and batch selection."""

    def __init__(
        self,
        catalog: TaskCatalog,
        config: SchedulerConfig | None = None,
        seed: int = 0,
        within_edges: pd.DataFrame | None = None,
        cross_edges: pd.DataFrame | None = None,
    ):
        """Build (or load) the graph. ``within_edges`` / ``cross_edges``: precomputed (src, dst, similarity)
        frames, e.g. from the warehouse; given cross edges are the candidates later refreshes re-rank."""
        self.catalog = catalog
        self.cfg = config or SchedulerConfig()
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        n_tasks = len(catalog)
        self.stats = TaskStats(n_tasks, gamma=self.cfg.gamma, prior_variance=self.cfg.prior_variance)

        self.within = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
        W_within = None
        if self.cfg.use_within_edges:
            if within_edges is None:
                self.within = within_edge_arrays(catalog, self.cfg, seed)
            else:
                self.within = edges_from_frame(catalog, within_edges, "within_edges")
            W_within = propagation_matrix(*self.within, n_tasks, self.cfg.temperature)
        self.cross_candidates = np.zeros((n_tasks, 0), np.int64)  # (N, C) candidates re-ranked at refresh
        self.cross_edges = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
        if self.cfg.use_cross_edges:
            if cross_edges is None:
                src, dst = cross_candidates(catalog, self.cfg, seed=seed)
            else:
                src, dst, _ = edges_from_frame(catalog, cross_edges, "cross_edges")
            self.cross_candidates = candidate_matrix(src, dst, n_tasks)
        self.predictor = VariancePredictor(self.cfg, W_within, None)
        self.outcome = (
            OutcomeModel(catalog, self.cfg, W_within, None) if self.cfg.predictor == "outcome" else None
        )
        self.progress = (
            LearningProgress(catalog.gold_calls, n_tasks, self.cfg.group_size)
            if self.cfg.learning_progress and self.outcome is not None
            else None
        )
        self.dispersion = (
            TaskDispersion(n_tasks, self.cfg.dispersion_prior_groups)
            if self.cfg.task_dispersion and self.outcome is not None
            else None
        )
        self.learnability = (
            TaskLearnability(n_tasks, self.cfg.group_size, self.cfg.learnability_prior_sd)
            if self.cfg.learnability_prior_sd > 0 and self.outcome is not None
            else None
        )
        prior = self.cfg.blind_env_prior
        self.blind = (
            BlindEnvironments(
                *sandboxes(catalog.env, catalog.tools, catalog.tool_names), self.cfg.group_size, prior
            )
            if prior > 0 and self.outcome is not None
            else None
        )
        self.solvability = (
            TaskSolvability(n_tasks, self.cfg.unsolvable_prior, self.cfg.residual_decay)
            if self.cfg.unsolvable_prior > 0 and self.outcome is not None
            else None
        )
        self.patterns = signature_patterns(catalog.signature, self.cfg.n_patterns, seed)
        # the configured quota, raised where few or small environments could not fill a batch under it
        sizes = np.bincount(catalog.env, minlength=catalog.n_envs)
        self.env_quota = max(self.cfg.env_quota, filling_quota(sizes, self.cfg.batch_size))
        self.current_step = 0  # on the scheduler's own clock: a campaign's step plus step_offset
        self.step_offset = 0  # the history a warm start folded in (``warm_start``); 0 for a fresh campaign
        self.last_refresh_step = -1
        self._W_cross = None
        self._cross_signature: np.ndarray | None = None  # what the current X was ranked under
        self._refresh_cross()
        self._cache: tuple | None = None  # (step, v_hat, evidence) of the last prediction
        # calls observed with more=True, checked and recorded, not yet folded: (rollouts, (rows, groups)) each
        self._held = HeldCalls()
        self._new_trackers()

    def _new_trackers(self) -> None:
        """Fresh trackers of what came back, step by step (``load_state_dict`` starts from these too, so a state
        saved before one of them existed loads with it empty)."""
        cfg, n_tasks = self.cfg, len(self.catalog)
        self.rounds = StepRounds()  # the step being rolled out, for refill rounds (``refill_rounds``)
        self.share = InformativeShare()  # sizes over-sampled first rounds (``oversample_factor``)
        self.silent = SilentTasks(n_tasks, cfg.silence_backoff)  # selections no group came back from
        self.delivered = DeliveredGroups()  # the (step, task) groups observed, so a re-delivery counts once
        # the share of each task's rollouts that came back
        prior = cfg.short_group_prior
        self.short = ShortGroups(n_tasks, cfg.group_size, prior) if prior > 0 else None
        # the variance each environment's groups realised against what the outcome model predicted for them
        calibrated = cfg.env_calibration > 0 and cfg.predictor == "outcome"
        n_envs = self.catalog.n_envs
        self.calibration = (
            EnvironmentCalibration(n_envs, cfg.env_calibration, cfg.residual_decay) if calibrated else None
        )
        # each environment's lowest and highest rewards, its floor and ceiling
        ranged = cfg.reward_floor or cfg.reward_ceiling
        self.reward_range = RewardRange(n_envs, cfg.reward_floor, cfg.reward_ceiling) if ranged else None
        # how much each environment's partial checks move together, for the full-pass blend
        blended = cfg.full_pass_by_correlation and cfg.full_pass_weight > 0
        self.checks = CheckCorrelation(n_tasks, n_envs) if blended else None

    # --- prediction -------------------------------------------------------------------------------
    def _refresh_cross(self) -> None:
        """Re-rank the cross candidates under the current reward profiles ("rebuilt at refresh").

        Only the sources whose signature, or a candidate's, changed since the last re-rank are re-ranked; their
        rows come out as a full re-rank gives them, so a refresh costs O(N) vector work on the signature plus
        O(changed rows * candidates) instead of O(N * candidates * signature size)."""
        if not self.cfg.use_cross_edges:
            return
        signature = cross_signature(self.catalog, self.cfg, self.stats)
        previous = self._cross_signature
        if (
            previous is None
            or previous.shape != signature.shape
            or not self._splice_cross(previous, signature)
        ):
            self._set_cross(rank_cross_edges(self.cross_candidates, signature, self.cfg.k_cross))
        self._cross_signature = signature
        self.last_refresh_step = self.current_step

    def _set_cross(self, edges: tuple[np.ndarray, np.ndarray, np.ndarray], W_cross=None) -> None:
        """Use these cross edges; ``W_cross``: their propagation matrix when the caller has it already."""
        self.cross_edges = edges
        if W_cross is None:
            W_cross = propagation_matrix(*edges, len(self.catalog), self.cfg.temperature)
        self.predictor.set_cross(W_cross)
        if self.outcome is not None:
            self.outcome.set_cross(W_cross)
        self._W_cross = W_cross
        self._cross_signature = None  # the signature these edges were ranked under, once known

    def _splice_cross(self, previous: np.ndarray, signature: np.ndarray) -> bool:
        """Re-rank only the rows the signature change can affect and write them into the edge arrays and W_cross
        (each source keeps its edge count, so its slots are fixed). False when the layout does not allow it."""
        rows = rows_to_rerank(self.cross_candidates, previous, signature)
        if len(rows) == 0:
            return True
        n_tasks, (src, dst, sim), W = len(self.catalog), self.cross_edges, self._W_cross
        new_src, new_dst, new_sim = rank_cross_edges(self.cross_candidates, signature, self.cfg.k_cross, rows)
        part = propagation_matrix(new_src, new_dst, new_sim, n_tasks, self.cfg.temperature)
        start, count = W.indptr[rows], np.diff(W.indptr)[rows]
        if len(src) != W.nnz or not np.array_equal(np.diff(part.indptr)[rows], count):
            return False  # duplicate pairs or a changed edge count per source: rebuild
        slots = concatenated_ranges(start, count)  # rows' positions in both layouts
        dst, sim, indices, data = dst.copy(), sim.copy(), W.indices.copy(), W.data.copy()
        dst[slots], sim[slots] = new_dst, new_sim  # edges are sorted by source, W by (source, column)
        indices[slots], data[slots] = part.indices, part.data
        self._set_cross((src, dst, sim), sp.csr_matrix((data, indices, W.indptr), shape=W.shape))
        return True

    def _transfer(self, frontier: np.ndarray) -> np.ndarray | float:
        """The exploitation weight of each task's held-out transfer (``frontier_transfer_factor``); one method so
        that the headroom bench can feed it a true quantity (bench/scheduler_oracle.py)."""
        return frontier_transfer_factor(self.outcome, frontier, self.cfg.transfer_weight)

    def _predicted(self, step: int) -> Predicted:
        """What selection needs at ``step``, cached until the next observe."""
        if self._cache is None or self._cache[0] != step:
            out = None
            # a task in its silence back-off is not selected; coverage counts its silent selections as visits
            blocked, silences = self.silent.blocked(step), self.silent.silences
            if self.outcome is not None:
                out = self.outcome.predict(step)
                n = self.stats.n_at(step)
                env_seen = np.bincount(self.catalog.env, weights=n, minlength=self.catalog.n_envs)
                evidence = (out.own_sd < np.inf) | ~np.isnan(out.b_W) | ~np.isnan(out.b_X)
                evidence |= env_seen[self.catalog.env] > 0
                confidence = out.sd / self.outcome.prior_sd
                transfer = self._transfer(out.frontier)
                value = out.v_hat * transfer
                value = horizon_discounted(value, self.catalog.gold_calls, self.cfg.horizon_discount)
                if self.progress is not None:
                    value = value * self.progress.factor()
                if self.dispersion is not None:
                    value = value * self.dispersion.factor(self.outcome.dispersion()[self.catalog.env])
                if self.learnability is not None:  # weighs what coverage may teach too
                    learnable = self.learnability.factor()
                    value, transfer = value * learnable, transfer * learnable
                if self.blind is not None:  # and an environment whose rewards do not move with training
                    moves = self.blind.factor()
                    value, transfer = value * moves, transfer * moves
                if self.solvability is not None:  # so does this
                    solvable = self.solvability.factor(step)
                    value, transfer = value * solvable, transfer * solvable
                if self.short is not None:  # and a group that comes back short teaches less
                    whole = self.short.factor()
                    value, transfer = value * whole, transfer * whole
                # and an environment whose groups gave less than was predicted
                if self.calibration is not None:
                    kept = self.calibration.factor()
                    kept = kept if np.isscalar(kept) else kept[self.catalog.env]
                    value, transfer = value * kept, transfer * kept
                predicted = Predicted(
                    value,
                    evidence & ~blocked,
                    n + silences,
                    out.v_opt,
                    confidence,
                    blocked,
                    out.v_hat,
                    transfer,
                )
            else:
                c = self.predictor.components(self.stats, step)
                v_hat, u = self.predictor.fuse(c)
                evidence = ((c.n + c.N_W + c.N_X) > 0) & ~blocked
                predicted = Predicted(v_hat, evidence, c.n + silences, None, u, blocked)
            self._cache = (step, predicted, out)
        return self._cache[1]

    def predict(self, step: int | None = None) -> pd.DataFrame:
        """Per task: predicted_variance (v_hat), uncertainty (u in (0, 1]), the variance each source alone
        implies: own (own history), within (W neighbours), cross (X neighbours), NaN = no evidence; and, with the
        outcome predictor, value (what exploitation ranks, before the similarity penalty and the quota: v_hat
        weighed by what a visit may teach; at ``step``, where the next select computes it a step on) and moves
        (the chance that the task's sandbox's rewards move with training, ``blind_env_prior``; 1 where the field
        is off), so the ranking can be read from the table."""
        self._fold_held()
        step = self.current_step if step is None else self._clock(step)
        if self.outcome is None:
            return self.predictor.predict_frame(self.stats, step, self.catalog.task_ids)
        predicted = self._predicted(step)
        out = self._cache[2]  # the outcome model's prediction, shared with select at the same step
        own_z = out.f + np.where(out.own_sd < np.inf, self.outcome.m, 0.0)
        nan_where = lambda values, missing: np.where(missing, np.nan, values)  # noqa: E731
        return pd.DataFrame(
            {
                "task_id": self.catalog.task_ids,
                "predicted_variance": out.v_hat,
                "uncertainty": out.sd / self.outcome.prior_sd,
                "own": nan_where(self.outcome.variance_at(own_z), out.own_sd == np.inf),
                "within": nan_where(
                    self.outcome.variance_at(out.f + np.nan_to_num(out.b_W)), np.isnan(out.b_W)
                ),
                "cross": nan_where(
                    self.outcome.variance_at(out.f + np.nan_to_num(out.b_X)), np.isnan(out.b_X)
                ),
                "value": predicted.v_hat,
                "moves": self.blind.factor() if self.blind is not None else 1.0,
            }
        )

    # --- selection ----------------------------------------------------------------------------------
    @staticmethod
    def _check_step(step) -> int:
        if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}.")
        return int(step)

    def _clock(self, step) -> int:
        """A campaign's step on the scheduler's clock: after a warm start, its history came first."""
        return self._check_step(step) + self.step_offset

    def select(self, step: int) -> pd.DataFrame:
        """The batch for ``step``: B distinct tasks (all of them in a smaller catalogue), each environment at
        most ``env_quota`` times; with ``oversample_factor``, k more (role 'oversample') after them."""
        step = self._clock(step)
        self._fold_held()
        self.current_step = max(self.current_step, step)
        cfg = self.cfg
        predicted = self._predicted(step)
        v_hat = predicted.v_hat
        room = np.full(self.catalog.n_envs, self.env_quota, dtype=np.int64)  # quota left per environment
        chosen = np.zeros(len(self.catalog), dtype=bool)

        exploit = np.zeros(0, np.int64)
        allowed, n_exploit = self._worth_covering(predicted, self.exploit_slots(predicted))
        if self.stats.any_observed and n_exploit > 0:  # step 1 (no history) is all coverage
            exploit = self._select_exploit(v_hat, predicted.has_evidence, room, chosen, n_exploit)
        coverage = self._select_coverage(predicted, room, chosen, cfg.batch_size - len(exploit), allowed)
        if allowed is not None and len(exploit) + len(coverage) < cfg.batch_size:  # quota left tasks out
            more = self._select_exploit(
                v_hat, predicted.has_evidence, room, chosen, cfg.batch_size - len(exploit) - len(coverage)
            )
            exploit = np.concatenate([exploit, more])
        if len(exploit) + len(coverage) < cfg.batch_size:  # rooms left only tasks neither pass would take
            rest = self._select_coverage(
                predicted, room, chosen, cfg.batch_size - len(exploit) - len(coverage)
            )
            coverage = np.concatenate([coverage, rest])
        if len(exploit) + len(coverage) < cfg.batch_size:  # only tasks in a silence back-off are left
            rest = self._select_coverage(
                predicted, room, chosen, cfg.batch_size - len(exploit) - len(coverage), predicted.blocked
            )
            coverage = np.concatenate([coverage, rest])
        extra = self._select_oversample(predicted, room, chosen)
        rows = np.concatenate([exploit, coverage, extra])
        self.rounds.start(step, rows)
        self.silent.selected(step, rows)
        roles = ["exploit"] * len(exploit) + ["coverage"] * len(coverage) + ["oversample"] * len(extra)
        return self._batch_frame(rows, roles, predicted)

    def _select_oversample(self, predicted: Predicted, room, chosen) -> np.ndarray:
        """The k extra tasks of an over-sampled first round (``oversample_factor``): exploitation's next best
        after the batch, coverage's when those run out, under the quota left by the batch."""
        size = self.share.extra(self.cfg.batch_size, self.cfg.oversample_factor)  # 0 before any observe
        return self._next_best(predicted, room, chosen, size) if size else np.zeros(0, np.int64)

    def _next_best(self, predicted: Predicted, room, chosen, size: int) -> np.ndarray:
        """``size`` more tasks beyond those ``chosen``: exploitation's ranking, coverage's when it runs out."""
        rows = self._select_exploit(predicted.v_hat, predicted.has_evidence, room, chosen, size)
        if len(rows) < size:
            rows = np.concatenate([rows, self._select_coverage(predicted, room, chosen, size - len(rows))])
        return rows

    def _batch_frame(self, rows: np.ndarray, roles, predicted: Predicted) -> pd.DataFrame:
        variance = predicted.v_hat if predicted.variance is None else predicted.variance
        return pd.DataFrame(
            {
                "task_id": self.catalog.task_ids[rows],
                "env_id": self.catalog.env_ids[self.catalog.env[rows]],
                "role": roles,
                "predicted_variance": variance[rows],
            }
        )

    def refill(self, step: int) -> pd.DataFrame:
        """The next refill round of ``step`` (``refill_rounds``), after its latest round was observed: about
        1.25 x the missing informative groups, the best-predicted tasks not rolled out this step by
        exploitation's ranking (coverage's when those run out), under the environment quota counted over the
        step's informative groups, role 'oversample'. Empty when the step has B informative groups, its rounds
        are used up, or refill is off."""
        step = self._clock(step)
        self._fold_held()
        size = self.rounds.refill_size(step, self.cfg.batch_size, self.cfg.refill_rounds)
        if size == 0:
            return pd.DataFrame(columns=["task_id", "env_id", "role", "predicted_variance"])
        predicted, env = self._predicted(step), self.catalog.env
        chosen = np.zeros(len(self.catalog), dtype=bool)
        chosen[self.rounds.rows] = True
        # a zero-variance group frees its environment's slot: the trained batch stays under the quota
        room = self.env_quota - np.bincount(env[self.rounds.informative], minlength=self.catalog.n_envs)
        rows = self._next_best(predicted, room, chosen, size)
        self.rounds.add(rows)
        self.silent.selected(step, rows)
        return self._batch_frame(rows, "oversample", predicted)

    def resume_step(self, step: int, task_ids) -> None:
        """Take up ``step``, whose first round (``task_ids``) was chosen before this scheduler was rebuilt or
        restored, so that its refill rounds follow the rule; a no-op for the step it selected itself."""
        step = self._clock(step)
        self._fold_held()
        if step != self.rounds.step:
            self.rounds.start(
                step, self.catalog.indices_of(np.asarray(task_ids, dtype=object), what="task_id")
            )

    def exploit_slots(self, predicted: Predicted) -> int:
        """(1 - rho_t) B; with adaptive rho, rho_t = rho_min + (rho - rho_min) * u, u = the mean relative
        posterior sd of the (1 - rho) B best-predicted tasks (confident predictions need less coverage)."""
        cfg = self.cfg
        if not cfg.adaptive_rho or predicted.v_opt is None or cfg.n_exploit == 0:
            return cfg.n_exploit
        candidates = np.flatnonzero(predicted.has_evidence)
        if len(candidates) == 0:
            return cfg.n_exploit
        k = min(cfg.n_exploit, len(candidates))
        top = candidates[np.argpartition(-predicted.v_hat[candidates], k - 1)[:k]]
        u = float(np.clip(predicted.uncertainty[top].mean(), 0.0, 1.0))
        rho_min = min(cfg.rho_min, cfg.rho)
        rho_t = rho_min + (cfg.rho - rho_min) * u
        return int(round((1.0 - rho_t) * cfg.batch_size))

    def _worth_covering(self, predicted: Predicted, n_exploit: int) -> tuple[np.ndarray | None, int]:
        """With ``coverage_beats_exploit``: (the tasks a coverage slot may take, exploitation slots). A coverage
        slot is worth a rollout group only for a task whose optimistic predicted variance beats the value of the
        last exploitation slot (the n_exploit-th best v_hat); when fewer such tasks exist than coverage slots,
        exploitation takes the rest. (None, n_exploit) when off or before any history."""
        cfg = self.cfg
        if not cfg.coverage_beats_exploit or predicted.v_opt is None or not self.stats.any_observed:
            return None, n_exploit
        candidates = np.flatnonzero(predicted.has_evidence)
        k = min(n_exploit, len(candidates))
        if k == 0:
            return None, n_exploit
        top = candidates[np.argpartition(-predicted.v_hat[candidates], k - 1)[:k]]
        # v_opt on v_hat's scale: the exploitation weights (transfer, horizon) multiply both alike
        weight = 1.0
        if predicted.variance is not None:
            weight = np.divide(
                predicted.v_hat,
                predicted.variance,
                out=np.ones(len(self.catalog)),
                where=predicted.variance > 0,
            )
        allowed = (predicted.v_opt * weight > predicted.v_hat[top].min()) & ~predicted.blocked
        outside = allowed.copy()
        outside[top] = False  # exploitation takes these
        n_coverage = min(cfg.batch_size - n_exploit, int(outside.sum()))
        return allowed, cfg.batch_size - n_coverage

    def _take(self, row: int, room: np.ndarray, chosen: np.ndarray) -> None:
        room[self.catalog.env[row]] -= 1
        chosen[row] = True

    def _select_exploit(self, v_hat, has_evidence, room, chosen, slots: int) -> np.ndarray:
        """Greedy v_hat_i / v_max - eta * max_{j chosen} sim(i, j) over tasks with evidence."""
        env = self.catalog.env
        candidates = np.flatnonzero(has_evidence & ~chosen)
        if len(candidates) == 0:
            return np.zeros(0, np.int64)
        v_max = max(float(v_hat[candidates].max()), 1e-12)
        pool = _prune(v_hat, candidates, env, room, self.cfg.pool_factor * self.cfg.batch_size, slots)
        score = v_hat[pool] / v_max
        sim = similarity_matrix(self.catalog, self.cfg, pool)  # (M, M)
        max_sim = np.zeros(len(pool))  # max similarity to the tasks chosen so far (0 before any)
        open_ = np.ones(len(pool), dtype=bool)
        picks = []
        for _ in range(slots):
            open_ &= room[env[pool]] > 0
            if not open_.any():
                break
            k = int(np.argmax(np.where(open_, score - self.cfg.eta * max_sim, -np.inf)))
            picks.append(pool[k])
            open_[k] = False
            self._take(pool[k], room, chosen)
            max_sim = np.maximum(max_sim, sim[k])
        return np.asarray(picks, dtype=np.int64)

    def _select_coverage(self, predicted: Predicted, room, chosen, slots: int, allowed=None) -> np.ndarray:
        """Greedy under-observation score (plus, when informed, the optimistic predicted variance over its
        maximum); counts include this batch's picks, so the batch spreads out. ``allowed``: the only tasks
        it may take (None = all but those in a silence back-off)."""
        if slots <= 0:
            return np.zeros(0, np.int64)
        n = predicted.n
        informed = np.zeros(len(self.catalog))
        if self.cfg.informed_coverage and predicted.v_opt is not None and self.stats.any_observed:
            v_opt = predicted.v_opt * predicted.transfer  # what a visit may teach, weighed like exploitation
            informed = self.cfg.coverage_informativeness * v_opt / max(float(v_opt.max()), 1e-12)
        cfg, env, pattern, tools = self.cfg, self.catalog.env, self.patterns, self.catalog.tools
        N_env = np.bincount(env, weights=n, minlength=self.catalog.n_envs)
        N_pattern = np.bincount(pattern, weights=n, minlength=pattern.max() + 1)
        batch_env = np.bincount(env[chosen], minlength=self.catalog.n_envs).astype(float)
        batch_pattern = np.bincount(pattern[chosen], minlength=len(N_pattern)).astype(float)
        covered = np.asarray(tools[np.flatnonzero(chosen)].sum(axis=0)).ravel() > 0  # tools in the batch
        tool_count = np.asarray(tools.getnnz(axis=1), dtype=float)
        jitter = TIE_JITTER * self.rng.random(len(self.catalog))

        def score(rows: np.ndarray, row_tools: sp.csr_matrix) -> np.ndarray:
            e, p = env[rows], pattern[rows]
            new_tools = tool_count[rows] - row_tools @ covered.astype(float)
            return (
                1.0 / np.sqrt(1.0 + N_env[e] + batch_env[e])
                + 1.0 / np.sqrt(1.0 + n[rows])
                + 1.0 / np.sqrt(1.0 + N_pattern[p] + batch_pattern[p])
                + cfg.new_env_bonus * (batch_env[e] == 0)
                + cfg.new_tool_bonus
                * np.divide(new_tools, tool_count[rows], out=np.zeros(len(rows)), where=tool_count[rows] > 0)
                + informed[rows]
                + jitter[rows]
            )

        if allowed is None:
            allowed = ~predicted.blocked
        candidates = np.flatnonzero(~chosen & allowed)
        if len(candidates) == 0:
            return np.zeros(0, np.int64)
        full = np.zeros(len(self.catalog))
        full[candidates] = score(candidates, tools[candidates])
        pool = _prune(full, candidates, env, room, max(cfg.pool_factor * cfg.batch_size, slots), slots)
        pool_tools = tools[pool]  # sliced once: re-slicing the catalogue's rows every pick cost 0.06 s at 1M
        open_ = np.ones(len(pool), dtype=bool)
        picks = []
        for _ in range(slots):
            open_ &= room[env[pool]] > 0
            if not open_.any():
                break
            k = int(np.argmax(np.where(open_, score(pool, pool_tools), -np.inf)))
            row = pool[k]
            picks.append(row)
            open_[k] = False
            self._take(row, room, chosen)
            batch_env[env[row]] += 1
            batch_pattern[pattern[row]] += 1
            covered[tools[row].indices] = True
        return np.asarray(picks, dtype=np.int64)

    # --- learning from rollouts ---------------------------------------------------------------------
    def observe(self, rollouts: pd.DataFrame, more: bool = False) -> None:
        """Fold one or more steps of rollouts (task_id, step, reward in [0, 1]) into the statistics.

        Validates everything first: bad input raises ValueError and changes no state. ``more=True``: more groups
        of these steps follow in later calls (a trainer that hands over each group as it finishes). The groups
        are checked and recorded now (a re-delivery is dropped, a clash refused) and folded in with the rest at
        the next call without it, or when the scheduler next selects, refills, predicts or saves its state:
        exactly as one call with them all would, at the cost of one (a fold refits the shared models).
        """
        idx = validate_rollouts(rollouts, self.catalog)
        if len(idx):
            if self.step_offset:
                rollouts = rollouts.assign(step=pd.to_numeric(rollouts["step"]) + self.step_offset)
            # the groups of the reward the trainer uses, before the blend, less those delivered before
            rollouts, idx, unblended = self._first_deliveries(rollouts, idx)
            if len(idx):
                self.delivered.record(*(unblended[c].to_numpy() for c in DELIVERED_COLUMNS))
                self._held.hold(rollouts, (idx, unblended))
        if not more:
            self._fold_held()

    def _fold_held(self) -> None:
        """Fold the groups ``observe`` holds into every model, as one call with them all."""

        def merged(rollouts: pd.DataFrame, parts: list) -> tuple[np.ndarray, pd.DataFrame]:
            idx = np.concatenate([rows for rows, _ in parts])  # rows in delivery order, as the rollouts
            return idx, group_outcomes(rollouts, idx)  # the groups sorted by (step, task), as one call's

        taken = self._held.take(merged)
        if taken is not None:
            rollouts, (idx, unblended) = taken
            self._fold(rollouts, idx, unblended)

    def _fold(self, rollouts: pd.DataFrame, idx: np.ndarray, unblended: pd.DataFrame) -> None:
        """Every model's update from first deliveries: ``rollouts`` (on the scheduler's clock), their task rows and
        their groups (``group_outcomes`` of the reward the trainer uses)."""
        cfg = self.cfg
        dynamic = cfg.refill_rounds or cfg.oversample_factor
        training = unblended["variance"].to_numpy() if cfg.training_dispersion else None
        if dynamic:  # the trainer's rewards decide which groups are informative
            for step, part in unblended.groupby("step", sort=True):
                self.rounds.observed(int(step), part["idx"].to_numpy(), part["variance"].to_numpy())
                self.share.observed(int(step), part["variance"].to_numpy())
        env, reward = self.catalog.env[idx], rollouts["reward"].to_numpy(dtype=float)
        pending = np.zeros(len(reward), dtype=bool)
        if self.reward_range is not None:  # each environment's rewards read between its floor and ceiling
            self.reward_range.update(env, reward, unblended, self.catalog.env[unblended["idx"].to_numpy()])
            pending = self.reward_range.may_be_pass(env, reward)
            reward = self.reward_range.rescale(env, reward)
            rollouts = rollouts.assign(reward=reward)
        if self.outcome is not None:  # how each environment rewards, where the catalogue does not say
            # a lone pass below 1 may be a capped pass, not partial credit, until its ceiling is read
            self.outcome.read_rewards(env[~pending], reward[~pending])
        if self.cfg.full_pass_weight:  # partial credit blended with the full pass (SchedulerConfig)
            w = self.cfg.full_pass_weight
            if self.checks is not None:  # as much of the blend as the verifier's checks move together
                read = group_outcomes(rollouts, idx)
                self.checks.update(idx, reward, read, self.catalog.env[read["idx"].to_numpy()])
                w = self.checks.weight(w)[env]
            rollouts = rollouts.assign(reward=(1 - w) * reward + w * (reward >= CORRECT_REWARD))
        groups = group_outcomes(rollouts, idx)  # the same (step, task) order as ``training``
        # the dispersion ratios' numerator: the variance of the reward the trainer uses, or the blended reading's
        groups["spread"] = groups["variance"] if training is None else training
        for step, part in groups.groupby("step", sort=True):
            rows, step = part["idx"].to_numpy(), int(step)
            variance = part["variance"].to_numpy()
            # the paper's fusion refits on its predictions before each visit paired with what was realised;
            # the outcome model fits its own (the fusion's refit is unused there, and was 10% of a step)
            if self.outcome is None:
                self.predictor.record(self.predictor.components(self.stats, step, rows), variance)
            else:
                trials = part["size"].to_numpy(dtype=float)
                self.outcome.update(rows, step, part["mean"].to_numpy(), part["spread"].to_numpy(), trials)
                z, sd = self.outcome.visit_prior  # each visit against what the shared model expected of it
                if self.solvability is not None:
                    self.solvability.update(rows, step, part["mean"].to_numpy(), z, sd, trials)
                if self.blind is not None:
                    self.blind.update(rows, part["mean"].to_numpy(), variance, sigmoid(z))
                if self.calibration is not None:  # what came back against what was predicted before the visit
                    predicted = self.outcome.visit_variance(rows)
                    self.calibration.update(
                        self.catalog.env[rows], step, part["spread"].to_numpy(), predicted
                    )
            if self.progress is not None:
                self.progress.update(rows, part["mean"].to_numpy(), variance)
            if self.dispersion is not None:
                self.dispersion.update(rows, part["mean"].to_numpy(), part["spread"].to_numpy())
            if self.learnability is not None:
                self.learnability.update(rows, part["mean"].to_numpy(), variance)
            self.stats.update(rows, step, variance, part["mean"].to_numpy())
            self.silent.observed(step, rows)
            if self.short is not None:
                self.short.update(rows, part["size"].to_numpy())
            self.current_step = max(self.current_step, step)
        if self.outcome is None:
            self.predictor.refit()
        every = self.cfg.cross_refresh_every
        if every and self.current_step - self.last_refresh_step >= every:
            self._refresh_cross()
        self._cache = None

    def _first_deliveries(
        self, rollouts: pd.DataFrame, idx: np.ndarray
    ) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
        """The rollouts less the (step, task) groups observed before with the same rewards (a re-delivery),
        their task rows, and their groups (``group_outcomes``). A group observed before with other rewards
        raises ValueError."""
        groups = group_outcomes(rollouts, idx)
        seen, clash = self.delivered.repeated(*(groups[c].to_numpy() for c in DELIVERED_COLUMNS))
        if clash is not None:
            step, row, size, mean = groups.loc[clash, ["step", "idx", "size", "mean"]]
            size_before, mean_before = self.delivered.earlier(int(step), int(row))
            raise ValueError(
                f"rollouts: step {int(step) - self.step_offset}, task {self.catalog.task_ids[int(row)]!r} was "
                f"observed already with other rewards ({size_before} rollouts, mean {mean_before:.4g}; now "
                f"{int(size)}, mean {mean:.4g}): a group is observed once, whole."
            )
        if not seen.any():
            return rollouts, idx, groups
        width = int(idx.max()) + 1
        keys = groups["step"].to_numpy()[seen] * width + groups["idx"].to_numpy()[seen]
        again = np.isin(rollouts["step"].to_numpy(dtype=np.int64) * width + idx, keys)
        return rollouts.loc[~again], idx[~again], groups.loc[~seen].reset_index(drop=True)

    def warm_start(self, history: pd.DataFrame, step_offset: int | None = None) -> None:
        """Start this fresh scheduler as if its campaign continued ``history``: earlier rollouts (task_id,
        step, reward; every task in this catalogue, e.g. an earlier run's with retired tasks dropped) are
        observed one step at a time, oldest first, and this campaign's step s is then step
        max(history.step) + s of the scheduler's clock. Every model (outcome, dispersion, learnability,
        statistics, cross edges) is exactly what it would be had the history's steps come first: a visit
        at the history's last step is one step old at step 1. Unlike ``load_state_dict`` this works across
        catalogues (tasks added since start unseen). Bad input raises ValueError and changes nothing.
        ``step_offset``: the clock's offset instead (a campaign rebuilt mid-way on a changed pool passes its
        own, its history then holding its own steps at offset + s)."""
        if self.current_step or self.stats.any_observed or self._held:
            raise ValueError(
                "EnvSched.warm_start: this scheduler has already selected or observed; use a fresh one."
            )
        validate_rollouts(history, self.catalog)
        steps = pd.to_numeric(history["step"]).astype(np.int64)
        for _, part in history.groupby(steps, sort=True):
            self.observe(part)
        if step_offset is None:
            step_offset = int(steps.max()) if len(history) else 0
        self.step_offset = int(step_offset)

    def start_next_campaign(self) -> None:
        """After ``load_state_dict`` of a campaign's last state: the next campaign on this catalogue starts here,
        its step 1 one step after that campaign's last. Equal to ``warm_start`` with every rollout that state
        saw, without replaying them; the RNG restarts from this scheduler's seed, as a fresh one's does."""
        self._fold_held()
        self.step_offset = self.current_step
        self.rng = np.random.default_rng(self.seed)
        self._cache = None

    # --- persistence --------------------------------------------------------------------------------
    def within_edges_frame(self) -> pd.DataFrame:
        """Current W as a (src, dst, similarity) frame of task ids."""
        return edges_to_frame(self.catalog, *self.within)

    def cross_edges_frame(self) -> pd.DataFrame:
        """Current X as a (src, dst, similarity) frame of task ids."""
        self._fold_held()
        return edges_to_frame(self.catalog, *self.cross_edges)

    def state_dict(self) -> dict:
        """Everything that changes online; with the same catalogue and config, load_state_dict resumes exactly."""
        self._fold_held()  # the groups held back (observe's ``more``) are saved folded in
        return {
            "version": STATE_VERSION,
            "n_tasks": len(self.catalog),
            "catalog_digest": self.catalog.digest,
            "config": self.cfg.to_dict(),
            "stats": self.stats.state_dict(),
            "predictor": self.predictor.state_dict(),
            "outcome": self.outcome.state_dict() if self.outcome is not None else {},
            "progress": self.progress.state_dict() if self.progress is not None else {},
            "dispersion": self.dispersion.state_dict() if self.dispersion is not None else {},
            "learnability": self.learnability.state_dict() if self.learnability is not None else {},
            "blind": self.blind.state_dict() if self.blind is not None else {},
            "solvability": self.solvability.state_dict() if self.solvability is not None else {},
            "rng": self.rng.bit_generator.state,
            "cross_candidates": self.cross_candidates.copy(),
            "cross_edges": tuple(a.copy() for a in self.cross_edges),
            "patterns": self.patterns.copy(),
            "current_step": self.current_step,
            "step_offset": self.step_offset,
            "last_refresh_step": self.last_refresh_step,
            "rounds": self.rounds.state_dict(),
            "share": self.share.state_dict(),
            "silence": self.silent.state_dict(),
            "short_groups": self.short.state_dict() if self.short is not None else {},
            "reward_range": self.reward_range.state_dict() if self.reward_range is not None else {},
            "env_calibration": self.calibration.state_dict() if self.calibration is not None else {},
            "check_correlation": self.checks.state_dict() if self.checks is not None else {},
            "delivered": self.delivered.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a state saved by ``state_dict``. One that does not fit (another release, catalogue, config
        or feature set) raises StateMismatch before anything is restored."""
        if state.get("version") != STATE_VERSION:
            raise StateMismatch(
                f"EnvSched: state version {state.get('version')!r}, expected {STATE_VERSION}."
            )
        check_catalog("EnvSched", state, len(self.catalog), self.catalog.digest)
        # A field added after the state was saved ran at its default then.
        saved = {**SchedulerConfig().to_dict(), **_renamed_fields(state["config"])}
        if saved != self.cfg.to_dict():
            changed = sorted(k for k, v in saved.items() if self.cfg.to_dict().get(k) != v)
            raise StateMismatch(f"EnvSched: state was saved under a different config (fields {changed}).")
        if self.outcome is not None:
            self.outcome.check_state(state["outcome"])
        self._held.drop()  # groups held back for a fold belong to the state being replaced
        self.stats.load_state_dict(state["stats"])
        self.predictor.load_state_dict(state["predictor"])
        if self.outcome is not None:
            self.outcome.load_state_dict(state["outcome"])
        if self.progress is not None and state.get("progress"):  # absent: saved before the field existed
            self.progress.load_state_dict(state["progress"])
        if self.dispersion is not None and state.get("dispersion"):
            self.dispersion.load_state_dict(state["dispersion"])
        if self.learnability is not None and state.get("learnability"):
            self.learnability.load_state_dict(state["learnability"])
        if self.blind is not None and state.get("blind"):
            self.blind.load_state_dict(state["blind"])
        if self.solvability is not None and state.get("solvability"):
            self.solvability.load_state_dict(state["solvability"])
        self.rng.bit_generator.state = state["rng"]
        self.cross_candidates = np.array(state["cross_candidates"], copy=True)
        self.patterns = np.array(state["patterns"], copy=True)
        self.current_step = int(state["current_step"])
        self.step_offset = int(state.get("step_offset", 0))  # absent: saved before warm starts had a clock
        if self.cfg.use_cross_edges:
            self._set_cross(tuple(np.array(a, copy=True) for a in state["cross_edges"]))
            # With a refresh at the end of every observe, the saved X was ranked under the saved stats.
            if self.cfg.cross_refresh_every == 1:
                self._cross_signature = cross_signature(self.catalog, self.cfg, self.stats)
        self.last_refresh_step = int(state["last_refresh_step"])
        # absent (saved before the tracker existed, or one that was off) or empty: the fresh one
        self._new_trackers()
        trackers = {
            "rounds": self.rounds,
            "share": self.share,
            "silence": self.silent,
            "short_groups": self.short,
            "reward_range": self.reward_range,
            "env_calibration": self.calibration,
            "check_correlation": self.checks,
            "delivered": self.delivered,
        }
        if "reward_floors" in state:  # saved before ceilings were read, under the floors' name
            state = {**state, "reward_range": state["reward_floors"]}
        for key, tracker in trackers.items():
            if tracker is not None and state.get(key):
                tracker.load_state_dict(state[key])
        self._cache = None
