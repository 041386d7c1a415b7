"""The code location loads, and its asset keys, checks and jobs are what the docs promise."""

import dagster as dg

from pipelines.definitions import defs


def test_definitions_load_and_pin_asset_keys():
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"environments", "tools", "tasks"} <= keys
    checks = {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    assert {
        "check_task_ids_unique_and_environment_known",
        "check_task_tools_exist",
        "check_task_text_not_empty",
        "check_tool_specs_valid",
    } <= checks
    assert defs.resolve_job_def("refresh_catalog") is not None


def test_definitions_put_warehouse_writers_in_one_pool():
    graph = defs.resolve_asset_graph()
    writers = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for key in writers:
        node = graph.get(dg.AssetKey.from_user_string(key))
        assert node.pools == {"warehouse"}, key
