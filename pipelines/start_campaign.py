"""The `start_campaign` job: register a campaign (its row and its Dagster partition) from a typed
config; the campaign sensor then plans step 1 and advances it step by step with no further clicks.

Launched from the Launchpad, by `envsched campaign start` / `run`, or by a template's schedule.
"""

from datetime import UTC, datetime
from enum import Enum
from typing import Any

import dagster as dg

from campaign.config import CONTINUE_LATEST, CampaignConfig
from campaign.registry import ENGINES, SCHEDULERS
from pipelines.campaign_status import PARTITIONS, tag_run
from pipelines.resources import WarehouseResource

SchedulerChoice = Enum("SchedulerChoice", {name: name for name in SCHEDULERS})
EngineChoice = Enum("EngineChoice", {name: name for name in ENGINES})


class StartCampaignConfig(dg.Config):
    """The fields of `envsched campaign run` (see campaign.config.CampaignConfig for each)."""

    campaign_id: str = ""
    """Empty: <scheduler>-<engine>-<UTC timestamp>. An existing id with the same config resumes it."""
    steps: int = 5
    scheduler: SchedulerChoice = SchedulerChoice.envsched  # type: ignore[valid-type]
    engine: EngineChoice = EngineChoice.simulated  # type: ignore[valid-type]
    model: str = ""
    """Local model folder for the hf / vllm engines."""
    engine_options: dict[str, Any] = {}
    sources: list[str] = ["bfcl_v3_multi_turn"]
    splits: list[str] = []
    heldout_splits: list[str] = []
    heldout_fraction: float = 0.2
    eval_every: int = 5
    batch_size: int = 64
    group_size: int = 8
    seed: int = 0
    scheduler_config: dict[str, Any] = {}
    """Overrides of the scheduler's config fields, e.g. {rho: 1.0}."""
    keep_checkpoints: int = 0
    template: str = ""
    continue_from: str = ""
    """A campaign id, or `latest` (the template's newest earlier campaign)."""
    resume_failed: bool = False
    """Relaunching an existing campaign that failed: true resumes it (after you fixed the cause), as
    `envsched campaign resume ID --force` does. A running campaign relaunched gets its retries back."""

    def campaign_config(self, now: datetime | None = None) -> CampaignConfig:
        """The CampaignConfig these fields describe (raises ValueError naming a bad field)."""
        scheduler, engine = self.scheduler.value, self.engine.value
        stamp = f"{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}"
        return CampaignConfig(
            campaign_id=self.campaign_id or f"{scheduler}-{engine}-{stamp}",
            sources=list(self.sources),
            splits=list(self.splits),
            heldout_splits=list(self.heldout_splits),
            heldout_fraction=self.heldout_fraction,
            eval_every=self.eval_every,
            scheduler=scheduler,
            scheduler_config=dict(self.scheduler_config),
            batch_size=self.batch_size,
            group_size=self.group_size,
            engine=engine,
            engine_options={**self.engine_options, **({"model": self.model} if self.model else {})},
            steps=self.steps,
            keep_checkpoints=self.keep_checkpoints,
            seed=self.seed,
            template=self.template,
            continue_from=self.continue_from,
        )


def run_config_for(config: CampaignConfig, resume_failed: bool = False) -> dict:
    """The `start_campaign` run config that starts ``config`` (CLI and schedules use it);
    ``resume_failed`` resumes it if it failed."""
    fields = config.to_dict()
    options = dict(fields.pop("engine_options"))
    fields["engine_options"] = options
    if resume_failed:
        fields["resume_failed"] = True
    return {"ops": {"register_campaign": {"config": fields}}}


def _resolve_continue_from(store, config: CampaignConfig) -> CampaignConfig:
    if config.continue_from != CONTINUE_LATEST:
        return config
    previous = (
        store.latest_template_campaign(config.template, config.campaign_id) if store.path.exists() else None
    )
    return CampaignConfig.from_dict({**config.to_dict(), "continue_from": previous or ""})


@dg.op(description="Register the campaign: its row in `campaigns` and its `campaigns` partition.")
def register_campaign(
    context: dg.OpExecutionContext, config: StartCampaignConfig, warehouse: WarehouseResource
) -> str:
    try:
        campaign = config.campaign_config()
    except ValueError as exc:
        raise dg.Failure(description=f"bad campaign config: {exc}") from None
    store = warehouse.warehouse()
    existing = None
    if store.path.exists():
        rows = store.campaign_overview(campaign.campaign_id)
        existing = None if rows.empty else store.campaign(campaign.campaign_id)
    if existing is not None and campaign.continue_from == CONTINUE_LATEST:
        campaign = CampaignConfig.from_dict(
            {**campaign.to_dict(), "continue_from": existing["config"].get("continue_from", "")}
        )
    else:
        campaign = _resolve_continue_from(store, campaign)
    stored = campaign.to_dict()
    if existing is not None and CampaignConfig.from_dict(existing["config"]) == campaign:
        stored = existing["config"]  # saved by an earlier release: the fields added since take their defaults
    try:
        created = store.create_campaign(campaign.campaign_id, stored, campaign.scheduler)
    except ValueError as exc:
        raise dg.Failure(description=str(exc)) from None
    context.instance.add_dynamic_partitions(PARTITIONS, [campaign.campaign_id])
    tag_run(context, campaign.campaign_id, 0)
    status = store.campaign(campaign.campaign_id)["status"]
    if not created and (status in ("created", "running") or (status == "failed" and config.resume_failed)):
        # a relaunch: the campaign sensor counts a step's failed runs anew from here (campaign_sensor.attempt)
        status = "running" if status == "failed" else status
        store.set_campaign_status(campaign.campaign_id, status)
    context.add_output_metadata(
        {
            "campaign_id": campaign.campaign_id,
            "new": created,
            "status": status,
            "continues_from": campaign.continue_from or "(fresh start)",
            "next": (
                "the campaign failed; relaunch with resume_failed: true once its cause is fixed"
                if status == "failed"
                else "the campaign sensor plans its next step and advances the campaign step by step"
            ),
        }
    )
    return campaign.campaign_id


@dg.job(
    description="Start a campaign (scheduler, engine, B, G, steps, sources); the daemon runs it to the end.",
    executor_def=dg.in_process_executor,
)
def start_campaign():
    register_campaign()
