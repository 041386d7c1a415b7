"""The code location loads, and its asset keys, checks and jobs are what the docs promise."""

import dagster as dg

from pipelines.definitions import defs


def test_definitions_load_and_pin_asset_keys():
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert keys == {
        "environments",
        "tools",
        "tasks",
        "task_embeddings",
        "within_env_edges",
        "cross_env_edges",
        "training_step",
        "rollouts",
        "task_stats",
        "variance_predictions",
        "scheduled_batch",
    }
    checks = {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    assert {
        "check_task_ids_unique_and_environment_known",
        "check_task_tools_exist",
        "check_task_text_not_empty",
        "check_tool_specs_valid",
    } <= checks
    assert {
        "check_embeddings_complete_and_sized",
        "check_within_edges_valid",
        "check_cross_edges_valid",
        "check_batch_respects_quota",
    } <= checks
    for job in ("refresh_catalog", "build_graph", "plan_step", "train_step", "ingest_rollouts"):
        assert defs.resolve_job_def(job) is not None
    assert defs.resolve_sensor_def("landing_sensor").job_name == "ingest_rollouts"


def test_definitions_sensor_requests_nothing_on_an_empty_landing_folder(home):
    sensor = defs.resolve_sensor_def("landing_sensor")
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, definitions=defs, resources=dict(defs.resources))
        result = sensor(context)
    assert result.run_requests == []


def test_definitions_put_warehouse_writers_in_one_pool():
    graph = defs.resolve_asset_graph()
    # the assets with long work (rollouts; a cold restore, a history replay) take a slot after it
    slot_takers = {"training_step", "variance_predictions", "scheduled_batch"}
    writers = {k.to_user_string() for k in graph.get_all_asset_keys()} - slot_takers
    for key in writers:
        node = graph.get(dg.AssetKey.from_user_string(key))
        assert node.pools == {"warehouse"}, key
    assert not any(graph.get(dg.AssetKey(key)).pools for key in slot_takers)
