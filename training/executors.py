"""Rollout executors: where a batch's rollouts run — in this process, a local process pool, or Ray.

An executor runs ``worker(shared, request)`` for every request of a batch and returns the results in
request order. The worker comes from a *spec*: a small, hashable, picklable object with a ``key`` and
a ``build()`` that loads what the worker needs (sources, tables). Executors ship the spec with the
work and each process builds it once (``built_worker``, a per-process cache of immutable catalogue
data; environments stay fresh per rollout). ``shared`` is what changes every call (the policy's
parameters); requests carry their own seeds, so a result depends only on (spec, shared, request):
the same seed gives the same results on every executor, in any order, on any number of workers.

* ``inprocess`` (default): a loop in the calling process.
* ``process``: a ``concurrent.futures.ProcessPoolExecutor`` (spawned workers, kept for the
  executor's life); requests go out in contiguous chunks, ``chunks_per_worker`` per worker.
* ``ray``: each chunk is a Ray task (``ray`` extra). ``address`` joins an existing cluster
  (``"auto"``, ``"ray://head:10001"``); without one a local Ray starts. ``shared`` and the spec go
  into the object store once per call. ``runtime_env`` is passed to ``ray.init`` (e.g.
  ``{"working_dir": "."}`` so cluster workers can import this project).
"""

from __future__ import annotations

import functools
import multiprocessing
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol

EXECUTORS = ("inprocess", "process", "ray")


class WorkerSpec(Protocol):
    @property
    def key(self) -> str: ...

    def build(self) -> Callable[[Any, Any], Any]: ...


@functools.lru_cache(maxsize=8)
def built_worker(spec: WorkerSpec) -> Callable[[Any, Any], Any]:
    """The spec's worker, built once per process."""
    return spec.build()


def run_chunk(spec: WorkerSpec, shared: Any, requests: Sequence[Any]) -> list[Any]:
    """Run one chunk of requests in this process (what every executor ultimately calls)."""
    worker = built_worker(spec)
    return [worker(shared, request) for request in requests]


def chunked(items: Sequence[Any], n_chunks: int) -> list[Sequence[Any]]:
    """``items`` cut into at most ``n_chunks`` contiguous, nearly equal, non-empty chunks."""
    n_chunks = max(1, min(n_chunks, len(items)))
    size, extra = divmod(len(items), n_chunks)
    out, start = [], 0
    for i in range(n_chunks):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return [c for c in out if len(c)]


class RolloutExecutor(ABC):
    name: str

    @abstractmethod
    def run(self, spec: WorkerSpec, shared: Any, requests: Sequence[Any]) -> list[Any]:
        """Results of ``spec``'s worker on every request, in request order."""

    def close(self) -> None:
        """Release workers (pools, Ray connections this executor started)."""
        return None  # nothing to release by default

    def __enter__(self) -> RolloutExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcessExecutor(RolloutExecutor):
    name = "inprocess"

    def run(self, spec: WorkerSpec, shared: Any, requests: Sequence[Any]) -> list[Any]:
        return run_chunk(spec, shared, requests)


class ProcessPoolRolloutExecutor(RolloutExecutor):
    """A pool of ``workers`` spawned processes (spawn, not fork: the caller may hold threads and
    database connections, e.g. inside a Dagster run)."""

    name = "process"

    def __init__(self, workers: int = 2, chunks_per_worker: int = 4):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers, self.chunks_per_worker = workers, chunks_per_worker
        self._pool: ProcessPoolExecutor | None = None

    def run(self, spec: WorkerSpec, shared: Any, requests: Sequence[Any]) -> list[Any]:
        if not requests:
            return []
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        chunks = chunked(list(requests), self.workers * self.chunks_per_worker)
        futures = [self._pool.submit(run_chunk, spec, shared, chunk) for chunk in chunks]
        return [result for future in futures for result in future.result()]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayExecutor(RolloutExecutor):
    """Chunks of rollouts as Ray tasks. Starts (and on close stops) a local Ray unless Ray is already
    initialised or ``address`` names a cluster to join."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        chunks_per_worker: int = 4,
        runtime_env: dict[str, Any] | None = None,
        num_cpus_per_task: float = 1.0,
    ):
        try:
            import ray
        except ImportError as exc:
            raise ImportError(
                "the ray executor needs the `ray` extra: pip install 'envsched[ray]' (or `pip install ray`)"
            ) from exc
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            ray.init(
                address=address,
                num_cpus=workers if address is None else None,
                include_dashboard=False,
                runtime_env=runtime_env,
                log_to_driver=False,
            )
            self._started = True
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.chunks_per_worker = chunks_per_worker
        self._remote = ray.remote(num_cpus=num_cpus_per_task)(run_chunk)

    def run(self, spec: WorkerSpec, shared: Any, requests: Sequence[Any]) -> list[Any]:
        if not requests:
            return []
        ray = self._ray
        spec_ref, shared_ref = ray.put(spec), ray.put(shared)
        chunks = chunked(list(requests), self.workers * self.chunks_per_worker)
        refs = [self._remote.remote(spec_ref, shared_ref, list(chunk)) for chunk in chunks]
        return [result for chunk in ray.get(refs) for result in chunk]

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False


def make_executor(
    name: str = "inprocess",
    workers: int | None = None,
    address: str | None = None,
    runtime_env: dict[str, Any] | None = None,
    chunks_per_worker: int = 4,
) -> RolloutExecutor:
    """The executor called ``name`` (one of ``EXECUTORS``)."""
    if name == "inprocess":
        return InProcessExecutor()
    if name == "process":
        return ProcessPoolRolloutExecutor(workers or 2, chunks_per_worker)
    if name == "ray":
        return RayExecutor(address, workers, chunks_per_worker, runtime_env)
    raise ValueError(f"unknown rollout executor {name!r}; choose from {list(EXECUTORS)}")
