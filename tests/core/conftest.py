"""Fixtures shared by the scheduler tests here: a small catalogue and a world in which most groups fail."""

import numpy as np
import pytest
from task_frames import make_tasks

from envsched_core import TaskCatalog


@pytest.fixture(scope="module")
def catalog():
    """Ten environments of twelve tasks."""
    return TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=12))


@pytest.fixture(scope="module")
def success(catalog):
    """A third of the tasks mixed, the rest always fail: most of a cold batch comes back zero-variance. (A test
    module may define its own world under this name.)"""
    rng = np.random.default_rng(1)
    p = np.where(rng.random(len(catalog)) < 1 / 3, 0.5, 0.0)
    return dict(zip(catalog.task_ids, p, strict=True))
