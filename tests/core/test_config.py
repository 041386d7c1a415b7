import pytest

from envsched_core import SchedulerConfig


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"batch_size": 0}, "batch_size=0"),  # empty batch
        ({"gamma": 1.5}, "gamma=1.5"),  # discount above 1 would amplify old visits
        ({"rho": 1.2}, "rho=1.2"),  # coverage fraction is a share
        ({"temperature": 0.0}, "temperature=0.0"),  # softmax division by zero
        ({"k_within": 0}, "use_within_edges=False"),  # fix-it: points at the ablation switch
        ({"use_within_edges": False, "use_cross_edges": False}, "rho=1.0"),  # fix-it: coverage-only ablation
        ({"refit_min_pairs": 500, "refit_window": 100}, "refit_window=100"),
        ({"predictor": "oracle"}, "predictor='oracle'"),  # only the outcome model and the paper's fusion
        ({"residual_decay": 0.0}, "residual_decay=0.0"),  # would forget a visit at once
        ({"rho_min": 1.5}, "rho_min=1.5"),
        ({"full_pass_weight": -0.5}, "full_pass_weight=-0.5"),  # a weight of the graded reward above 1
    ],
)
def test_config_rejects_bad_values_with_fix_it_message(changes, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("(", r"\(")):
        SchedulerConfig(**changes)


def test_config_defaults_are_designs_numbers():
    cfg = SchedulerConfig()
    assert (cfg.gamma, cfg.k_within, cfg.k_cross, cfg.temperature) == (0.8, 8, 8, 0.1)
    assert (cfg.weight_cosine, cfg.weight_tools, cfg.weight_state) == (0.5, 0.3, 0.2)
    assert (cfg.a_within, cfg.a_cross, cfg.refit_min_pairs, cfg.rho, cfg.eta) == (0.5, 0.25, 200, 0.3, 0.3)


@pytest.mark.parametrize(("batch_size", "quota"), [(8, 2), (32, 7), (64, 13)])  # max(2, ceil(0.2 B))
def test_config_env_quota_is_max_of_two_and_twenty_percent(batch_size, quota):
    assert SchedulerConfig(batch_size=batch_size).env_quota == quota


def test_config_env_quota_fraction_of_the_paper_is_a_setting():
    assert SchedulerConfig(batch_size=256, env_quota_fraction=0.05).env_quota == 13


def test_config_coverage_only_ablation_needs_no_relation():
    cfg = SchedulerConfig(rho=1.0, use_within_edges=False, use_cross_edges=False)
    assert cfg.n_exploit == 0
