"""The code location: assets, checks, jobs and resources. Only assembles; logic lives elsewhere."""

import dagster as dg

from assets.catalog import catalog_checks, environment_catalog
from pipelines.jobs import refresh_catalog
from pipelines.resources import PathsResource, WarehouseResource

defs = dg.Definitions(
    assets=[environment_catalog],
    asset_checks=catalog_checks,
    jobs=[refresh_catalog],
    resources={"warehouse": WarehouseResource(), "paths": PathsResource()},
)
