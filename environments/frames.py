"""A source's catalogue as DataFrames shaped like the warehouse tables (environments, tools, tasks)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import pandas as pd

from environments.base import SourceCatalog, content_hash


@dataclass
class CatalogFrames:
    environments: pd.DataFrame
    tools: pd.DataFrame
    tasks: pd.DataFrame


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def catalog_frames(catalog: SourceCatalog) -> CatalogFrames:
    env_rows, tool_rows = [], []
    effects_by_env: dict[str, dict[str, str]] = {}
    for env in catalog.environments:
        row = {
            "env_id": env.env_id,
            "source": env.source,
            "name": env.name,
            "description": env.description,
            "n_tools": len(env.tools),
            "metadata": json.dumps(env.metadata, sort_keys=True),
        }
        row["content_hash"] = content_hash([row, [asdict(t) for t in env.tools]])
        env_rows.append(row)
        effects_by_env[env.env_id] = {}
        for tool in env.tools:
            tool_row = {
                "env_id": env.env_id,
                "tool_name": tool.name,
                "source": env.source,
                "effect": tool.effect,
                "description": tool.description,
                "parameters": json.dumps(tool.parameters, sort_keys=True),
            }
            tool_row["content_hash"] = content_hash(tool_row)
            tool_rows.append(tool_row)
            effects_by_env[env.env_id][tool.name] = tool.effect
    task_rows = []
    for task in catalog.tasks:
        effects = effects_by_env.get(task.env_id, {})
        row = {
            "task_id": task.task_id,
            "env_id": task.env_id,
            "source": task.source,
            "split": task.split,
            "text": task.text,
            "user_turns": list(task.user_turns),
            "tools": list(task.tools),
            "tool_effects": [effects.get(name, "unknown") for name in task.tools],
            "state_fields": list(task.state_fields),
            "turns": len(task.user_turns),
            "gold_calls": task.gold_calls,
            "verifier": task.verifier,
            # A plain dict per call: the same JSON as dataclasses.asdict, without its deep copies
            # (asdict was two thirds of the time at 100k tasks).
            "gold": json.dumps(
                [[{"name": c.name, "arguments": c.arguments} for c in turn] for turn in task.gold],
                sort_keys=True,
            ),
            "metadata": json.dumps(task.metadata, sort_keys=True),
            "text_hash": text_hash(task.text),
        }
        row["content_hash"] = content_hash(row)
        task_rows.append(row)
    return CatalogFrames(pd.DataFrame(env_rows), pd.DataFrame(tool_rows), pd.DataFrame(task_rows))
