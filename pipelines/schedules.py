"""One Dagster schedule per campaign template (``campaign.templates``), stopped until switched on in
the UI (Automation). Each tick starts the campaign ``<template>-<date>`` through `start_campaign`."""

import dagster as dg

from campaign.templates import CampaignTemplate, load_templates
from pipelines.campaign_status import CAMPAIGN_TAG, STEP_TAG
from pipelines.start_campaign import run_config_for, start_campaign


def template_schedule(template: CampaignTemplate) -> dg.ScheduleDefinition:
    def tick(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        config = template.campaign_config(context.scheduled_execution_time)
        return dg.RunRequest(
            run_key=config.campaign_id,  # one campaign per tick, however often the tick is evaluated
            run_config=run_config_for(config),
            tags={CAMPAIGN_TAG: config.campaign_id, STEP_TAG: "0", "envsched/template": template.name},
        )

    return dg.ScheduleDefinition(
        name=template.schedule_name,
        cron_schedule=template.cron,
        job=start_campaign,
        execution_fn=tick,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Starts campaign {template.name}-<date> from {template.path.name} "
        f"({template.fields.get('steps', 20)} steps, continue_from: {template.fields.get('continue_from') or 'none'}).",
    )


def template_schedules() -> list[dg.ScheduleDefinition]:
    return [template_schedule(t) for t in load_templates()]
