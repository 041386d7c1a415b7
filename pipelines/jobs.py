"""Jobs users launch from the UI or the CLI."""

import dagster as dg

refresh_catalog = dg.define_asset_job(
    "refresh_catalog",
    selection=dg.AssetSelection.groups("catalog"),
    description="Load every configured environment source into the catalogue tables.",
)
