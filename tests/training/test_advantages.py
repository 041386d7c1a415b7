import numpy as np
import pytest

from training.advantages import group_advantages, zero_variance_groups


def test_advantages_std_normalised_by_hand():
    adv = group_advantages(np.array([[1.0, 0.0, 0.0, 1.0]]), eps=0.0)
    np.testing.assert_allclose(adv, [[1.0, -1.0, -1.0, 1.0]])


def test_advantages_mean_only_keeps_scale_and_zero_variance_group_is_zero():
    adv = group_advantages(np.array([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]]), scale="mean_only")
    np.testing.assert_allclose(adv, [[0.75, -0.25, -0.25, -0.25], [0, 0, 0, 0]])
    assert zero_variance_groups(np.array([[1.0, 0.0], [0.5, 0.5], [1.0, 1.0]])) == 2


def test_advantages_reject_bad_shapes_and_scales():
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="unknown"):
        group_advantages(np.array([[1.0, 0.0]]), scale="rank")
