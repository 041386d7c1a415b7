"""SchedulerConfig: every number of DESIGN.md's "Algorithm" section, one field each.

Defaults follow EnvSched (Yang et al., 2026). Ablations are switches here:
within-edges only (``use_cross_edges=False``), cross-edges only (``use_within_edges=False``),
coverage only (``rho=1.0``) and neighbour counts (``k_within`` / ``k_cross``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass
class SchedulerConfig:
    """Typed configuration of the EnvSched graph, predictor and scheduler (EnvSched, Yang et al., 2026)."""

    # --- batch --------------------------------------------------------------------------------
    batch_size: int = 64
    """B: number of distinct tasks selected per step."""
    group_size: int = 8
    """G: rollouts drawn per selected task (the GRPO group); used for rollout accounting."""

    # --- own history ----------------------------------------------------------------------------
    gamma: float = 0.8
    """Discount per step of age applied to a task's visit weight n_i, since the policy moves."""

    # --- within-environment edges (W) ------------------------------------------------------------
    use_within_edges: bool = True
    """Use the within-environment relation W (False = cross-edges-only ablation)."""
    k_within: int = 8
    """k_W: neighbours kept per task inside its own environment."""
    candidate_factor: int = 3
    """pynndescent returns candidate_factor * k_W embedding neighbours before the combined re-rank."""
    weight_cosine: float = 0.5
    """Weight of text-embedding cosine in the within-environment similarity."""
    weight_tools: float = 0.3
    """Weight of Jaccard(tools) in the within-environment similarity."""
    weight_state: float = 0.2
    """Weight of Jaccard(state fields / verifier checks) in the within-environment similarity."""
    exact_knn_max: int = 4096
    """Environments up to this many tasks get exact within-env kNN; larger ones use pynndescent."""

    # --- cross-environment edges (X) -------------------------------------------------------------
    use_cross_edges: bool = True
    """Use the cross-environment relation X (False = within-edges-only ablation)."""
    k_cross: int = 8
    """k_X: neighbours kept per task in *other* environments by signature cosine."""
    cross_exact_max: int = 20000
    """Up to this many distinct signatures, cross-env kNN is exact; beyond, pynndescent."""
    profile_weight: float = 1.0
    """Scale of the observed reward profile (mu_i, m_i, trend) inside the standardised signature."""
    cross_refresh_every: int = 1
    """Steps between re-rankings of cross edges with the current reward profiles ("rebuilt at refresh")."""
    n_patterns: int = 32
    """Number of k-means clusters of the static cross-env signature ("interaction patterns")."""

    # --- prediction ------------------------------------------------------------------------------
    temperature: float = 0.1
    """Softmax temperature: w_ij = softmax_j(sim_ij / temperature) over i's neighbours."""
    a_within: float = 0.5
    """a_W: initial precision weight of within-environment evidence in the fusion."""
    a_cross: float = 0.25
    """a_X: initial precision weight of cross-environment evidence in the fusion."""
    prior_variance: float = 0.05
    """v_0 before any rollout is seen; afterwards v_0 is the discounted running mean observed variance."""
    refit_min_pairs: int = 200
    """Refit a_W, a_X by non-negative least squares once this many (prediction, realised) pairs exist."""
    refit_window: int = 5000
    """Most recent (prediction, realised) pairs kept for the refit."""
    refit_ridge: float = 10.0
    """Pull of the refit toward the initial a_W, a_X, worth this many typical (prediction, realised) pairs."""
    predictor: str = "outcome"
    """'outcome': model each task's success rate (global feature model + own residual with forgetting +
    residuals propagated along W and X) and derive the variance from it; 'variance': the paper's fusion of
    discounted mean observed variances (kept as an ablation)."""
    use_global_model: bool = True
    """Outcome predictor: use the task features (tools, tool base names, signature, embedding) in the global
    online logistic model; False keeps only its intercept and environment effects (ablation)."""
    global_decay: float = 0.9
    """Weight of a group in the global model's refit per step of age (the policy moves)."""
    global_trend: bool = True
    """Fit a per-environment (and a global) linear trend in the age of the buffered groups beside the global
    model's weights, and predict at age 0: the weights are then where each environment is now, not its
    decay-weighted average over the window (``global_decay`` 0.9 averages ~9 steps back while the policy moves).
    Off, an improving environment's tasks were predicted ~2 logits behind and re-picked after they had started to
    pass every rollout; on, tuning worlds 0-4 needed 34 fewer steps to random's step-120 score in ``few-large``
    and 1.6-2.6 fewer in paper / default / shared (docs/scheduler.md, "Where each environment is now")."""
    global_window: int = 4096
    """Most recent groups kept for the global model's refit."""
    global_ridge: float = 10.0
    """L2 penalty of the global model's weights, in units of one rollout's log-likelihood."""
    global_iters: int = 30
    """L-BFGS iterations per refit of the global model (warm-started from the last fit)."""
    residual_prior_sd: float = 1.0
    """Prior sd (logits) of a task's own residual b_i before its neighbours or its own rollouts say more."""
    environment_level: bool = True
    """Outcome predictor: a task's residual is its environment's level plus its own deviation (b_i = u_e + d_i).
    u_e's posterior is computed on a grid from the exact binomial likelihood of the environment's recent groups
    (envsched_core/environment_level.py), so twenty all-fail groups in one environment say "out of reach" for its
    unseen tasks, which one all-fail group and W's 8-neighbour average cannot; tau (``residual_prior_sd``'s fit)
    becomes the spread within an environment. Measured, paired against it off: report worlds 100-104 -1.2 steps
    in default and shared, -2.4 in graded, 0.0 in paper; `settled` stress -2.4 (out-of-reach picks 0.284 -> 0.196);
    none of 35 stress regimes separated worse; ACEBench +1.0 steps (seeds 0-9), tau-bench 0.0
    (docs/scheduler.md, "Settled environments")."""
    environment_prior_sd: float = 1.0
    """Prior sd (logits) of an environment's shared level u_e (``environment_level``); the fit's starting value."""
    adapt_residual_prior: bool = False
    """Re-estimate the residuals' prior sd online (EM over the seen tasks), starting at residual_prior_sd.
    Off by default: measured neutral on the suite's tuning worlds (private 27.7 vs 28.3 steps, paper 30.3 vs 29.0)."""
    fit_residual_prior: bool = True
    """Empirical Bayes: after each update, refit the propagation weights a_W, a_X and the residual prior sd
    tau by maximising the marginal likelihood of the first visits' outcomes under the predictions made before
    them (outcome predictor). A world whose tasks share little with their neighbours then learns small a_* and
    a wide tau (trust each task's own rollouts), one with shared structure the opposite. Supersedes
    adapt_residual_prior; a_within, a_cross and residual_prior_sd become the starting values."""
    prior_fit_min_visits: int = 64
    """First visits needed before that fit runs; at most half the catalogue's tasks, so that a small catalogue
    fits too (ACEBench has 41 training tasks: with 64 the fit never ran, and tau stayed at residual_prior_sd)."""
    prior_fit_window: int = 2048
    """Most recent first visits kept for that fit."""
    residual_prior_tasks: float = 20.0
    """Pseudo-tasks of weight the configured residual_prior_sd keeps in that estimate."""
    residual_decay: float = 0.98
    """Forgetting of a task's own evidence: its residual precision is multiplied by this per step of age."""
    dispersion_prior_groups: float = 4.0
    """Pseudo-groups pulling an environment's variance / mean(1 - mean) ratio toward the pooled ratio."""
    dispersion_by_verifier: bool = True
    """Pool the dispersion ratio per verifier kind (the catalogue's ``verifier``, else ``reward_kind``) before
    pooling globally: an environment not yet seen mixed takes the ratio of environments rewarded the same way
    (binary checks ~1, K partial checks ~1/K), not the average over every kind. A catalogue with neither column
    has its kinds read from the rewards: not rolled out yet, only 0 / 1 so far, or partial credit
    (envsched_core/reward_kind.py)."""
    horizon_discount: float = 0.0
    """Outcome predictor: exploitation ranks a task at v_hat / (1 + gold calls)^horizon_discount: a group's
    advantage is shared by every decision of a rollout, so a long task's reward difference can teach each
    decision little (on tau-bench its variance came from read calls whose mistakes change nothing). Off by
    default: in 120-step skill-policy campaigns (bench/campaign_real.py, 3 seeds) 1.0 took tau-bench to random's
    best in 68.3 steps where the default never got there, but cost BFCL 90.0 -> 93.3 and ACEBench 93.3 -> 98.3
    steps, and the simulator (worlds 100-101), whose learning does not depend on a task's length,
    29.5 -> 35.0 (paper regime) and 21.0 -> 25.5 (default regime)."""
    transfer_weight: float = 1.0
    """Outcome predictor: exploitation ranks a task at v_hat * (T_i / mean T)^transfer_weight, and informed
    coverage weighs its optimistic variance by the same factor; T_i = how much predicted frontier mass
    E[p (1 - p)] of the whole catalogue shares the task's environment and tool base names
    (``OutcomeModel.frontier_transfer``): what a group teaches reaches held-out tasks only through shared skills,
    and more where many tasks sharing them are at the frontier. 0 = rank by v_hat alone. 1 (the first-order
    held-out gain, std x transfer, up to the std/variance power) measured on the suite's tuning worlds 0-2,
    exploitation only: paper 28.0 -> 27.0 steps, default 21.0 -> 17.7, private 27.0 -> 22.3, sparse 25.3 -> 17.0,
    graded 27.7 -> 19.0, drift 18.7 -> 13.7, few-large 34.3 -> 35.3, no-info 24.7 -> 25.3 (weights 0.5 / 1.5 / 2
    were no better); weighting coverage too: paper 26.3, default 16.7, private 21.3, sparse 15.3, many-small
    24.0 -> 20.0, no-info 26.7. An oracle fed the true held-out gain instead of the true variance needs 18.3 vs
    20.3 (paper), 12.0 vs 15.3 (default) steps (bench/scheduler_oracle.py). Real environments (campaign_real,
    2 seeds x 60 steps, B = 32): BFCL 47.5 steps either way, tau-bench 40.0 where 0 never reached random's best,
    ACEBench 37.5 vs 35.0 (docs/scheduler.md)."""
    transfer_per_environment: bool = False
    """Outcome predictor: the frontier transfer counts each environment's frontier mass per task of it (scaled by
    mean environment size / its size) instead of in total, so that a large environment does not draw exploitation
    by its size alone. For an evaluation that weighs environments equally while the catalogue's sizes differ; with
    equal sizes it changes nothing. Off: the held-out set is drawn like the catalogue. Measured (docs/scheduler.md,
    "Uneven environments"): the `uneven` stress world, 6 held-out tasks per environment, tuning worlds 0-4, steps
    24.8 -> 24.4, held-out at step 120 0.481 -> 0.587; tau-bench (held-out drawn from the catalogue, 3 seeds)
    56.7 -> 60.0 steps, final held-out 0.879 -> 0.888; ACEBench (10 seeds) 65.5 -> 67.5 steps, 0.928 either way;
    BFCL (3 seeds) 80.0 steps either way, 0.802 -> 0.795."""
    learning_progress: bool = False
    """Outcome predictor: exploitation ranks a task at v_hat times its length class's
    learning progress: the success its revisited tasks gained per unit of the variance they were trained on,
    pooled by gold-call count and regressed on log(1 + gold calls) (``envsched_core.progress``). Learned from the
    scheduler's own history, it is exactly 1 until the length slope is significant, so it switches itself off
    where task length does not matter; the learned counterpart of the fixed horizon_discount."""
    learnability_prior_sd: float = 0.0
    """Outcome predictor: exploitation and informed coverage weigh a task by how its own success moved per unit of
    the variance it was trained on, against the pooled rate of the revisited tasks (``envsched_core.learnability``):
    a posterior mean of the ratio with prior N(1, learnability_prior_sd^2), in [0.05, 1]. Catches tasks whose reward
    spread the policy cannot learn from (coin-flip verifiers, the `flaky` regime). 0 = off."""
    blind_env_prior: float = 0.1
    """Outcome predictor: exploitation and informed coverage weigh a task by the posterior chance that its
    environment's rewards move with training (``envsched_core.blind_environments``): every visit's mean reward
    against the variance the task had been trained on before it, a random intercept per task and one rate per
    environment, environments a mixture of blind (rate 0, this prior share, fitted by EM) and learnable at one
    common rate. Catches coin-flip verifiers, policy-blind judges and nondeterministic environments, which a
    variance ranker otherwise re-picks every step (the wild worlds, docs/scheduler.md, "Blind environments"). A
    catalogue of fewer than 10 environments is left alone. 0 = off."""
    unsolvable_prior: float = 0.05
    """Outcome predictor: exploitation and informed coverage weigh a task by 1 - the posterior chance that it never
    passes (``envsched_core.solvability``): every all-zero group at a predicted success p is evidence (1 - p)^G
    against its being learnable, one reward above 0 clears it for good, and the share of such tasks is fitted by EM
    with this prior mean (20 pseudo-tasks). Catches tasks with a wrong gold answer, which a logistic model keeps
    lifting back toward the frontier as their environment improves: in the `broken` stress regime (a fifth of the
    tasks never pass) it cut EnvSched's picks of them from 15% to 5% and raised the held-out score at step 120
    from 0.543 to 0.591 (tuning worlds 0-4); steps to target moved by at most 1.2 (paired, inside every interval)
    in the 13 suite regimes, 22 stress regimes and on BFCL, tau-bench and ACEBench (docs/scheduler.md, "Attack:
    tasks that never pass"). 0 = off."""
    task_dispersion: bool = True
    """Outcome predictor: exploitation weighs a task's predicted variance by its own variance / mean (1 - mean)
    ratio relative to its environment's, shrunk toward 1 with dispersion_prior_groups pseudo-groups
    (``envsched_core.dispersion``): a task whose graded reward is the same partial credit in every rollout
    stops looking as mixed as its environment's other tasks (ACEBench: one task scored 0.167 in all 55 of the
    groups default EnvSched gave it). On by default; measured with coverage_beats_exploit (see there)."""
    full_pass_weight: float = 0.5
    """What a rollout's reward counts as when EnvSched learns from it: (1 - w) * reward + w * [reward >= 1], the
    graded reward blended with its full pass. w = 0 reads partial credit only, w = 1 full passes only (as DPS and
    MoPPS do: a group is mixed only where passes and failures meet). At 0.5 partial credit and completion weigh
    the same: where full passes are rare (independent checks) the ranking is the graded one, where they are common
    (milestones, turns passed before the first failure) it tilts toward the groups where passes and failures meet.
    Training still uses the graded rewards; binary rewards read the same for every w (docs/scheduler.md,
    "Full passes or partial credit")."""
    full_pass_by_correlation: bool = True
    """Scale full_pass_weight per environment by how much its graded verifier's checks move together within a
    rollout (``envsched_core.check_correlation``): the whole weight from a correlation of 0.1 up (progress along a
    sequence: BFCL 0.25, ACEBench 0.44), about none for independent checks (the simulator's, ~0.02). Each
    environment starts at the whole weight."""
    reward_floor: bool = True
    """Read each environment's rewards above its floor, the lowest reward it has returned: (r - f) / (1 - f). An
    environment that credits a failed attempt (a format reward) then reads as one that scores it 0, as GRPO's
    normalised advantages read it; where a 0 has been seen nothing changes. False: rewards as they come
    (envsched_core/reward_range.py; docs/scheduler.md, "Rewards with a floor")."""
    reward_ceiling: bool = True
    """Read each environment's rewards below its ceiling: the highest reward it has returned (at least 0.6, below
    1) once it came back twice and no reward between its lowest and highest has: (r - f) / (c - f). A pass/fail
    environment that pays a pass less than 1 (a cost or step penalty on every successful trajectory) then reads as
    one that pays 1; where a 1 or a third value has been seen nothing changes. False: every ceiling 1
    (envsched_core/reward_range.py; docs/scheduler.md, "Rewards with a ceiling")."""
    training_dispersion: bool = False
    """Outcome predictor: the dispersion ratios (c_e per environment, and per task with task_dispersion) are the
    realised variance of the reward the trainer uses (the graded one) over the blended reading's mean (1 - mean),
    so that c_e E[p (1 - p)] of the blended success model predicts the variance GRPO normalises; off, they are the
    blended reading's own variance. Set it where partial credit is independent checks (unit tests passed out of
    K): the simulator's `paper` / `graded` regimes need 1.0 / 2.4 fewer steps with it. Off by default because where
    partial credit is progress along a sequence the blended variance ranks better: ACEBench, 20 seeds, 68.5 steps
    off against 71.25 on (docs/scheduler.md, "Dispersion from the training reward")."""
    optimism: float = 1.0
    """Informed coverage scores a task at its logit moved this many posterior sds toward 0 (p = 0.5)."""

    # --- scheduler -------------------------------------------------------------------------------
    rho: float = 0.3
    """Coverage fraction of the batch; rho = 1 is the coverage-only ablation."""
    eta: float = 0.3
    """Similarity penalty: exploit score = v_hat / v_max - eta * max sim to already chosen tasks."""
    env_quota_fraction: float = 0.2
    """Environment quota: at most max(env_quota_min, ceil(env_quota_fraction * B)) tasks per environment. A
    catalogue whose environments cannot fill B under it raises it to the smallest q with sum_e min(n_e, q) >= B
    (``EnvSched.env_quota``)."""
    env_quota_min: int = 2
    """Lower bound of the per-environment quota."""
    new_env_bonus: float = 0.5
    """Coverage bonus for a task whose environment is not yet in the batch."""
    new_tool_bonus: float = 0.5
    """Coverage bonus times the share of a task's tools not yet in the batch."""
    informed_coverage: bool = True
    """Coverage adds the optimistic predicted variance (outcome predictor) to the under-observation score,
    so an under-observed environment whose neighbours are mixed beats one whose neighbours all fail."""
    coverage_informativeness: float = 1.0
    """Weight of the optimistic predicted variance (divided by its maximum) in the coverage score."""
    adaptive_rho: bool = True
    """Shrink the coverage fraction as predictions get confident: rho_t = rho_min + (rho - rho_min) * u,
    u = mean posterior sd / prior sd of the top exploitation candidates (outcome predictor)."""
    rho_min: float = 0.1
    """Smallest coverage fraction adaptive rho may reach."""
    coverage_beats_exploit: bool = True
    """Outcome predictor: a coverage slot goes only to a task whose optimistic predicted variance (on the
    exploitation scale) beats the value of the last exploitation slot; when fewer tasks qualify than coverage
    slots, exploitation takes the rest. rho_t stays the most coverage a batch gets, so a small catalogue or
    batch whose tasks are all seen and confidently predicted (ACEBench, B=10) stops paying for coverage, and
    coverage skips tasks predicted to give no variance however under-observed they are. On by default with
    task_dispersion, measured together on screening seeds 10-11 (bench/campaign_real.py, docs/results.md "Real
    environments"): steps to random's best tau-bench 52.5 -> 45.0 (80 steps), BFCL 62.5 -> 57.5 (80 steps),
    ACEBench 88.3 -> 68.3 (120 steps, seeds 10-12); simulator (bench/suite_variants.py, worlds 100-101) paper
    28.0 -> 26.5, default 17.5 -> 17.5, private 20.5 -> 20.0, graded 21.0 -> 21.0."""
    refill_rounds: int = 0
    """Dynamic sampling by prediction: after a round's rewards are observed, while fewer than B of the step's
    groups were informative (reward variance > 0), roll out up to this many more rounds of the best-predicted
    tasks not yet rolled out this step (about 1.25 x the shortfall, exploitation's ranking, under the
    environment quota counted over the step's informative groups). The policy trains on the first B informative
    groups, as with DAPO / GRESO, and every rollout counts as spent. Needs a trainer that can generate again
    before its update (the pipeline's engines, the simulator); an asynchronous one (rewards observed late) runs
    one round, and the TRL / veRL adapters refuse it. 0: one round per step (docs/scheduler.md, "Refill rounds")."""
    oversample_factor: float = 0.0
    """Dynamic sampling in one generation pass: each step's first round adds k of exploitation's next-best tasks
    (role 'oversample', under the environment quota counted over all B + k) to the B it selects, with
    k = ceil(oversample_factor x B (1 - h) / h), at most B, and h the running share of first-round groups
    observed informative (weight 0.3 on the latest step; read as at least 0.3). The policy trains on the first
    B informative groups, as with DAPO's over-sampling, and every rollout counts as spent. Unlike refill rounds
    it needs no second pass and runs with rewards observed late; the TRL / veRL adapters, whose generation batch
    is fixed, refuse it. 0: off (docs/scheduler.md, "Over-sampled first round")."""
    silence_backoff: int = 30
    """Steps a task is held back after silent selections: ones whose group never came back (the trainer dropped
    it: every rollout timed out, the sandbox crashed) while a later step's rewards did. Each silent selection
    counts as a coverage visit; from the second in a row the task is not selected for silence_backoff steps,
    doubling with each further one, and any reward of it clears the count. A trainer that scores every rollout
    never triggers it. 0: off (envsched_core/silence.py; docs/scheduler.md, "Attack: groups that never come
    back")."""
    short_group_prior: float = 2.0
    """How many rollouts the population's share of rollouts that came back weighs against a task's own share.
    A runner that loses single rollouts (past the timeout, dropped rather than scored) returns short groups; a
    task's value is weighed by (n - 1) / n at its expected n returned rewards, relative to a full group's. A
    trainer that returns every rollout never triggers it. 0: off (envsched_core/short_groups.py;
    docs/scheduler.md, "Attack: groups that come back short")."""
    env_calibration: float = 0.0
    """Pseudo-groups (at the mean prediction) behind each environment's calibration factor: the variance its groups
    realised over the variance the outcome model predicted for them before their visit, both forgotten at
    residual_decay per step, weighs the value of its tasks. Catches environments whose spread the model keeps
    promising and never sees (all-fail groups only bound a logit). 0: off (envsched_core/env_calibration.py;
    docs/scheduler.md, "Settled environments")."""
    pool_factor: int = 4
    """Candidate pools are pruned to the top pool_factor * B tasks by score, so select stays fast at 1M."""

    def __post_init__(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise ValueError(f"SchedulerConfig: {message}")

        need(self.batch_size >= 1, f"batch_size={self.batch_size} must be >= 1.")
        need(
            self.group_size >= 2,
            f"group_size={self.group_size} must be >= 2: a GRPO group of one has no variance.",
        )
        need(0.0 < self.gamma <= 1.0, f"gamma={self.gamma} must be in (0, 1]; 1 means no discount.")
        need(
            self.k_within >= 1,
            f"k_within={self.k_within} must be >= 1; use use_within_edges=False to drop W.",
        )
        need(self.k_cross >= 1, f"k_cross={self.k_cross} must be >= 1; use use_cross_edges=False to drop X.")
        need(self.candidate_factor >= 1, f"candidate_factor={self.candidate_factor} must be >= 1.")
        weights = (self.weight_cosine, self.weight_tools, self.weight_state)
        need(
            min(weights) >= 0 and sum(weights) > 0,
            f"similarity weights {weights} must be >= 0 with a positive sum (default 0.5, 0.3, 0.2).",
        )
        need(self.exact_knn_max >= 1, f"exact_knn_max={self.exact_knn_max} must be >= 1.")
        need(self.cross_exact_max >= 1, f"cross_exact_max={self.cross_exact_max} must be >= 1.")
        need(self.profile_weight >= 0, f"profile_weight={self.profile_weight} must be >= 0.")
        need(
            self.cross_refresh_every >= 0,
            f"cross_refresh_every={self.cross_refresh_every} must be >= 0 (0 = never re-rank).",
        )
        need(self.n_patterns >= 1, f"n_patterns={self.n_patterns} must be >= 1.")
        need(self.temperature > 0, f"temperature={self.temperature} must be > 0 (default 0.1).")
        need(
            self.a_within >= 0 and self.a_cross >= 0,
            f"a_within={self.a_within}, a_cross={self.a_cross} must be >= 0 (precision weights).",
        )
        need(
            0.0 <= self.prior_variance <= 0.25,
            f"prior_variance={self.prior_variance} must be in [0, 0.25], the range of a [0, 1] reward's variance.",
        )
        need(self.refit_min_pairs >= 2, f"refit_min_pairs={self.refit_min_pairs} must be >= 2.")
        need(
            self.refit_window >= self.refit_min_pairs,
            f"refit_window={self.refit_window} must be >= refit_min_pairs={self.refit_min_pairs}.",
        )
        need(self.refit_ridge >= 0, f"refit_ridge={self.refit_ridge} must be >= 0.")
        need(
            0.0 <= self.full_pass_weight <= 1.0,
            f"full_pass_weight={self.full_pass_weight} must be in [0, 1] (0: graded reward, 1: full passes).",
        )
        need(
            0.0 <= self.rho <= 1.0, f"rho={self.rho} must be in [0, 1]; rho=1 is the coverage-only ablation."
        )
        need(self.eta >= 0, f"eta={self.eta} must be >= 0.")
        need(
            0.0 < self.env_quota_fraction <= 1.0,
            f"env_quota_fraction={self.env_quota_fraction} must be in (0, 1].",
        )
        need(self.env_quota_min >= 1, f"env_quota_min={self.env_quota_min} must be >= 1.")
        need(
            self.new_env_bonus >= 0 and self.new_tool_bonus >= 0,
            "new_env_bonus and new_tool_bonus must be >= 0.",
        )
        need(
            self.predictor in ("outcome", "variance"),
            f"predictor={self.predictor!r} must be 'outcome' or 'variance' (the paper's fusion).",
        )
        need(0.0 < self.global_decay <= 1.0, f"global_decay={self.global_decay} must be in (0, 1].")
        need(self.global_window >= 1, f"global_window={self.global_window} must be >= 1.")
        need(self.global_ridge > 0, f"global_ridge={self.global_ridge} must be > 0.")
        need(self.global_iters >= 1, f"global_iters={self.global_iters} must be >= 1.")
        need(self.residual_prior_sd > 0, f"residual_prior_sd={self.residual_prior_sd} must be > 0.")
        need(self.environment_prior_sd > 0, f"environment_prior_sd={self.environment_prior_sd} must be > 0.")
        need(
            self.prior_fit_min_visits >= 1, f"prior_fit_min_visits={self.prior_fit_min_visits} must be >= 1."
        )
        need(
            self.prior_fit_window >= self.prior_fit_min_visits,
            f"prior_fit_window={self.prior_fit_window} must be >= prior_fit_min_visits={self.prior_fit_min_visits}.",
        )
        need(self.residual_prior_tasks > 0, f"residual_prior_tasks={self.residual_prior_tasks} must be > 0.")
        need(0.0 < self.residual_decay <= 1.0, f"residual_decay={self.residual_decay} must be in (0, 1].")
        need(
            self.dispersion_prior_groups > 0,
            f"dispersion_prior_groups={self.dispersion_prior_groups} must be > 0.",
        )
        need(self.horizon_discount >= 0, f"horizon_discount={self.horizon_discount} must be >= 0 (0 = off).")
        need(self.transfer_weight >= 0, f"transfer_weight={self.transfer_weight} must be >= 0 (0 = off).")
        need(self.optimism >= 0, f"optimism={self.optimism} must be >= 0.")
        need(
            0.0 <= self.unsolvable_prior < 1.0,
            f"unsolvable_prior={self.unsolvable_prior} must be in [0, 1) (0 = off).",
        )
        need(
            0.0 <= self.blind_env_prior < 1.0,
            f"blind_env_prior={self.blind_env_prior} must be in [0, 1) (0 = off).",
        )
        need(
            self.learnability_prior_sd >= 0,
            f"learnability_prior_sd={self.learnability_prior_sd} must be >= 0 (0 = off).",
        )
        need(
            self.coverage_informativeness >= 0,
            f"coverage_informativeness={self.coverage_informativeness} must be >= 0.",
        )
        need(0.0 <= self.rho_min <= 1.0, f"rho_min={self.rho_min} must be in [0, 1] (capped at rho).")
        need(self.pool_factor >= 1, f"pool_factor={self.pool_factor} must be >= 1.")
        need(
            self.short_group_prior >= 0, f"short_group_prior={self.short_group_prior} must be >= 0 (0: off)."
        )
        need(self.env_calibration >= 0, f"env_calibration={self.env_calibration} must be >= 0 (0: off).")
        need(self.silence_backoff >= 0, f"silence_backoff={self.silence_backoff} must be >= 0 (0: off).")
        need(self.refill_rounds >= 0, f"refill_rounds={self.refill_rounds} must be >= 0 (0: one round).")
        need(
            self.oversample_factor >= 0, f"oversample_factor={self.oversample_factor} must be >= 0 (0: off)."
        )
        need(
            self.use_within_edges or self.use_cross_edges or self.rho == 1.0,
            "both relations are switched off; keep one of use_within_edges / use_cross_edges, "
            "or set rho=1.0 for the coverage-only ablation.",
        )

    @property
    def env_quota(self) -> int:
        """Most tasks of one environment in a batch: max(env_quota_min, ceil(env_quota_fraction * B))."""
        return max(self.env_quota_min, math.ceil(self.env_quota_fraction * self.batch_size))

    @property
    def n_exploit(self) -> int:
        """Exploitation slots (1 - rho) B; the rest of the batch is coverage."""
        return int(round((1.0 - self.rho) * self.batch_size))

    def to_dict(self) -> dict:
        return asdict(self)
