"""CampaignConfig: everything that defines a campaign, checked in full when it is built.

A campaign = which tasks (sources, splits), which scheduler (EnvSched or a baseline, with config
overrides), batch and group size, rollout engine, number of steps and seed. It is stored as JSON in
``campaigns`` and is a Dagster dynamic partition; steps are rows, not partitions. Building one
validates the scheduler's own config too (``envsched_core.schedulers.scheduler_config``), so a bad
field fails before any row is written.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from campaign.registry import ENGINES, SCHEDULERS, check_engine_options, scheduler_config

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # fullmatch: `$` would accept a trailing newline
CONTINUE_LATEST = "latest"


@dataclass
class CampaignConfig:
    """Everything that defines a campaign; stored as JSON in ``campaigns.config``."""

    campaign_id: str
    """Name of the campaign (letters, digits, ``_.-``); also its Dagster partition key."""
    sources: list[str] = field(default_factory=lambda: ["bfcl_v3_multi_turn"])
    """Environment sources whose tasks form the training pool."""
    splits: list[str] = field(default_factory=list)
    """Task splits in the training pool; empty = every split (held-out tasks are always excluded)."""
    heldout_splits: list[str] = field(default_factory=list)
    """Task splits held out whole for evaluation (e.g. tau-bench retail's ``test``, BFCL's ``long_context``)."""
    heldout_fraction: float = 0.2
    """Share of the other tasks held out by a hash of their task id (seed-independent, so every
    campaign over the same catalogue evaluates on the same tasks); 0 = none."""
    eval_every: int = 5
    """Evaluate the policy on the held-out tasks every this many steps (and at step 1); 0 = never."""
    scheduler: str = "envsched"
    """``envsched`` or a baseline: random, dapo, dapo-1x, greso, mopps, dps."""
    scheduler_config: dict[str, Any] = field(default_factory=dict)
    """Overrides of the scheduler's config fields (SchedulerConfig, or the baseline's config class),
    e.g. {"rho": 1.0}. Graph fields (k_within, weight_*, candidate_factor, k_cross ...) make the
    campaign build its own graph instead of the stored one."""
    batch_size: int = 64
    """B: tasks per step."""
    group_size: int = 8
    """G: rollouts per task."""
    engine: str = "simulated"
    """Rollout engine: ``simulated`` (the envsched_core simulator over the real catalogue, CPU, seconds),
    ``skill`` (the skill policy acting in the real environments, real verifiers, CPU), ``hf`` (a causal
    LM with transformers ``generate`` in the real environments, GRPO update; CPU or GPU) or ``vllm``
    (the same with vLLM sampling on a GPU)."""
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Options of the engine's constructor (e.g. a model path)."""
    steps: int = 20
    """Steps to run."""
    keep_checkpoints: int = 0
    """Checkpoint folders kept per campaign (newest first); 0 keeps all."""
    seed: int = 0
    """Seed of the scheduler and the engine."""
    template: str = ""
    """The campaign template this campaign was started from (empty: started by hand)."""
    continue_from: str = ""
    """Campaign whose last checkpoint the policy starts from, and whose template's rollout history
    warm-starts the scheduler (discounted by age). ``latest`` is resolved to the template's newest
    earlier campaign when the campaign is registered; empty = a fresh start."""

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.campaign_id):
            raise ValueError(f"campaign_id {self.campaign_id!r}: use 1-64 letters, digits, '_', '.', '-'")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler {self.scheduler!r} unknown; choose from {sorted(SCHEDULERS)}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine {self.engine!r} unknown; choose from {list(ENGINES)}")
        if self.batch_size < 1 or self.group_size < 2:
            raise ValueError("batch_size must be >= 1 and group_size >= 2 (a group of 1 has no variance)")
        if self.steps < 1:
            raise ValueError("steps must be >= 1")
        if not self.sources:
            raise ValueError("sources is empty; name at least one environment source (`envsched envs list`)")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction}")
        if set(self.splits) & set(self.heldout_splits):
            raise ValueError(
                f"split(s) {sorted(set(self.splits) & set(self.heldout_splits))} are both trained on and "
                "held out; remove them from `splits` or from `heldout_splits`"
            )
        if self.eval_every < 0:
            raise ValueError("eval_every must be >= 0 (0 = never evaluate)")
        if self.keep_checkpoints < 0:
            raise ValueError("keep_checkpoints must be >= 0 (0 keeps all)")
        if self.continue_from == CONTINUE_LATEST and not self.template:
            raise ValueError(
                "continue_from='latest' needs a template (the latest campaign of which template?)"
            )
        if (
            self.continue_from
            and self.continue_from != CONTINUE_LATEST
            and not _ID.fullmatch(self.continue_from)
        ):
            raise ValueError(f"continue_from {self.continue_from!r} is not a campaign id or 'latest'")
        check_engine_options(self.engine, self.engine_options)
        self.scheduler_settings()  # validates the scheduler's own config now, before anything is stored

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CampaignConfig:
        data = dict(data)
        # Campaigns stored before held-out splits existed trained on their whole pool: keep it so.
        data.setdefault("heldout_fraction", 0.0)
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"campaign config has unknown field(s) {sorted(unknown)}")
        return cls(**data)

    def scheduler_settings(self) -> Any:
        """The validated config object the scheduler takes (SchedulerConfig or the baseline's)."""
        return scheduler_config(self.scheduler, self.batch_size, self.group_size, self.scheduler_config)

    @property
    def gamma(self) -> float:
        """Per-step discount of the own-history statistics (SchedulerConfig.gamma for every scheduler)."""
        settings = self.scheduler_settings()
        return float(getattr(settings, "gamma", 0.8))
