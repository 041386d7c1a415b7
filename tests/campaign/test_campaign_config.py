"""CampaignConfig is checked in full when it is built, the scheduler's own config included."""

import pytest

from campaign.config import CampaignConfig
from envsched_core import SchedulerConfig, TaskCatalog
from envsched_core.baselines import DAPOConfig
from envsched_core.schedulers import SCHEDULERS, Scheduler, graph_overrides
from envsched_core.simulator import SimConfig, Simulator


@pytest.mark.parametrize(
    "changes, message",
    [
        # (fields of the campaign, what the error must name)
        ({"scheduler": "nope"}, "scheduler 'nope' unknown"),
        ({"engine": "gpu9000"}, "engine 'gpu9000' unknown"),
        ({"scheduler_config": {"rho": 1.5}}, "rho=1.5 must be in [0, 1]"),  # SchedulerConfig's own check
        ({"scheduler_config": {"rhoo": 0.5}}, "envsched has no field(s) ['rhoo']"),
        ({"scheduler": "dapo", "scheduler_config": {"rho": 0.5}}, "dapo has no field(s) ['rho']"),
        (
            {"scheduler": "dapo", "scheduler_config": {"gen_batch_ratio": "x"}},
            "gen_batch_ratio must be a number",
        ),
        ({"scheduler": "mopps", "scheduler_config": {"ts_ratio": 2.5}}, "ts_ratio must be an integer"),
        ({"scheduler_config": {"batch_size": 8}}, "set batch_size on the campaign"),
        ({"continue_from": "latest"}, "needs a template"),
        ({"sources": []}, "sources is empty"),
        ({"engine_options": {"bogus": 1}}, "the simulated engine takes no option(s) ['bogus']"),
        # engines that take **options: checked against their options dataclass / policy config, before a write
        (
            {"engine": "hf", "engine_options": {"max_tokens": 64}},
            "the hf engine takes no option(s) ['max_tokens']",
        ),
        (
            {"engine": "vllm", "engine_options": {"gpu_mem": 0.5}},
            "the vllm engine takes no option(s) ['gpu_mem']",
        ),
        ({"engine": "skill", "engine_options": {"initial_sucess": 0.2}}, "['initial_sucess']; it takes"),
        ({"campaign_id": "a b"}, "campaign_id 'a b'"),
    ],
)
def test_campaign_config_rejects_bad_fields_when_built(changes, message):
    with pytest.raises(ValueError) as error:
        CampaignConfig(**{"campaign_id": "c", **changes})
    assert message in str(error.value)


def test_every_engine_has_its_options_checked():
    from campaign.registry import ENGINE_CLASSES, ENGINES, engine_option_names

    assert set(ENGINE_CLASSES) == set(ENGINES)  # an engine added to ENGINES needs its entry here
    assert all(engine_option_names(engine) for engine in ENGINES)  # names known, none takes any option


def test_campaign_config_takes_every_option_the_engines_take():
    # names only: a stored config whose model folder has since moved still loads
    CampaignConfig("h", engine="hf", engine_options={"model": "/gone", "deterministic": True, "grpo": {}})
    CampaignConfig("v", engine="vllm", engine_options={"model": "/gone", "gpu_memory_utilization": 0.3})
    CampaignConfig(
        "s", engine="skill", engine_options={"initial_success": 0.2, "workers": 2, "reward": "graded"}
    )


def test_campaign_config_gives_each_scheduler_its_own_config_class():
    dapo = CampaignConfig(
        campaign_id="d", scheduler="dapo", batch_size=16, scheduler_config={"gen_batch_ratio": 2}
    )
    settings = dapo.scheduler_settings()
    assert isinstance(settings, DAPOConfig) and settings.gen_batch_ratio == 2 and settings.batch_size == 16
    envsched = CampaignConfig(campaign_id="e", batch_size=100, scheduler_config={"env_quota_fraction": 0.1})
    assert isinstance(envsched.scheduler_settings(), SchedulerConfig)
    assert envsched.scheduler_settings().env_quota == 10  # max(2, ceil(0.1 * 100))


def test_campaign_config_round_trips_through_json_fields():
    config = CampaignConfig(
        campaign_id="r", scheduler="mopps", scheduler_config={"ts_ratio": 4}, template="t"
    )
    assert CampaignConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown field"):
        CampaignConfig.from_dict({**config.to_dict(), "colour": "red"})


def test_schedulers_registry_classes_follow_the_scheduler_protocol():
    world = Simulator(SimConfig(n_envs=3, tasks_per_env=8, n_tool_types=12), seed=0)
    tiny_catalog = TaskCatalog.from_frame(world.catalog_frame())
    for name, spec in SCHEDULERS.items():
        config = CampaignConfig(campaign_id="p", scheduler=name, batch_size=4, group_size=2)
        scheduler = spec.cls(tiny_catalog, config.scheduler_settings(), seed=0)
        assert isinstance(scheduler, Scheduler), name


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({}, (False, False)),
        ({"rho": 1.0}, (False, False)),  # not a graph field
        ({"k_within": 8}, (False, False)),  # the default: the stored graph is the campaign's graph
        ({"k_within": 4}, (True, False)),
        ({"weight_tools": 0.5}, (True, False)),
        ({"k_cross": 3}, (False, True)),
        ({"candidate_factor": 2}, (True, True)),  # both graphs draw candidates with it
    ],
)
def test_graph_overrides_name_the_graphs_a_config_changes(overrides, expected):
    assert graph_overrides("envsched", overrides) == expected
