"""Whether a saved scheduler state fits the scheduler it is loaded into.

A state fits when this release saved it (its format), over the same catalogue (the same task ids in the
same order) and, for EnvSched, under the same config and task features. A state that does not fit is no
fault of the campaign: its rollouts still hold everything the state summarised, so a campaign rebuilds the
scheduler from them (``warm_start`` or a replay) instead of loading it. Any other fault of a state (a
missing array, a corrupt field) stays a plain ValueError, which stops the campaign.
"""

from __future__ import annotations

from typing import Any


class StateMismatch(ValueError):
    """A saved state this scheduler cannot load as is (another release, catalogue, config or feature set).
    Raised before anything is restored, so the scheduler is left as it was."""


def check_catalog(owner: str, state: dict[str, Any], n_tasks: int, digest: str) -> None:
    """Raise StateMismatch unless ``state`` was saved over this catalogue (``n_tasks`` tasks, ``digest``)."""
    if state["n_tasks"] != n_tasks:
        raise StateMismatch(
            f"{owner}: state is for {state['n_tasks']} tasks, this catalogue has {n_tasks}; "
            "warm_start from its rollouts instead."
        )
    if state.get("catalog_digest", digest) != digest:  # absent: saved before states carried one
        raise StateMismatch(
            f"{owner}: state is for another catalogue (same size, other task ids or order); "
            "warm_start from its rollouts instead."
        )
