"""Catalogue stage: load every configured environment source into environments, tools and tasks."""

from typing import Any

import dagster as dg
import pandas as pd

from environments.frames import catalog_frames
from environments.registry import get_source
from pipelines.resources import WarehouseResource

CATALOG_TABLES = ("environments", "tools", "tasks")
WAREHOUSE_POOL = "warehouse"


class CatalogConfig(dg.Config):
    """Which environment sources to load, with per-source constructor options."""

    sources: list[str] = ["bfcl_v3_multi_turn"]
    source_options: dict[str, dict[str, Any]] = {}


@dg.multi_asset(
    specs=[
        dg.AssetSpec("environments", group_name="catalog", description="One row per executable environment."),
        dg.AssetSpec(
            "tools", group_name="catalog", description="Tools of each environment (JSON-schema spec, effect)."
        ),
        dg.AssetSpec(
            "tasks", group_name="catalog", description="Tasks with their turns, gold solution and verifier."
        ),
    ],
    name="environment_catalog",
    pool=WAREHOUSE_POOL,
)
def environment_catalog(
    context: dg.AssetExecutionContext, config: CatalogConfig, warehouse: WarehouseResource
):
    """Load each source (all files are read before anything is written) and upsert it by content hash."""
    loaded = []
    for name in config.sources:
        source = get_source(name, **config.source_options.get(name, {}))
        loaded.append((name, catalog_frames(source.load())))
    store = warehouse.warehouse()
    counts: dict[str, dict[str, Any]] = {table: {} for table in CATALOG_TABLES}
    for name, frames in loaded:
        result = store.upsert_catalog(name, frames.environments, frames.tools, frames.tasks)
        for table, c in result.items():
            counts[table][name] = vars(c)
    preview = store.query(
        "SELECT source, environments, tasks, tools, distinct_tool_names FROM source_summary ORDER BY source"
    )
    for table in CATALOG_TABLES:
        total = store.scalar(f"SELECT count(*) FROM {table} WHERE active")
        metadata = {"rows": dg.MetadataValue.int(total), "by_source": dg.MetadataValue.json(counts[table])}
        if table == "tasks":
            metadata["preview"] = dg.MetadataValue.md(
                _markdown(
                    store.query(
                        "SELECT task_id, env_id, split, turns, gold_calls, left(text, 80) AS text "
                        "FROM tasks WHERE active ORDER BY task_id LIMIT 5"
                    )
                )
            )
        if table == "environments":
            metadata["per_source"] = dg.MetadataValue.md(_markdown(preview))
        yield dg.MaterializeResult(asset_key=table, metadata=metadata)


def _markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns)
    rows = [
        "| " + " | ".join(str(v).replace("|", "/") for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, *rows])


def check_result(
    bad: pd.DataFrame, what: str, check_name: str | None = None, problem: str | None = None
) -> dg.AssetCheckResult:
    """Passed when ``bad`` (the violating rows) is empty, or, when ``problem`` is given, when it is ''
    (a problem may have no rows: an empty batch); shows the problem and up to 10 rows."""
    metadata = {
        "violations": dg.MetadataValue.int(len(bad)),
        "examples": dg.MetadataValue.md(_markdown(bad.head(10)) if len(bad) else f"no {what}"),
    }
    if problem:
        metadata["problem"] = dg.MetadataValue.text(problem)
    return dg.AssetCheckResult(
        check_name=check_name,
        passed=bad.empty if problem is None else not problem,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=metadata,
    )


@dg.asset_check(
    asset="tasks", blocking=True, description="Task ids are unique and each names a known environment."
)
def check_task_ids_unique_and_environment_known(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    bad = warehouse.warehouse().query(
        "SELECT task_id, env_id, count(*) OVER (PARTITION BY task_id) AS copies FROM tasks t WHERE active AND "
        "(env_id NOT IN (SELECT env_id FROM environments WHERE active) "
        " OR task_id IN (SELECT task_id FROM tasks GROUP BY task_id HAVING count(*) > 1))"
    )
    return check_result(bad, "duplicate ids or unknown environments")


@dg.asset_check(
    asset="tasks", blocking=True, description="Every tool a task needs exists in its environment."
)
def check_task_tools_exist(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    bad = warehouse.warehouse().query(
        "SELECT task_id, env_id, tool_name FROM task_tools WHERE effect IS NULL ORDER BY task_id"
    )
    return check_result(bad, "missing tools")


@dg.asset_check(asset="tasks", blocking=True, description="No task has empty text.")
def check_task_text_not_empty(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    bad = warehouse.warehouse().query(
        "SELECT task_id, env_id FROM tasks WHERE active AND length(trim(text)) = 0 ORDER BY task_id"
    )
    return check_result(bad, "empty texts")


@dg.asset_check(
    asset="tools", blocking=True, description="Tool specs are JSON-schema objects with a known effect."
)
def check_tool_specs_valid(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    bad = warehouse.warehouse().query(
        "SELECT env_id, tool_name, effect FROM tools WHERE active AND "
        "(json_extract_string(parameters, '$.type') IS DISTINCT FROM 'object' OR effect NOT IN ('read', 'write'))"
    )
    return check_result(bad, "invalid specs")


catalog_checks = [
    check_task_ids_unique_and_environment_known,
    check_task_tools_exist,
    check_task_text_not_empty,
    check_tool_specs_valid,
]
