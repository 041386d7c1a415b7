"""The landing sensor: each new step file launches `ingest_rollouts` for its campaign."""

import json

import dagster as dg

from pipelines.jobs import ingest_rollouts
from pipelines.resources import PathsResource, WarehouseResource
from warehouse.landing import discover


@dg.sensor(job=ingest_rollouts, minimum_interval_seconds=5, default_status=dg.DefaultSensorStatus.RUNNING)
def landing_sensor(context: dg.SensorEvaluationContext, paths: PathsResource, warehouse: WarehouseResource):
    """Cursor: the content hash last requested per file, so a file is requested once per content;
    the run key (path + content hash) and the loader's own ledger make a second request harmless."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    store = warehouse.warehouse()
    known = set(context.instance.get_dynamic_partitions("campaigns"))
    requests, files = [], discover(paths.paths().landing)
    for landing_file in files:
        path = str(landing_file.path)
        if seen.get(path) == landing_file.content_hash or store.is_ingested(path, landing_file.content_hash):
            seen[path] = landing_file.content_hash
            continue
        if landing_file.campaign_id not in known:
            context.log.warning(f"{path}: campaign '{landing_file.campaign_id}' is not registered; skipped")
            continue
        requests.append(
            dg.RunRequest(
                run_key=landing_file.run_key,
                partition_key=landing_file.campaign_id,
                run_config={"ops": {"rollouts": {"config": {"path": path}}}},
                tags={"envsched/step": str(landing_file.step)},
            )
        )
        seen[path] = landing_file.content_hash
    present = {str(f.path) for f in files}
    return dg.SensorResult(
        run_requests=requests, cursor=json.dumps({p: h for p, h in seen.items() if p in present})
    )
