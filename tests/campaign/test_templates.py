"""Campaign templates (YAML -> campaigns) and the warm start of a continuing campaign's scheduler."""

from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from campaign.templates import CampaignTemplate, load_templates
from campaign.warm_start import timeline
from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.simulator import SimConfig, Simulator

NIGHTLY = """
name: nightly
cron: "0 2 * * *"
sources: [bfcl_v3_multi_turn]
scheduler: envsched
engine: simulated
batch_size: 16
group_size: 4
steps: 3
continue_from: latest
"""


def test_template_names_each_campaign_by_date_and_sets_the_template(tmp_path):
    (tmp_path / "nightly.yaml").write_text(NIGHTLY)
    (template,) = load_templates(tmp_path)
    config = template.campaign_config(datetime(2026, 12, 1, 2, 0))
    assert config.campaign_id == "nightly-20261201"
    assert (config.template, config.continue_from, config.steps) == ("nightly", "latest", 3)
    assert template.schedule_name == "nightly_schedule"
    hourly = CampaignTemplate(name="h", cron="0 * * * *", fields={}, path=tmp_path / "h.yaml")
    assert hourly.campaign_id(datetime(2026, 12, 1, 5, 0)) == "h-20261201-0500"


@pytest.mark.parametrize(
    "text, message",
    [
        # (the template file, what the error must name)
        (NIGHTLY.replace('"0 2 * * *"', '"every night"'), "cron 'every night' is not a cron expression"),
        (NIGHTLY + "colour: red\n", "unknown field(s) ['colour']"),
        (NIGHTLY.replace("envsched", "envshed"), "scheduler 'envshed' unknown"),
        (NIGHTLY + "scheduler_config: {rho: 3}\n", "rho=3 must be in [0, 1]"),
        (NIGHTLY + "campaign_id: fixed\n", "unknown field(s) ['campaign_id']"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_template_with_a_bad_field_names_the_file_and_the_field(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_templates(tmp_path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_shipped_templates_load():
    assert [t.name for t in load_templates()] == ["bfcl-nightly"]


def _history(catalog: TaskCatalog, rng) -> pd.DataFrame:
    """Two earlier campaigns of a template (3 and 2 steps), 6 tasks a step, G = 4."""
    rows = []
    for campaign, steps in (("old", 3), ("newer", 2)):
        for step in range(1, steps + 1):
            for task in rng.choice(catalog.task_ids, size=6, replace=False):
                for reward in rng.integers(0, 2, size=4):
                    rows.append(
                        {"campaign_id": campaign, "step": step, "task_id": task, "reward": float(reward)}
                    )
    return pd.DataFrame(rows)


def test_a_warm_started_envsched_sees_the_template_campaigns_end_to_end():
    world = Simulator(SimConfig(n_envs=3, tasks_per_env=10, n_tool_types=12), seed=0)
    catalog = TaskCatalog.from_frame(world.catalog_frame())
    history = _history(catalog, np.random.default_rng(0))
    retired = pd.DataFrame({"campaign_id": "old", "step": 1, "task_id": "retired-task", "reward": [1.0, 0.0]})
    steps = timeline(pd.concat([history, retired], ignore_index=True), catalog)
    assert sorted(steps["step"].unique()) == [1, 2, 3, 4, 5]  # old steps 1-3, then newer steps 1-2
    assert "retired-task" not in set(steps["task_id"])  # no longer in the pool
    sched = EnvSched(catalog, SchedulerConfig(batch_size=6, group_size=4, gamma=0.8), seed=0)
    sched.warm_start(steps)
    newest_only = set(steps.loc[steps.step == 5, "task_id"]) - set(steps.loc[steps.step < 5, "task_id"])
    rows = catalog.indices_of(np.array(sorted(newest_only), dtype=object), what="task")
    step1 = sched.step_offset + 1  # the new campaign's step 1 on the scheduler's clock
    np.testing.assert_allclose(sched.stats.n_at(step1)[rows], 0.8)  # seen once, one step before step 1
    oldest_only = set(steps.loc[steps.step == 1, "task_id"]) - set(steps.loc[steps.step > 1, "task_id"])
    rows = catalog.indices_of(np.array(sorted(oldest_only), dtype=object), what="task")
    np.testing.assert_allclose(sched.stats.n_at(step1)[rows], 0.8**5)  # five steps before step 1
