"""Scheduler state as typed arrays: exact round trips, whatever the state holds, and arrays stored once."""

import math
import pickle

import duckdb
import numpy as np
import pandas as pd
import pytest

from warehouse.state_codec import decode_state, encode_state, manifest_holds
from warehouse.store import SchedulerState, Warehouse


def _state():
    rng = np.random.default_rng(3)
    return {
        "version": 2,
        "stats": {"n": rng.random(7), "last_step": np.arange(7, dtype=np.int64), "v0_sum": 0.1 + 0.2},
        "candidates": rng.integers(0, 9, (7, 3)),
        "edges": (np.arange(4, dtype=np.int64), np.ones(4, np.float32)),
        "rng": np.random.default_rng(5).bit_generator.state,  # 128-bit integers inside
        "scalars": [
            np.float64(1.5),
            np.int32(-3),
            np.bool_(True),
            True,
            None,
            "x",
            float("nan"),
            -0.0,
            math.inf,
        ],
        "empty": np.zeros((0, 4)),
        "zero_d": np.array(2.5),
        "by_int_key": {3: "three", (1, 2): [1, 2]},
        "ids": np.array(["a", "b"], dtype=object),  # object arrays are pickled leaves
    }


def _assert_same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


def test_state_codec_round_trip_keeps_types_and_values_exactly():
    manifest, arrays = encode_state(_state())
    decoded = decode_state(manifest, lambda digests: {d: arrays[d] for d in digests})
    _assert_same(_state(), decoded)


def test_state_codec_names_missing_arrays():
    manifest, _ = encode_state({"a": np.ones(3)})
    with pytest.raises(ValueError, match="missing array"):
        decode_state(manifest, lambda digests: {})


def test_manifest_holds_compares_one_field_exactly_without_decoding():
    edges = (np.array([0, 1], dtype=np.int32), np.array([2, 0], dtype=np.int32), np.array([0.5, 0.25]))
    manifest, _ = encode_state({"cross_edges": edges, "step": 3})
    assert manifest_holds(manifest, "cross_edges", tuple(a.copy() for a in edges))
    assert manifest_holds(manifest, "step", 3)
    assert not manifest_holds(manifest, "cross_edges", (edges[0], edges[1], edges[2] + 1e-12))
    assert not manifest_holds(manifest, "cross_edges", (edges[0].astype(np.int64), edges[1], edges[2]))
    assert not manifest_holds(manifest, "cross_edges", list(edges))  # a list is saved as another node
    assert not manifest_holds(manifest, "absent", None)


def _store(tmp_path) -> Warehouse:
    store = Warehouse(tmp_path / "w.duckdb")
    store.migrate()
    return store


def _batch():
    return pd.DataFrame(
        {"task_id": ["t1"], "env_id": ["e"], "role": ["coverage"], "predicted_variance": [0.1]}
    )


def test_store_scheduler_state_round_trips_and_stores_unchanged_arrays_once(tmp_path):
    store = _store(tmp_path)
    state = _state()
    store.save_batch("c", 1, _batch(), SchedulerState.of(state))
    arrays_after_one = store.scalar("SELECT count(*) FROM scheduler_state_arrays")
    state["stats"]["n"] = state["stats"]["n"] + 1.0  # one array changes, the rest do not
    store.save_batch("c", 2, _batch(), SchedulerState.of(state))
    assert store.scalar("SELECT count(*) FROM scheduler_state_arrays") == arrays_after_one + 1
    _assert_same(store.scheduler_state("c", 2, "selected"), state)
    assert store.scheduler_state("c", 3, "selected") is None


def test_store_scheduler_state_part_decodes_one_key_exactly(tmp_path):
    store = _store(tmp_path)
    store.save_batch("c", 1, _batch(), SchedulerState.of(_state()))
    edges = store.scheduler_state_part("c", 1, "selected", "edges")
    _assert_same(edges, _state()["edges"])
    assert store.scheduler_state_holds("c", 1, "selected", "edges", edges)  # what the pipeline checks it by
    _assert_same(store.scheduler_state_part("c", 1, "selected", "stats"), _state()["stats"])
    assert store.scheduler_state_part("c", 1, "selected", "absent") is None
    assert store.scheduler_state_part("c", 2, "selected", "edges") is None


def test_store_scheduler_state_still_loads_a_pickled_state_saved_before_migration_030(tmp_path):
    store = _store(tmp_path)
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO scheduler_states (campaign_id, step, phase, state, created_at) "
            "VALUES (?, 1, 'observed', ?, now())",
            ["old", pickle.dumps({"n": np.arange(3)})],
        )
    _assert_same(store.scheduler_state("old", 1, "observed"), {"n": np.arange(3)})
    assert store.scheduler_state_manifest("old", 1, "observed")
    assert store.scheduler_state_part("old", 1, "observed", "n") is None  # a pickle has no parts to read


def test_store_fold_task_stats_upserts_changed_rows_and_stamps_the_step(tmp_path):
    store = _store(tmp_path)
    row = {"n": 1.0, "m": 0.1, "mu": 0.5, "trend": 0.0, "last_step": 1}
    store.fold_task_stats("c", 1, pd.DataFrame([{"task_id": "a", **row}, {"task_id": "b", **row}]))
    assert (
        store.fold_task_stats("c", 2, pd.DataFrame([{"task_id": "b", **row, "n": 1.8, "last_step": 2}])) == 2
    )
    stats = store.task_stats("c").set_index("task_id")
    assert stats.loc["b", "n"] == 1.8 and stats.loc["a", "n"] == 1.0 and set(stats["step"]) == {2}
    assert duckdb.__version__  # the store is the real DuckDB file
