"""Checkpoint folders: ``<checkpoints>/<campaign>/step=<t>/``, written atomically, old ones pruned."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from training.engines.base import RolloutEngine

_STEP = re.compile(r"^step=(\d+)$")


def checkpoint_dir(root: Path, campaign_id: str, step: int) -> Path:
    return root / campaign_id / f"step={step}"


def save_checkpoint(engine: RolloutEngine, root: Path, campaign_id: str, step: int, keep: int = 0) -> Path:
    """Save into a temporary folder, then rename: a crash never leaves half a checkpoint under the
    final name. ``keep`` > 0 deletes all but the newest ``keep`` step folders of the campaign."""
    final = checkpoint_dir(root, campaign_id, step)
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    engine.save(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    if keep > 0:
        steps = sorted(int(m.group(1)) for p in final.parent.iterdir() if (m := _STEP.match(p.name)))
        for old in steps[:-keep]:
            shutil.rmtree(checkpoint_dir(root, campaign_id, old), ignore_errors=True)
    return final
